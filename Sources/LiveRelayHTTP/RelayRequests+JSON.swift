import Foundation
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

// The API's request bodies read into the service's typed requests; every error names the field
// and the rule. Starts, updates and ends carry free-form JSON (attributes, content state) whose
// literals must reach the device byte for byte, so `JSONBodyReader` reads them; the other bodies
// have a fixed shape and are `Decodable`.

extension PriorityChoice {
    static func read(_ body: JSONBodyReader, default fallback: PriorityChoice) throws -> PriorityChoice {
        guard let value = body.value("priority") else { return fallback }
        if value.stringValue == "auto" { return .auto }
        if case .number = value, let number = value.doubleValue, number == 10 || number == 5, let priority = APNsPriority(rawValue: Int(number)) {
            return .fixed(priority)
        }
        throw JSONFieldError.invalid(body.field("priority"), "must be 10, 5 or \"auto\"")
    }
}

extension VersionsChoice {
    static func read(_ body: JSONBodyReader) throws -> VersionsChoice {
        guard let name = try body.string("versions") else { return .all }
        guard let choice = VersionsChoice(rawValue: name) else {
            throw JSONFieldError.invalid(
                body.field("versions"), "must be \"all\" (every device) or \"decodable\" (only devices whose app version decodes it)")
        }
        return choice
    }
}

/// `POST /v1/activities/{key}/start`.
extension StartRequest {
    package static let fields = [
        "attributesType", "attributes", "contentState", "alert", "staleDate", "relevanceScore", "audience", "channel", "priority",
        "expiration", "at", "versions",
    ]

    package init(json: JSONValue) throws {
        let body = try JSONBodyReader(json, fields: Self.fields)
        let attributesType = try body.requireString("attributesType")
        let attributes = try requireObject(body, "attributes")
        let contentState = try requireObject(body, "contentState")
        guard let alertBody = try body.object("alert", fields: AlertConfiguration.fields) else {
            throw JSONFieldError(code: "missing", message: "is required: a push-to-start without an alert is dropped by the device", field: "alert")
        }
        let alert = try AlertConfiguration(alertBody)
        let staleDate = try body.date("staleDate")
        let relevanceScore = try readRelevance(body)
        guard let audienceBody = try body.object("audience", fields: ["devices", "users", "everyone"]) else {
            throw JSONFieldError(
                code: "missing", message: "is required: {\"devices\": [ids]}, {\"users\": [ids]} or {\"everyone\": true}", field: "audience")
        }
        let audience = try readAudience(audienceBody)
        var channelChoice: UpdateChannelChoice?
        if let channel = try body.object("channel", fields: ["id", "storagePolicy"]) {
            if let id = try channel.string("id") {
                channelChoice = .existing(id)
            } else {
                let policy = try channel.number("storagePolicy") ?? 1
                guard policy == 0 || policy == 1 else {
                    throw JSONFieldError.invalid(channel.field("storagePolicy"), "must be 0 (No Message Stored) or 1 (Most Recent Message Stored)")
                }
                channelChoice = .create(storagePolicy: Int(policy))
            }
        }
        self.init(
            attributesType: attributesType, attributes: attributes, contentState: contentState, alert: alert, staleDate: staleDate,
            relevanceScore: relevanceScore, audience: audience, channel: channelChoice,
            priority: try PriorityChoice.read(body, default: .fixed(.immediate)), expiration: try body.date("expiration"), at: try body.date("at"),
            versions: try VersionsChoice.read(body))
    }
}

/// `POST /v1/widgets/reload` and `/v1/controls/reload`.
extension ReloadRequest {
    package static let fields = ["kinds", "audience", "priority", "expiration", "at"]

    package init(json: JSONValue) throws {
        let body = try JSONBodyReader(json, fields: Self.fields)
        guard let audienceBody = try body.object("audience", fields: ["devices", "users", "everyone"]) else {
            throw JSONFieldError(
                code: "missing", message: "is required: {\"devices\": [ids]}, {\"users\": [ids]} or {\"everyone\": true}", field: "audience")
        }
        var kinds: [String]?
        if let value = body.value("kinds"), value != .null {
            guard let items = value.arrayElements, let names = Optional(items.compactMap(\.stringValue)), names.count == items.count else {
                throw JSONFieldError.invalid(body.field("kinds"), "must be an array of widget or control kinds")
            }
            kinds = names
        }
        var priority = APNsPriority.immediate
        if case .fixed(let chosen) = try PriorityChoice.read(body, default: .fixed(.immediate)) {
            priority = chosen
        } else {
            throw JSONFieldError.invalid(body.field("priority"), "must be 10 or 5: the system budgets reloads itself")
        }
        self.init(
            kinds: kinds, audience: try readAudience(audienceBody), priority: priority, expiration: try body.date("expiration"),
            at: try body.date("at"))
    }
}

/// `POST /v1/activities/{key}/update` and `…/end`.
extension ChangeRequest {
    package static let updateFields = ["contentState", "alert", "staleDate", "relevanceScore", "priority", "expiration", "at", "versions"]
    package static let endFields = updateFields + ["dismissalDate"]

    package init(event: LiveActivityPayload.Event, json: JSONValue) throws {
        let body = try JSONBodyReader(json, fields: event == .end ? Self.endFields : Self.updateFields)
        var contentState: JSONValue?
        if event == .update || body.value("contentState") != nil { contentState = try requireObject(body, "contentState") }
        self.init(
            event: event, contentState: contentState,
            alert: try body.object("alert", fields: AlertConfiguration.fields).map { try AlertConfiguration($0) },
            staleDate: try body.date("staleDate"), relevanceScore: try readRelevance(body), dismissalDate: try body.date("dismissalDate"),
            priority: try PriorityChoice.read(body, default: .auto), expiration: try body.date("expiration"), at: try body.date("at"),
            versions: try VersionsChoice.read(body))
    }
}

/// `POST /v1/push-to-start-tokens` (client key).
package struct PushToStartBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable {
        case deviceID, bundleID, attributesType, token, frequentPushesEnabled, environment, userID, iOS, grant, appVersion
    }

    /// Its app's bundle ID ("" when the body leaves it to the key's app: `RelayAPI.bodyApp`).
    var registration: PushToStartRegistration
    let namedApp: String?

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        namedApp = try body.nonEmptyString(.bundleID)
        registration = PushToStartRegistration(
            deviceID: try body.requireNonEmptyString(.deviceID), bundleID: namedApp ?? "",
            attributesType: try body.requireNonEmptyString(.attributesType), token: try body.deviceToken(.token),
            frequentPushesEnabled: try body.decodeIfPresent(Bool.self, forKey: .frequentPushesEnabled) ?? false,
            environment: try body.environment(.environment), userID: try body.decodeIfPresent(String.self, forKey: .userID),
            systemVersion: try body.systemVersion(.iOS))
        registration.grant = try body.grant(.grant)
        registration.appVersion = try body.decodeIfPresent(String.self, forKey: .appVersion)
    }
}

/// `POST /v1/widget-tokens` (client key): the app's widget token and the widgets placed, or no
/// token (null or left out) and no widgets once the last one is removed.
package struct WidgetTokensBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable {
        case deviceID, bundleID, environment, token, widgets, userID, grant, appVersion
    }

    var registration: SurfaceRegistration
    let namedApp: String?

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        namedApp = try body.nonEmptyString(.bundleID)
        let token = try body.contains(.token) && !body.decodeNil(forKey: .token) ? try body.deviceToken(.token) : nil
        registration = SurfaceRegistration(
            deviceID: try body.requireNonEmptyString(.deviceID), bundleID: namedApp ?? "", environment: try body.environment(.environment),
            type: .widgets, widgetToken: token, widgets: try body.decode([Widget].self, forKey: .widgets).map(\.placement),
            userID: try body.nonEmptyString(.userID))
        registration.grant = try body.grant(.grant)
        registration.appVersion = try body.decodeIfPresent(String.self, forKey: .appVersion)
    }

    /// `{"kind": …, "family": …}`, WidgetKit's `WidgetInfo`.
    struct Widget: Decodable {
        let placement: WidgetPlacement
        enum CodingKeys: String, CodingKey, CaseIterable { case kind, family }

        init(from decoder: any Decoder) throws {
            try decoder.refuseUnknownKeys(CodingKeys.allCases.map(\.rawValue))
            let widget = try decoder.container(keyedBy: CodingKeys.self)
            placement = WidgetPlacement(kind: try widget.requireNonEmptyString(.kind), family: try widget.requireNonEmptyString(.family))
        }
    }
}

/// `POST /v1/control-tokens` (client key): the token of every control the app has (none: all removed).
package struct ControlTokensBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable {
        case deviceID, bundleID, environment, controls, userID, grant, appVersion
    }

    var registration: SurfaceRegistration
    let namedApp: String?

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        namedApp = try body.nonEmptyString(.bundleID)
        registration = SurfaceRegistration(
            deviceID: try body.requireNonEmptyString(.deviceID), bundleID: namedApp ?? "", environment: try body.environment(.environment),
            type: .controls, controls: try body.decode([Control].self, forKey: .controls).map(\.token), userID: try body.nonEmptyString(.userID))
        registration.grant = try body.grant(.grant)
        registration.appVersion = try body.decodeIfPresent(String.self, forKey: .appVersion)
    }

    /// `{"kind": …, "token": …}`, a control and its `ControlPushInfo.token`.
    struct Control: Decodable {
        let token: SurfaceRegistration.ControlToken
        enum CodingKeys: String, CodingKey, CaseIterable { case kind, token }

        init(from decoder: any Decoder) throws {
            try decoder.refuseUnknownKeys(CodingKeys.allCases.map(\.rawValue))
            let control = try decoder.container(keyedBy: CodingKeys.self)
            token = SurfaceRegistration.ControlToken(kind: try control.requireNonEmptyString(.kind), token: try control.deviceToken(.token))
        }
    }
}

/// `POST /v1/push-to-start-tokens/withdraw` (client key): Live Activities switched off on the device.
package struct WithdrawBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable {
        case deviceID, bundleID
    }

    let deviceID: String
    let namedApp: String?

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        namedApp = try body.nonEmptyString(.bundleID)
        deviceID = try body.requireNonEmptyString(.deviceID)
    }
}

/// `POST /v1/activities/{key}/tokens` (client key).
package struct ActivityTokenBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable {
        case deviceID, bundleID, activityID, attributesType, token, frequentPushesEnabled, environment, grant, appVersion
    }

    /// Its app's bundle ID ("" when the body leaves it to the key's app: `RelayAPI.bodyApp`).
    var registration: ActivityTokenRegistration
    let namedApp: String?

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        namedApp = try body.nonEmptyString(.bundleID)
        registration = ActivityTokenRegistration(
            deviceID: try body.requireNonEmptyString(.deviceID), bundleID: namedApp ?? "",
            activityID: try body.decodeIfPresent(String.self, forKey: .activityID),
            attributesType: try body.requireNonEmptyString(.attributesType), token: try body.deviceToken(.token),
            frequentPushesEnabled: try body.decodeIfPresent(Bool.self, forKey: .frequentPushesEnabled) ?? false,
            environment: try body.environment(.environment))
        registration.grant = try body.grant(.grant)
        registration.appVersion = try body.decodeIfPresent(String.self, forKey: .appVersion)
    }
}

/// `POST /v1/activities/{key}/listening` (client key): the device's channel-bound activity
/// listens to the key's channel.
package struct ChannelListenerBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable {
        case deviceID, bundleID, activityID, channelID, environment, grant
    }

    /// APNs' channel ids are base64 of a few bytes; this is far above any.
    static let longestChannelID = 256
    /// Its app's bundle ID ("" when the body leaves it to the key's app: `RelayAPI.bodyApp`).
    var registration: ChannelListenerRegistration
    let namedApp: String?

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        namedApp = try body.nonEmptyString(.bundleID)
        let channelID = try body.nonEmptyString(.channelID)
        if let channelID, channelID.utf8.count > Self.longestChannelID {
            throw DecodingError.dataCorruptedError(forKey: .channelID, in: body, debugDescription: "must be at most \(Self.longestChannelID) bytes")
        }
        registration = ChannelListenerRegistration(
            deviceID: try body.requireNonEmptyString(.deviceID), bundleID: namedApp ?? "",
            activityID: try body.decodeIfPresent(String.self, forKey: .activityID), channelID: channelID,
            environment: try body.environment(.environment))
        registration.grant = try body.grant(.grant)
    }
}

/// `POST /v1/activities/{key}/ended` (client key): the activity ended or the person dismissed it.
package struct EndedBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable {
        case deviceID, bundleID, activityID, state, cause, at
    }

    /// Its app's bundle ID ("" when the body leaves it to the key's app: `RelayAPI.bodyApp`).
    var report: EndedReport
    /// Who ended it, in the app's words (LiveRelayKit's: `app`, `person`, `system`), kept with the token.
    static let longestCause = 100
    let namedApp: String?

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        namedApp = try body.nonEmptyString(.bundleID)
        let deviceID = try body.requireNonEmptyString(.deviceID)
        let bundleID = namedApp ?? ""
        let activityID = try body.decodeIfPresent(String.self, forKey: .activityID)
        let state: ActivityTokenState
        switch try body.requireNonEmptyString(.state) {
        case "ended": state = .ended
        case "dismissed": state = .dismissed
        default: throw DecodingError.dataCorruptedError(forKey: .state, in: body, debugDescription: "must be \"ended\" or \"dismissed\"")
        }
        let cause = try body.decodeIfPresent(String.self, forKey: .cause)
        if let cause, cause.count > Self.longestCause {
            throw DecodingError.dataCorruptedError(forKey: .cause, in: body, debugDescription: "must be at most \(Self.longestCause) characters")
        }
        report = EndedReport(deviceID: deviceID, bundleID: bundleID, activityID: activityID, state: state, cause: cause, at: try body.date(.at))
    }
}

/// `PUT /v1/contracts/{attributesType}` (client, server or admin key): `{"bundleID", "attributes",
/// "contentState"}`, the schemas in `ActivityContract`'s JSON form, whose field order counts; the
/// app version it is for (`appVersion`; left out, any version), the app build's environment
/// (`environment`, as the app's tokens say it) and, from the backend, `pinned`.
package struct ContractBody {
    package static let fields = registrationFields + ActivityContract.fields
    static let registrationFields = ["bundleID", "appVersion", "environment", "pinned"]

    /// Nil when the body leaves it to the key's app (`RelayAPI.bodyApp`).
    var namedApp: String?
    var contract: ActivityContract
    var appVersion: String?
    var environment: PushEnvironment?
    var pinned: Bool?

    init(json: JSONValue, attributesType: String) throws {
        let body = try JSONBodyReader(json, fields: Self.registrationFields + ActivityContract.fields)
        namedApp = try body.string("bundleID")
        appVersion = try body.string("appVersion")
        environment = try body.string("environment").map { name in
            guard let environment = PushEnvironment(rawValue: name) else {
                throw JSONFieldError.invalid("environment", "must be sandbox or production, got \"\(name)\"")
            }
            return environment
        }
        pinned = try body.bool("pinned")
        if let name = try body.string("name"), name != attributesType {
            throw JSONFieldError.invalid("name", "is \(name), but the path names \(attributesType)")
        }
        let schemas = JSONValue.object(body.members.filter { !Self.registrationFields.contains($0.key) }.map { ($0.key, $0.value) })
        do {
            contract = try ActivityContract(json: schemas, name: attributesType)
        } catch {
            throw JSONFieldError(error)
        }
    }
}

/// `POST /v1/api-keys` (admin key).
struct APIKeyBody: APIRequestBody {
    static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable { case name, scope, bundleID }

    let name: String
    let scope: APIKeyScope
    /// The app the key is for (required for a client key; left out, a server key serves every app).
    let bundleID: String?

    init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        name = try body.requireNonEmptyString(.name)
        guard let scope = APIKeyScope(rawValue: try body.requireNonEmptyString(.scope)) else {
            throw DecodingError.dataCorruptedError(forKey: .scope, in: body, debugDescription: "must be \(APIKeyScope.listed)")
        }
        self.scope = scope
        bundleID = try body.nonEmptyString(.bundleID)
    }
}

/// `PUT /v1/apps/{bundleID}` (admin key): the credentials that sign the app's pushes.
struct AppBody: APIRequestBody {
    static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable { case teamID, keyID, signingKey, ungrantedReports }

    let teamID: String
    let keyID: String
    let signingKey: String
    let ungrantedReports: Set<PushEnvironment>?

    init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        teamID = try body.requireNonEmptyString(.teamID)
        keyID = try body.requireNonEmptyString(.keyID)
        signingKey = try body.requireNonEmptyString(.signingKey)
        ungrantedReports = try body.decodeIfPresent([PushEnvironment].self, forKey: .ungrantedReports).map(Set.init)
    }

    func registration(bundleID: String) throws -> AppRegistration {
        do {
            return AppRegistration(
                bundleID: try BundleID(bundleID), teamID: teamID, keyID: keyID, signingKey: signingKey, ungrantedReports: ungrantedReports)
        } catch {
            throw JSONFieldError.invalid("bundleID", error.message)
        }
    }
}

/// `POST /v1/grants` (server key): a grant for the app's key, which the backend hands its app.
package struct GrantBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable { case bundleID, key, user, expiresIn }

    let namedApp: String?
    let key: String?
    let user: String?
    let expiresIn: TimeInterval?

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        namedApp = try body.nonEmptyString(.bundleID)
        key = try body.nonEmptyString(.key)
        user = try body.nonEmptyString(.user)
        expiresIn = try body.decodeIfPresent(Double.self, forKey: .expiresIn)
    }
}

extension KeyedDecodingContainer {
    /// A grant is a short text of LiveRelay's own (`ActivityGrant`): anything longer is not one.
    fileprivate func grant(_ key: Key) throws -> String? {
        guard let grant = try nonEmptyString(key) else { return nil }
        guard grant.utf8.count <= 1_024 else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "must be at most 1024 bytes")
        }
        return grant
    }

    fileprivate func deviceToken(_ key: Key) throws -> DeviceToken {
        let text = try requireNonEmptyString(key)
        do { return try DeviceToken(text) } catch { throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: error.message) }
    }

    /// `sandbox` (the default: a development build) or `production` (TestFlight, App Store): the
    /// app's `aps-environment`.
    fileprivate func environment(_ key: Key) throws -> PushEnvironment {
        let name = try decodeIfPresent(String.self, forKey: key) ?? PushEnvironment.sandbox.rawValue
        guard let environment = PushEnvironment(rawValue: name) else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "must be \"sandbox\" or \"production\"")
        }
        return environment
    }
}

// MARK: Field readers

extension AlertConfiguration {
    static let fields = ["title", "body", "sound"]

    /// `{"title": "…", "body": "…", "sound": "default" | "<file>" | null}`; title and body are
    /// literal text or `{"key": "…", "arguments": […]}` for the app's localisation files.
    init(_ body: JSONBodyReader) throws {
        func text(_ name: String) throws -> AlertConfiguration.Text {
            let value = try body.require(name)
            if let literal = value.stringValue { return .literal(literal) }
            let localized = try JSONBodyReader(value, path: body.field(name), fields: ["key", "arguments"])
            let arguments = try localized.value("arguments").map { value in
                guard let items = value.arrayElements?.compactMap(\.stringValue), items.count == value.arrayElements?.count else {
                    throw JSONFieldError.invalid(localized.field("arguments"), "must be an array of strings")
                }
                return items
            }
            return .localized(key: try localized.requireString("key"), arguments: arguments ?? [])
        }
        let sound = try body.string("sound")
        self.init(title: try text("title"), body: try text("body"), sound: sound.map { $0 == "default" ? .default : .named($0) })
    }
}

private func requireObject(_ body: JSONBodyReader, _ key: String) throws -> JSONValue {
    let value = try body.require(key)
    guard case .object = value else {
        throw JSONFieldError(code: "wrong_type", message: "must be a JSON object, got \(value.typeName)", field: body.field(key))
    }
    return value
}

private func readRelevance(_ body: JSONBodyReader) throws -> Double? {
    guard let score = try body.number("relevanceScore") else { return nil }
    do { try LiveActivityPayload.checkRelevance(score) } catch { throw JSONFieldError.invalid(body.field("relevanceScore"), error.message) }
    return score
}

private func readAudience(_ body: JSONBodyReader) throws -> Audience {
    func ids(_ key: String) throws -> [String]? {
        guard let value = body.value(key) else { return nil }
        guard let items = value.arrayElements, let strings = Optional(items.compactMap(\.stringValue)), strings.count == items.count,
            !strings.isEmpty, strings.allSatisfy({ !$0.isEmpty })
        else { throw JSONFieldError.invalid(body.field(key), "must be a non-empty array of non-empty strings") }
        return strings
    }
    let devices = try ids("devices")
    let users = try ids("users")
    let everyone = try body.bool("everyone")
    switch (devices, users, everyone) {
    case (let devices?, nil, nil): return .devices(devices)
    case (nil, let users?, nil): return .users(users)
    case (nil, nil, true): return .everyone
    default: throw JSONFieldError.invalid(body.path, "must have exactly one of devices, users or \"everyone\": true")
    }
}
