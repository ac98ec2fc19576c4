import Foundation

/// One thing the server is to hear from the app, in the order it happened. Kept in the backlog
/// until the server acknowledges it.
public enum Report: Sendable, Hashable, Codable {
    /// What the app's widget decodes the attributes type from (`PUT /v1/contracts/{type}`).
    case contract(ActivityContractShape)
    /// A push-to-start token (`POST /v1/push-to-start-tokens`), with the user signed in, if any
    /// (`{"users": [...]}` audiences reach it then).
    case pushToStartToken(attributesType: String, token: String, frequentPushesEnabled: Bool, userID: String? = nil)
    /// Live Activities were switched off: the device's push-to-start tokens start nothing now
    /// (`POST /v1/push-to-start-tokens/withdraw`).
    case pushToStartWithdrawn
    /// An activity's update token under its key (`POST /v1/activities/{key}/tokens`).
    case activityToken(key: String, activityID: String, attributesType: String, token: String, frequentPushesEnabled: Bool)
    /// A channel-bound activity listens to its key's channel (`nil`: whichever the key has in the
    /// app's environment): it has no update token (`POST /v1/activities/{key}/listening`).
    case listening(key: String, activityID: String, channelID: String?)
    /// An activity ended or dismissed, and by whom (`POST /v1/activities/{key}/ended`).
    case ended(key: String, activityID: String, state: EndState, cause: EndCause, at: Date)
    /// The app's widget token and the widgets placed, or none (`nil`: the last widget was
    /// removed), with the user signed in (`POST /v1/widget-tokens`).
    case widgetTokens(token: String?, widgets: [Widget], userID: String? = nil)
    /// Every control's token (`POST /v1/control-tokens`).
    case controlTokens([Control], userID: String? = nil)

    /// A widget as WidgetKit's `WidgetInfo` names it.
    public struct Widget: Sendable, Hashable, Codable {
        public var kind: String
        /// The `WidgetFamily`'s name: `systemSmall`, `accessoryRectangular`, …
        public var family: String

        public init(kind: String, family: String) {
            self.kind = kind
            self.family = family
        }
    }

    /// A control's kind and token (hex).
    public struct Control: Sendable, Hashable, Codable {
        public var kind: String
        public var token: String

        public init(kind: String, token: String) {
            self.kind = kind
            self.token = token
        }
    }

    public enum EndState: String, Sendable, Hashable, Codable {
        case ended, dismissed
    }

    /// Who ended an activity, as far as the app can tell: ActivityKit says only that it ended.
    public enum EndCause: String, Sendable, Hashable, Codable {
        /// The app called `end`.
        case app
        /// The person removed it from the Lock Screen while it was still going.
        case person
        /// Neither: an `end` push from the server, or the system (the 8-hour limit).
        case system
    }

    /// What a token report sets on the server (a type's push-to-start token, an activity's
    /// update token): a newer report of the same slot makes an older one needless.
    var tokenSlot: String? {
        switch self {
        case .pushToStartToken(let type, _, _, _): "push-to-start \(type)"
        case .activityToken(_, let activityID, _, _, _): "activity \(activityID)"
        case .widgetTokens: "widgets"
        case .controlTokens: "controls"
        case .contract, .pushToStartWithdrawn, .listening, .ended: nil
        }
    }
}

/// An HTTP request to the server: what a report becomes, given who sends it.
@_spi(Adapter) public struct ReportRequest: Sendable, Hashable {
    public var method: String
    /// From the server's root, percent-encoded (`/v1/activities/order%2042/tokens`).
    public var path: String
    public var body: Data
}

/// Who is reporting: the same on every report of one app on one device.
@_spi(Adapter) public struct Reporter: Sendable, Hashable, Codable {
    public var deviceID: String
    public var bundleID: String
    public var environment: PushEnvironment
    /// The device's iOS (`"17.6.1"`), sent with push-to-start tokens: a device before iOS 18
    /// cannot join a channel, and the server starts it otherwise. An iOS update restarts the
    /// device, so it is the same for as long as the app runs.
    public var systemVersion: String?
    /// The app's version and build (`"2.1 (45)"`), sent with its contracts and tokens: the server
    /// checks each push against the contract of the version on each device. An update relaunches
    /// the app, so it is the same for as long as it runs.
    public var appVersion: String?

    public init(deviceID: String, bundleID: String, environment: PushEnvironment, systemVersion: String? = nil, appVersion: String? = nil) {
        self.deviceID = deviceID
        self.bundleID = bundleID
        self.environment = environment
        self.systemVersion = systemVersion
        self.appVersion = appVersion
    }
}

/// Where the app's tokens are valid: its `aps-environment` entitlement. The server's name for the
/// same thing (`LiveActivityKit.PushEnvironment`, which this Foundation-only package cannot import).
public enum PushEnvironment: String, Sendable, Hashable, Codable {
    /// `development`: builds run from Xcode.
    case sandbox
    /// `production`: TestFlight and the App Store.
    case production
}

extension Report: CustomStringConvertible {
    /// The report as a log line may name it: a token is shortened to its first and last four
    /// digits (a whole one lets anyone who reads the log push to that activity or device).
    public var description: String {
        func short(_ token: String) -> String { token.count > 12 ? "\(token.prefix(4))…\(token.suffix(4))" : "…" }
        switch self {
        case .contract(let shape): return "the contract of \(shape.attributesType)"
        case .pushToStartToken(let type, let token, _, let user):
            return "the push-to-start token \(short(token)) of \(type)" + (user == nil ? "" : " (with a user)")
        case .pushToStartWithdrawn: return "the withdrawal of the push-to-start tokens"
        case .activityToken(let key, _, _, let token, _): return "the update token \(short(token)) under \(key)"
        case .listening(let key, _, _): return "the listening under \(key)"
        case .ended(let key, _, let state, let cause, _): return "the end (\(state.rawValue), by \(cause.rawValue)) under \(key)"
        case .widgetTokens(let token?, let widgets, _): return "the widget token \(short(token)) with \(widgets.count) widget(s)"
        case .widgetTokens(nil, _, _): return "the withdrawal of the widget token"
        case .controlTokens(let controls, _): return "the tokens of \(controls.count) control(s)"
        }
    }
}

extension Report {
    /// What the backend's grant that goes with the report names: the key a token or listener is
    /// reported under, or the user a push-to-start token is kept with.
    @_spi(Adapter) public var grantScope: GrantScope? {
        switch self {
        case .activityToken(let key, _, _, _, _), .listening(let key, _, _): .key(key)
        case .pushToStartToken(_, _, _, let user?), .widgetTokens(_, _, let user?), .controlTokens(_, let user?): .user(user)
        default: nil
        }
    }

    public enum GrantScope: Sendable, Hashable {
        case key(String)
        case user(String)
    }

    /// The request that carries the report, in the server's API (`openapi.json`), with the
    /// backend's grant for its key when the app was handed one (`LiveRelayClient.grant`).
    @_spi(Adapter) public func request(from reporter: Reporter, grant: String? = nil) throws -> ReportRequest {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        encoder.dateEncodingStrategy = .iso8601
        switch self {
        case .contract(let shape):
            let body = ContractBody(
                bundleID: reporter.bundleID, appVersion: reporter.appVersion, environment: reporter.environment, attributes: shape.attributes,
                contentState: shape.contentState)
            return ReportRequest(method: "PUT", path: "/v1/contracts/" + Self.segment(shape.attributesType), body: try encoder.encode(body))
        case .pushToStartToken(let type, let token, let frequent, let user):
            let body = TokenBody(
                deviceID: reporter.deviceID, bundleID: reporter.bundleID, activityID: nil, attributesType: type, token: token,
                frequentPushesEnabled: frequent, environment: reporter.environment, iOS: reporter.systemVersion, userID: user, grant: grant,
                appVersion: reporter.appVersion)
            return ReportRequest(method: "POST", path: "/v1/push-to-start-tokens", body: try encoder.encode(body))
        case .pushToStartWithdrawn:
            let body = DeviceBody(deviceID: reporter.deviceID, bundleID: reporter.bundleID)
            return ReportRequest(method: "POST", path: "/v1/push-to-start-tokens/withdraw", body: try encoder.encode(body))
        case .activityToken(let key, let activityID, let type, let token, let frequent):
            let body = TokenBody(
                deviceID: reporter.deviceID, bundleID: reporter.bundleID, activityID: activityID, attributesType: type, token: token,
                frequentPushesEnabled: frequent, environment: reporter.environment, grant: grant, appVersion: reporter.appVersion)
            return ReportRequest(method: "POST", path: "/v1/activities/\(Self.segment(key))/tokens", body: try encoder.encode(body))
        case .listening(let key, let activityID, let channelID):
            let body = ListeningBody(
                deviceID: reporter.deviceID, bundleID: reporter.bundleID, activityID: activityID, channelID: channelID,
                environment: reporter.environment, grant: grant)
            return ReportRequest(method: "POST", path: "/v1/activities/\(Self.segment(key))/listening", body: try encoder.encode(body))
        case .ended(let key, let activityID, let state, let cause, let at):
            let body = EndedBody(deviceID: reporter.deviceID, bundleID: reporter.bundleID, activityID: activityID, state: state, cause: cause, at: at)
            return ReportRequest(method: "POST", path: "/v1/activities/\(Self.segment(key))/ended", body: try encoder.encode(body))
        case .widgetTokens(let token, let widgets, let user):
            let body = SurfaceBody(
                deviceID: reporter.deviceID, bundleID: reporter.bundleID, environment: reporter.environment, token: token, widgets: widgets,
                userID: user, grant: grant, appVersion: reporter.appVersion)
            return ReportRequest(method: "POST", path: "/v1/widget-tokens", body: try encoder.encode(body))
        case .controlTokens(let controls, let user):
            let body = SurfaceBody(
                deviceID: reporter.deviceID, bundleID: reporter.bundleID, environment: reporter.environment, controls: controls, userID: user,
                grant: grant, appVersion: reporter.appVersion)
            return ReportRequest(method: "POST", path: "/v1/control-tokens", body: try encoder.encode(body))
        }
    }

    /// One path segment: a key may hold `/` or spaces.
    static func segment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/?#"))) ?? text
    }

    private struct ContractBody: Encodable {
        var bundleID: String
        var appVersion: String?
        /// Where a development build may register its version's contract again, changed.
        var environment: PushEnvironment
        var attributes: [String: ContractType]
        var contentState: [String: ContractType]
    }

    private struct DeviceBody: Encodable {
        var deviceID: String
        var bundleID: String
    }

    private struct TokenBody: Encodable {
        var deviceID: String
        var bundleID: String
        var activityID: String?
        var attributesType: String
        var token: String
        var frequentPushesEnabled: Bool
        var environment: PushEnvironment
        /// Push-to-start tokens only.
        var iOS: String? = nil
        var userID: String? = nil
        var grant: String? = nil
        var appVersion: String? = nil
    }

    /// `/v1/widget-tokens` (token, widgets) and `/v1/control-tokens` (controls).
    private struct SurfaceBody: Encodable {
        var deviceID: String
        var bundleID: String
        var environment: PushEnvironment
        var token: String? = nil
        var widgets: [Widget]? = nil
        var controls: [Control]? = nil
        var userID: String?
        var grant: String?
        var appVersion: String?
    }

    private struct ListeningBody: Encodable {
        var deviceID: String
        var bundleID: String
        var activityID: String
        var channelID: String?
        var environment: PushEnvironment
        var grant: String?
    }

    private struct EndedBody: Encodable {
        var deviceID: String
        var bundleID: String
        var activityID: String
        var state: EndState
        var cause: EndCause
        var at: Date
    }
}

extension Data {
    /// A token as the server takes it: lowercase hex.
    var hex: String { map { String(format: "%02x", $0) }.joined() }
}
