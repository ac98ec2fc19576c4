import Foundation
import LiveActivityKit

/// What a fleet is, kept so that its devices outlive the process that runs them (`serve`'s
/// built-in emulator keeps it in the data directory): the devices with their apps, activities,
/// tokens, held pushes and logs, the stored channel messages, and how far the clock was moved.
/// The event log is not kept: it says what happened, and those who read it have read it.
public struct FleetSnapshot: Sendable, Codable {
    /// Raised when what is kept changes shape; an older snapshot is refused by name.
    public static let currentVersion = 1

    public var version: Int
    /// How far `VirtualClock.advance(by:)` had moved the fleet's time.
    public var clockOffset: TimeInterval
    public var devices: [SimulatedDevice]
    var storedBroadcasts: [String: DeviceFleet.StoredBroadcast]
}

/// A snapshot that cannot be kept or read, and why.
public struct SnapshotError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

extension SimulatedDevice {
    /// The tokens APNs routes to this device: its apps' push-to-start tokens and its activities'
    /// update tokens, until they are retired.
    var heldTokens: [String] {
        apps.values.flatMap(\.pushToStartTokens.values) + activities.compactMap(\.pushToken)
            + surfaces.values.flatMap { app in (app.widgetToken.map { [$0] } ?? []) + app.controls.map(\.token) }
    }
}

// MARK: What is kept of each part

extension ActivityContentState: Codable {
    private enum CodingKeys: String, CodingKey { case state, staleDate, relevanceScore }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            state: try container.decodeJSON(forKey: .state), staleDate: try container.decodeIfPresent(Date.self, forKey: .staleDate),
            relevanceScore: try container.decode(Double.self, forKey: .relevanceScore))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(json: state, forKey: .state)
        try container.encodeIfPresent(staleDate, forKey: .staleDate)
        try container.encode(relevanceScore, forKey: .relevanceScore)
    }
}

extension DevicePush: Codable {
    private enum CodingKeys: String, CodingKey { case token, payload, priority, expiration, receivedAt }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            token: try container.decode(String.self, forKey: .token), payload: try container.decodeJSON(forKey: .payload),
            priority: try container.decode(Int.self, forKey: .priority), expiration: try container.decodeIfPresent(Date.self, forKey: .expiration),
            receivedAt: try container.decode(Date.self, forKey: .receivedAt))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(token, forKey: .token)
        try container.encode(json: payload, forKey: .payload)
        try container.encode(priority, forKey: .priority)
        try container.encodeIfPresent(expiration, forKey: .expiration)
        try container.encode(receivedAt, forKey: .receivedAt)
    }
}

extension DeviceFleet.StoredBroadcast: Codable {
    private enum CodingKeys: String, CodingKey { case payload, priority, expiresAt }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            payload: try container.decodeJSON(forKey: .payload), priority: try container.decode(Int.self, forKey: .priority),
            expiresAt: try container.decode(Date.self, forKey: .expiresAt))
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(json: payload, forKey: .payload)
        try container.encode(priority, forKey: .priority)
        try container.encode(expiresAt, forKey: .expiresAt)
    }
}

extension SimulatedActivity: Codable {
    private enum CodingKeys: String, CodingKey {
        case id, bundleID, attributesType, attributes, lifecycle, pushType, style, pushToken, tokenDueAt, retiringToken, endCause, lastAlert
        case isShown
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        bundleID = try container.decode(String.self, forKey: .bundleID)
        attributesType = try container.decode(String.self, forKey: .attributesType)
        attributes = try container.decodeJSON(forKey: .attributes)
        lifecycle = try container.decode(ActivityStateMachine.self, forKey: .lifecycle)
        pushType = try container.decode(ActivityPushType.self, forKey: .pushType)
        style = try container.decode(ActivityStyle.self, forKey: .style)
        pushToken = try container.decodeIfPresent(String.self, forKey: .pushToken)
        tokenDueAt = try container.decodeIfPresent(Date.self, forKey: .tokenDueAt)
        retiringToken = try container.decodeIfPresent(RetiringToken.self, forKey: .retiringToken)
        endCause = try container.decodeIfPresent(ActivityStateMachine.Transition.Cause.self, forKey: .endCause)
        lastAlert = try container.decodeIfPresent(ShownAlert.self, forKey: .lastAlert)
        isShown = try container.decodeIfPresent(Bool.self, forKey: .isShown) ?? true
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(id, forKey: .id)
        try container.encode(bundleID, forKey: .bundleID)
        try container.encode(attributesType, forKey: .attributesType)
        try container.encode(json: attributes, forKey: .attributes)
        try container.encode(lifecycle, forKey: .lifecycle)
        try container.encode(pushType, forKey: .pushType)
        try container.encode(style, forKey: .style)
        try container.encodeIfPresent(pushToken, forKey: .pushToken)
        try container.encodeIfPresent(tokenDueAt, forKey: .tokenDueAt)
        try container.encodeIfPresent(retiringToken, forKey: .retiringToken)
        try container.encodeIfPresent(endCause, forKey: .endCause)
        try container.encodeIfPresent(lastAlert, forKey: .lastAlert)
        if !isShown { try container.encode(isShown, forKey: .isShown) }
    }
}

/// An app's attributes types are kept as their contracts; a type given as a Swift type has none,
/// and cannot be kept (the control API, and so `serve`, only ever give contracts).
extension SimulatedApp: Codable {
    private enum CodingKeys: String, CodingKey {
        case bundleID, supportsLiveActivities, supportsFrequentUpdates, liveActivitiesEnabled, frequentUpdatesEnabled, attributeTypes
        case isInForeground, environment, pushToStartTokens, version
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        var types: [ActivityAttributesType] = []
        var list = try container.nestedUnkeyedContainer(forKey: .attributeTypes)
        while !list.isAtEnd {
            let text = try list.decode(String.self)
            do {
                types.append(ActivityAttributesType(try ActivityContract(json: try JSONValue(parsing: Array(text.utf8)))))
            } catch {
                throw DecodingError.dataCorruptedError(in: list, debugDescription: "an attributes type's contract: \(error)")
            }
        }
        self.init(
            bundleID: try container.decode(String.self, forKey: .bundleID),
            supportsLiveActivities: try container.decode(Bool.self, forKey: .supportsLiveActivities),
            supportsFrequentUpdates: try container.decode(Bool.self, forKey: .supportsFrequentUpdates),
            liveActivitiesEnabled: try container.decode(Bool.self, forKey: .liveActivitiesEnabled),
            frequentUpdatesEnabled: try container.decode(Bool.self, forKey: .frequentUpdatesEnabled), attributeTypes: types,
            isInForeground: try container.decode(Bool.self, forKey: .isInForeground),
            environment: try container.decode(PushEnvironment.self, forKey: .environment),
            version: try container.decodeIfPresent(String.self, forKey: .version) ?? SimulatedApp.firstVersion)
        pushToStartTokens = try container.decode([String: String].self, forKey: .pushToStartTokens)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(bundleID, forKey: .bundleID)
        try container.encode(supportsLiveActivities, forKey: .supportsLiveActivities)
        try container.encode(supportsFrequentUpdates, forKey: .supportsFrequentUpdates)
        try container.encode(liveActivitiesEnabled, forKey: .liveActivitiesEnabled)
        try container.encode(frequentUpdatesEnabled, forKey: .frequentUpdatesEnabled)
        var list = container.nestedUnkeyedContainer(forKey: .attributeTypes)
        for name in attributeTypes.keys.sorted() {
            guard let contract = attributeTypes[name]?.contract else {
                throw EncodingError.invalidValue(
                    name,
                    .init(
                        codingPath: list.codingPath,
                        debugDescription: "the attributes type \(name) is a Swift type, not a contract: it cannot be kept"))
            }
            try list.encode(contract.json.serializedString)
        }
        try container.encode(isInForeground, forKey: .isInForeground)
        try container.encode(environment, forKey: .environment)
        try container.encode(version, forKey: .version)
        try container.encode(pushToStartTokens, forKey: .pushToStartTokens)
    }
}
