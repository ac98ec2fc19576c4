import Foundation
import LiveActivityKit
import LiveRelayStore

/// The priority asked for a push: a fixed one, or `auto` (the budget governor decides).
package enum PriorityChoice: Sendable, Hashable, Codable {
    case fixed(APNsPriority)
    case auto
}

/// Where a start's activities take their updates from.
package enum UpdateChannelChoice: Sendable, Hashable, Codable {
    /// A new broadcast channel with this message storage policy (0 or 1).
    case create(storagePolicy: Int)
    /// A channel that already exists.
    case existing(String)
}

/// Starts a key on an audience's devices through their push-to-start tokens.
package struct StartRequest: Sendable, Hashable {
    package var attributesType: String
    package var attributes: JSONValue
    package var contentState: JSONValue
    package var alert: AlertConfiguration
    package var staleDate: Date?
    package var relevanceScore: Double?
    package var audience: Audience
    /// nil: each device gets its own update token (`input-push-token`).
    package var channel: UpdateChannelChoice?
    package var priority: PriorityChoice
    package var expiration: Date?
    /// When to run it; nil or past: now.
    package var at: Date?
    package var versions: VersionsChoice

    package init(
        attributesType: String, attributes: JSONValue, contentState: JSONValue, alert: AlertConfiguration, staleDate: Date? = nil,
        relevanceScore: Double? = nil, audience: Audience, channel: UpdateChannelChoice? = nil, priority: PriorityChoice = .fixed(.immediate),
        expiration: Date? = nil, at: Date? = nil, versions: VersionsChoice = .all
    ) {
        self.versions = versions
        self.attributesType = attributesType
        self.attributes = attributes
        self.contentState = contentState
        self.alert = alert
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
        self.audience = audience
        self.channel = channel
        self.priority = priority
        self.expiration = expiration
        self.at = at
    }
}

/// Updates or ends a key.
package struct ChangeRequest: Sendable, Hashable {
    package var event: LiveActivityPayload.Event
    /// Required on update; an end without it repeats the last content.
    package var contentState: JSONValue?
    package var alert: AlertConfiguration?
    package var staleDate: Date?
    package var relevanceScore: Double?
    /// End only: when the ended activity leaves the Lock Screen (now or earlier: at once).
    package var dismissalDate: Date?
    package var priority: PriorityChoice
    package var expiration: Date?
    package var at: Date?
    package var versions: VersionsChoice

    package init(
        event: LiveActivityPayload.Event, contentState: JSONValue?, alert: AlertConfiguration? = nil, staleDate: Date? = nil,
        relevanceScore: Double? = nil, dismissalDate: Date? = nil, priority: PriorityChoice = .auto, expiration: Date? = nil, at: Date? = nil,
        versions: VersionsChoice = .all
    ) {
        self.versions = versions
        self.event = event
        self.contentState = contentState
        self.alert = alert
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
        self.dismissalDate = dismissalDate
        self.priority = priority
        self.expiration = expiration
        self.at = at
    }
}

/// Which devices of the audience a start or change goes to, by the version of their app.
package enum VersionsChoice: String, Sendable, Hashable, Codable, CaseIterable {
    /// Every device; those whose app version cannot decode it are named in a warning (they drop it).
    case all
    /// Only devices whose app version decodes it (`TypeContracts.check`).
    case decodable
}

/// A request that can wait in the store until it is due, kept there as its own JSON (`Codable`:
/// `stored()`), not the API's.
package enum ScheduledRequest: Sendable, Hashable, Codable {
    case start(StartRequest)
    case change(ChangeRequest)
    case reload(ReloadPushType, ReloadRequest)

    /// The schedule's action.
    package var action: DeliveryAction {
        switch self {
        case .start: .start
        case .change(let change): DeliveryAction(change.event)
        case .reload: .reload
        }
    }
}

extension ScheduledRequest {
    /// As a schedule keeps it (`ScheduleRecord.request`).
    package func stored() throws -> JSONValue { try JSONValue(parsing: [UInt8](try JSONEncoder().encode(self))) }

    /// A schedule's request as kept by `stored()`; nil for one kept in another form (an earlier
    /// release kept the API's body).
    init?(stored json: JSONValue) {
        guard let request = try? JSONDecoder().decode(Self.self, from: Data(json.serialized)) else { return nil }
        self = request
    }
}

/// JSON values (attributes and content states) are kept as their text, which keeps every literal
/// as it was given (`1e2` stays `1e2`): the payload built when the request runs is the same.
extension StartRequest: Codable {
    private enum CodingKeys: String, CodingKey {
        case attributesType, attributes, contentState, alert, staleDate, relevanceScore, audience, channel, priority, expiration, at, versions
    }

    package init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            attributesType: try values.decode(String.self, forKey: .attributesType),
            attributes: try values.decodeJSON(forKey: .attributes), contentState: try values.decodeJSON(forKey: .contentState),
            alert: try values.decode(AlertConfiguration.self, forKey: .alert),
            staleDate: try values.decodeIfPresent(Date.self, forKey: .staleDate),
            relevanceScore: try values.decodeIfPresent(Double.self, forKey: .relevanceScore),
            audience: try values.decode(Audience.self, forKey: .audience),
            channel: try values.decodeIfPresent(UpdateChannelChoice.self, forKey: .channel),
            priority: try values.decode(PriorityChoice.self, forKey: .priority),
            expiration: try values.decodeIfPresent(Date.self, forKey: .expiration), at: try values.decodeIfPresent(Date.self, forKey: .at),
            versions: try values.decodeIfPresent(VersionsChoice.self, forKey: .versions) ?? .all)
    }

    package func encode(to encoder: any Encoder) throws {
        var values = encoder.container(keyedBy: CodingKeys.self)
        try values.encode(attributesType, forKey: .attributesType)
        try values.encode(json: attributes, forKey: .attributes)
        try values.encode(json: contentState, forKey: .contentState)
        try values.encode(alert, forKey: .alert)
        try values.encodeIfPresent(staleDate, forKey: .staleDate)
        try values.encodeIfPresent(relevanceScore, forKey: .relevanceScore)
        try values.encode(audience, forKey: .audience)
        try values.encodeIfPresent(channel, forKey: .channel)
        try values.encode(priority, forKey: .priority)
        try values.encodeIfPresent(expiration, forKey: .expiration)
        try values.encodeIfPresent(at, forKey: .at)
        if versions != .all { try values.encode(versions, forKey: .versions) }
    }
}

extension ChangeRequest: Codable {
    private enum CodingKeys: String, CodingKey {
        case event, contentState, alert, staleDate, relevanceScore, dismissalDate, priority, expiration, at, versions
    }

    package init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            event: try values.decode(LiveActivityPayload.Event.self, forKey: .event),
            contentState: try values.decodeJSONIfPresent(forKey: .contentState),
            alert: try values.decodeIfPresent(AlertConfiguration.self, forKey: .alert),
            staleDate: try values.decodeIfPresent(Date.self, forKey: .staleDate),
            relevanceScore: try values.decodeIfPresent(Double.self, forKey: .relevanceScore),
            dismissalDate: try values.decodeIfPresent(Date.self, forKey: .dismissalDate),
            priority: try values.decode(PriorityChoice.self, forKey: .priority),
            expiration: try values.decodeIfPresent(Date.self, forKey: .expiration), at: try values.decodeIfPresent(Date.self, forKey: .at),
            versions: try values.decodeIfPresent(VersionsChoice.self, forKey: .versions) ?? .all)
    }

    package func encode(to encoder: any Encoder) throws {
        var values = encoder.container(keyedBy: CodingKeys.self)
        try values.encode(event, forKey: .event)
        try values.encodeIfPresent(json: contentState, forKey: .contentState)
        try values.encodeIfPresent(alert, forKey: .alert)
        try values.encodeIfPresent(staleDate, forKey: .staleDate)
        try values.encodeIfPresent(relevanceScore, forKey: .relevanceScore)
        try values.encodeIfPresent(dismissalDate, forKey: .dismissalDate)
        try values.encode(priority, forKey: .priority)
        try values.encodeIfPresent(expiration, forKey: .expiration)
        try values.encodeIfPresent(at, forKey: .at)
        if versions != .all { try values.encode(versions, forKey: .versions) }
    }
}

/// An app the server is to send for, with the credentials its pushes are signed with.
package struct AppRegistration: Sendable, Hashable {
    package var bundleID: BundleID
    package var teamID: String
    package var keyID: String
    /// The `.p8` key, PEM.
    package var signingKey: String
    /// The environments whose reports need no grant (`AppRecord.ungrantedReports`); nil keeps
    /// what the app had (sandbox for a new one).
    package var ungrantedReports: Set<PushEnvironment>?

    package init(bundleID: BundleID, teamID: String, keyID: String, signingKey: String, ungrantedReports: Set<PushEnvironment>? = nil) {
        self.ungrantedReports = ungrantedReports
        self.bundleID = bundleID
        self.teamID = teamID
        self.keyID = keyID
        self.signingKey = signingKey
    }
}

/// What a version of an app's widget decodes a type from (`RelayService.registerContract`).
package struct ContractRegistration: Sendable, Hashable {
    package var contract: ActivityContract
    package var bundleID: String
    /// nil: for any version of the app (`ContractRecord.anyVersion`).
    package var appVersion: String?
    /// The app build's environment, as its tokens say it: where it takes ungranted reports, an
    /// app may replace its version's contract (a development build changes under one version).
    package var environment: PushEnvironment?
    /// The backend's: keep the version whatever its devices do; nil keeps what it was.
    package var pinned: Bool?
    /// Registered by the app (a client key), which may add its version's contract only.
    package var byApp: Bool

    package init(
        contract: ActivityContract, bundleID: String, appVersion: String? = nil, environment: PushEnvironment? = nil, pinned: Bool? = nil,
        byApp: Bool
    ) {
        self.contract = contract
        self.bundleID = bundleID
        self.appVersion = appVersion
        self.environment = environment
        self.pinned = pinned
        self.byApp = byApp
    }
}

/// A reload of an app's widgets or controls (`POST /v1/widgets/reload`, `/v1/controls/reload`).
package struct ReloadRequest: Sendable, Hashable, Codable {
    /// The widget or control kinds to reload; nil: every one.
    package var kinds: [String]?
    package var audience: Audience
    package var priority: APNsPriority
    /// `apns-expiration`; nil lets APNs keep it by its policy.
    package var expiration: Date?
    /// When to run it; nil or past: now.
    package var at: Date?

    package init(kinds: [String]? = nil, audience: Audience, priority: APNsPriority = .immediate, expiration: Date? = nil, at: Date? = nil) {
        self.kinds = kinds
        self.audience = audience
        self.priority = priority
        self.expiration = expiration
        self.at = at
    }
}

/// What an app's widget extension reports (iOS 26): its widget token with the widgets placed
/// (`WidgetPushHandler`; no token: withdrawn), or the tokens of all its controls
/// (`ControlPushHandler`, which always passes every one).
package struct SurfaceRegistration: Sendable, Hashable {
    package var deviceID: String
    package var bundleID: String
    package var environment: PushEnvironment
    package var type: ReloadPushType
    /// The widget token (widgets only).
    package var widgetToken: DeviceToken?
    package var widgets: [WidgetPlacement]
    /// Each control's kind and token (controls only).
    package var controls: [ControlToken]
    package var userID: String?
    /// The backend's grant for `userID` (`ActivityGrant`).
    package var grant: String?
    package var appVersion: String?

    package struct ControlToken: Sendable, Hashable {
        package var kind: String
        package var token: DeviceToken

        package init(kind: String, token: DeviceToken) {
            self.kind = kind
            self.token = token
        }
    }

    package init(
        deviceID: String, bundleID: String, environment: PushEnvironment = .sandbox, type: ReloadPushType, widgetToken: DeviceToken? = nil,
        widgets: [WidgetPlacement] = [], controls: [ControlToken] = [], userID: String? = nil
    ) {
        self.deviceID = deviceID
        self.bundleID = bundleID
        self.environment = environment
        self.type = type
        self.widgetToken = widgetToken
        self.widgets = widgets
        self.controls = controls
        self.userID = userID
    }

    /// Widgets or controls in one report, at most: WidgetKit's own lists are a few dozen.
    package static let limit = 100
}

/// An app's push-to-start token for an attributes type.
package struct PushToStartRegistration: Sendable, Hashable {
    package var deviceID: String
    package var bundleID: String
    package var attributesType: String
    package var token: DeviceToken
    package var frequentPushesEnabled: Bool
    /// The app build's `aps-environment`: where the token is valid.
    package var environment: PushEnvironment
    package var userID: String?
    /// The device's iOS, when the app says (`iOS`): before 18 it cannot join a channel.
    package var systemVersion: SystemVersion?
    /// The backend's grant for `userID` (`ActivityGrant`).
    package var grant: String?
    /// The app's version on the device (`ContractRecord.appVersion`), when it says.
    package var appVersion: String?

    package init(
        deviceID: String, bundleID: String, attributesType: String, token: DeviceToken, frequentPushesEnabled: Bool = false,
        environment: PushEnvironment = .sandbox, userID: String? = nil, systemVersion: SystemVersion? = nil
    ) {
        self.deviceID = deviceID
        self.bundleID = bundleID
        self.attributesType = attributesType
        self.token = token
        self.frequentPushesEnabled = frequentPushesEnabled
        self.environment = environment
        self.userID = userID
        self.systemVersion = systemVersion
    }
}

/// An activity's update token, under the key the app knows it by.
package struct ActivityTokenRegistration: Sendable, Hashable {
    package var deviceID: String
    package var bundleID: String
    package var activityID: String?
    package var attributesType: String
    package var token: DeviceToken
    package var frequentPushesEnabled: Bool
    /// The app build's `aps-environment`: where the token is valid.
    package var environment: PushEnvironment
    /// What reported it (`LiveRelayKit 0.1.0`), from the request's `LiveRelayKit-Version`.
    package var reportedBy: String?
    /// The backend's grant for the key (`ActivityGrant`), for an activity the app requested itself.
    package var grant: String?
    /// The app's version on the device (`ContractRecord.appVersion`), when it says.
    package var appVersion: String?

    package init(
        deviceID: String, bundleID: String, activityID: String? = nil, attributesType: String, token: DeviceToken,
        frequentPushesEnabled: Bool = false, environment: PushEnvironment = .sandbox, reportedBy: String? = nil
    ) {
        self.reportedBy = reportedBy
        self.deviceID = deviceID
        self.bundleID = bundleID
        self.activityID = activityID
        self.attributesType = attributesType
        self.token = token
        self.frequentPushesEnabled = frequentPushesEnabled
        self.environment = environment
    }
}

/// A device's channel-bound activity under a key: it listens to the key's channel (`POST
/// /v1/activities/{key}/listening`).
package struct ChannelListenerRegistration: Sendable, Hashable {
    package var deviceID: String
    package var bundleID: String
    package var activityID: String?
    /// The channel the device named; `nil`: the key's, whichever it is (an activity started by a
    /// push cannot tell its channel on iOS).
    package var channelID: String?
    package var environment: PushEnvironment
    /// What reported it (`LiveRelayKit 0.1.0`), from the request's `LiveRelayKit-Version`.
    package var reportedBy: String?
    /// The backend's grant for the key (`ActivityGrant`), for an activity the app requested itself.
    package var grant: String?

    package init(
        deviceID: String, bundleID: String, activityID: String? = nil, channelID: String? = nil, environment: PushEnvironment = .sandbox,
        reportedBy: String? = nil
    ) {
        self.deviceID = deviceID
        self.bundleID = bundleID
        self.activityID = activityID
        self.channelID = channelID
        self.environment = environment
        self.reportedBy = reportedBy
    }
}

/// The activity ended or the person dismissed it, as the app reports.
package struct EndedReport: Sendable, Hashable {
    package var deviceID: String
    package var bundleID: String
    /// The device's id of the activity, when the app gives it.
    package var activityID: String?
    package var state: ActivityTokenState
    package var cause: String?
    package var at: Date?

    package init(deviceID: String, bundleID: String, activityID: String? = nil, state: ActivityTokenState, cause: String? = nil, at: Date? = nil) {
        self.deviceID = deviceID
        self.bundleID = bundleID
        self.activityID = activityID
        self.state = state
        self.cause = cause
        self.at = at
    }
}
