import Foundation
import LiveActivityKit

// What the store holds, one type per table or state: the records both engines read and write.

/// What an API key may do. Each route accepts exactly one scope.
public enum APIKeyScope: String, Sendable, Hashable, CaseIterable, Codable {
    /// The app: registers its tokens and reports ended activities.
    case client
    /// The backend: starts, updates, ends and schedules activities, reads keys and deliveries.
    case server
    /// The operator: API keys and channels.
    case admin
    /// A person who watches: reads everything in the dashboard and the API's listings, changes nothing.
    case viewer
}

/// An app the server sends for: its bundle ID and the APNs credentials that sign its pushes (apps of
/// one team may share a key).
public struct AppRecord: Sendable, Hashable {
    public var bundleID: String
    public var teamID: String
    public var keyID: String
    /// The `.p8` key, PEM.
    public var signingKey: String
    public var createdAt: Date
    public var updatedAt: Date

    public init(bundleID: String, teamID: String, keyID: String, signingKey: String, createdAt: Date, updatedAt: Date) {
        self.bundleID = bundleID
        self.teamID = teamID
        self.keyID = keyID
        self.signingKey = signingKey
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// An API key as stored: only the SHA-256 of its secret is kept.
public struct APIKeyRecord: Sendable, Hashable {
    public var id: String
    public var name: String
    public var scope: APIKeyScope
    /// The app the key is for; nil for every app (a client key is always for one).
    public var bundleID: String?
    public var secretHash: Data
    public var createdAt: Date
    public var revokedAt: Date?

    public init(
        id: String, name: String, scope: APIKeyScope, bundleID: String? = nil, secretHash: Data, createdAt: Date, revokedAt: Date? = nil
    ) {
        self.id = id
        self.name = name
        self.scope = scope
        self.bundleID = bundleID
        self.secretHash = secretHash
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

/// What a revocation did.
public enum APIKeyRevocation: Sendable, Hashable {
    case revoked
    /// No unrevoked key has the id.
    case notFound
    /// It is the last unrevoked admin key, and stays.
    case lastAdminKey
}

/// A device's push-to-start token for one attributes type (one per device and type; a new one
/// replaces the old).
public struct PushToStartTokenRecord: Sendable, Hashable {
    public var bundleID: String
    public var deviceID: String
    public var attributesType: String
    public var userID: String?
    public var token: String
    public var frequentPushesEnabled: Bool
    public var environment: PushEnvironment
    public var updatedAt: Date
    /// Why APNs refused the token for good (`Unregistered`, `BadDeviceToken`, …); nil while live.
    public var deadReason: String?

    public init(
        bundleID: String, deviceID: String, attributesType: String, userID: String? = nil, token: String, frequentPushesEnabled: Bool,
        environment: PushEnvironment, updatedAt: Date, deadReason: String? = nil
    ) {
        self.bundleID = bundleID
        self.deviceID = deviceID
        self.attributesType = attributesType
        self.userID = userID
        self.token = token
        self.frequentPushesEnabled = frequentPushesEnabled
        self.environment = environment
        self.updatedAt = updatedAt
        self.deadReason = deadReason
    }
}

/// Whether an activity key still takes updates.
public enum ActivityKeyState: String, Sendable, Hashable, Codable {
    case active
    case ended
}

/// Why a key ended. Its devices' own ends (the person dismissed it, the app or the system ended
/// it) are its tokens' states, not the key's.
public enum ActivityEndReason: String, Sendable, Hashable, Codable {
    /// The backend ended it.
    case ended
    /// It passed the 8-hour limit, as the iPhone ends it.
    case expired
}

/// An activity key: one person's order or a million people's match, as the backend named it.
public struct ActivityRecord: Sendable, Hashable {
    /// The app the key belongs to: keys of two apps never meet.
    public var bundleID: String
    public var key: String
    public var attributesType: String
    public var attributes: JSONValue?
    public var state: ActivityKeyState
    /// The broadcast channels the key is bound to, at most one per APNs environment; updates then
    /// go as one broadcast per channel.
    public var channelIDs: [PushEnvironment: String]
    public var contentState: JSONValue?
    public var staleDate: Date?
    public var relevanceScore: Double?
    public var startedAt: Date
    public var endedAt: Date?
    public var endReason: ActivityEndReason?
    public var dismissalDate: Date?
    /// The `timestamp` of the last accepted change, so that a later one is always newer.
    public var lastTimestamp: Int64
    /// How its devices stand, by their update tokens: read with a listing (nil: not read).
    public var devices: ActivityDevices?

    public init(
        bundleID: String, key: String, attributesType: String, attributes: JSONValue? = nil, state: ActivityKeyState = .active,
        channelIDs: [PushEnvironment: String] = [:], contentState: JSONValue? = nil, staleDate: Date? = nil, relevanceScore: Double? = nil,
        startedAt: Date, endedAt: Date? = nil, endReason: ActivityEndReason? = nil, dismissalDate: Date? = nil, lastTimestamp: Int64
    ) {
        self.bundleID = bundleID
        self.key = key
        self.attributesType = attributesType
        self.attributes = attributes
        self.state = state
        self.channelIDs = channelIDs
        self.contentState = contentState
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.endReason = endReason
        self.dismissalDate = dismissalDate
        self.lastTimestamp = lastTimestamp
    }
}

/// A key's devices by the state of their update tokens: what the server knows of where the
/// activity is shown. The key's own state is the backend's (it ended the key, or the 8 hours
/// passed); its devices may have ended it before (the person dismissed it, the app or the system
/// ended it), or never have reported it.
public struct ActivityDevices: Sendable, Hashable {
    public var live: Int
    public var ended: Int
    public var dismissed: Int
    /// Tokens APNs refused for good.
    public var dead: Int

    public init(live: Int = 0, ended: Int = 0, dismissed: Int = 0, dead: Int = 0) {
        (self.live, self.ended, self.dismissed, self.dead) = (live, ended, dismissed, dead)
    }

    public init(counts: [ActivityTokenState: Int]) {
        self.init(live: counts[.live] ?? 0, ended: counts[.ended] ?? 0, dismissed: counts[.dismissed] ?? 0, dead: counts[.dead] ?? 0)
    }

    public init(tokens: [ActivityTokenRecord]) {
        self.init(counts: Dictionary(tokens.map { ($0.state, 1) }, uniquingKeysWith: +))
    }

    public enum Reach: String, Sendable, Hashable {
        /// At least one device shows it (its token is live).
        case live
        /// Devices reported it, and on every one it is over: ended, dismissed or its token dead.
        case endedOnEveryDevice
        /// No device has reported it (yet, or ever: a start that never arrived).
        case noDevice
    }

    public var reach: Reach {
        if live > 0 { return .live }
        return ended + dismissed + dead > 0 ? .endedOnEveryDevice : .noDevice
    }
}

/// The state of a device's update token under a key.
public enum ActivityTokenState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Pushed to on every update.
    case live
    /// The activity ended on the device.
    case ended
    /// The person removed it from the Lock Screen.
    case dismissed
    /// APNs refused the token for good.
    case dead
}

/// A device's update token for the activity it runs under a key (one per device and key).
public struct ActivityTokenRecord: Sendable, Hashable {
    public var bundleID: String
    public var key: String
    public var deviceID: String
    public var activityID: String?
    public var token: String
    public var frequentPushesEnabled: Bool
    public var environment: PushEnvironment
    public var registeredAt: Date
    public var state: ActivityTokenState
    public var stateReason: String?
    /// APNs' answer to the last delivery: its status, and its reason when refused.
    public var lastStatus: Int?
    public var lastReason: String?
    public var lastDeliveryAt: Date?

    public init(
        bundleID: String, key: String, deviceID: String, activityID: String? = nil, token: String, frequentPushesEnabled: Bool,
        environment: PushEnvironment, registeredAt: Date, state: ActivityTokenState = .live, stateReason: String? = nil,
        lastStatus: Int? = nil, lastReason: String? = nil, lastDeliveryAt: Date? = nil
    ) {
        self.bundleID = bundleID
        self.key = key
        self.deviceID = deviceID
        self.activityID = activityID
        self.token = token
        self.frequentPushesEnabled = frequentPushesEnabled
        self.environment = environment
        self.registeredAt = registeredAt
        self.state = state
        self.stateReason = stateReason
        self.lastStatus = lastStatus
        self.lastReason = lastReason
        self.lastDeliveryAt = lastDeliveryAt
    }
}

/// What an app's widget decodes one attributes type from, as the app registered it: the contract's
/// JSON (`ActivityContract`'s form), kept as given.
public struct ContractRecord: Sendable, Hashable {
    public var bundleID: String
    public var attributesType: String
    public var contract: JSONValue
    public var updatedAt: Date

    public init(bundleID: String, attributesType: String, contract: JSONValue, updatedAt: Date) {
        self.bundleID = bundleID
        self.attributesType = attributesType
        self.contract = contract
        self.updatedAt = updatedAt
    }
}

/// A broadcast channel LiveRelay created or was given for a key.
public struct ChannelRecord: Sendable, Hashable {
    public var channelID: String
    /// The app whose channel it is.
    public var bundleID: String
    /// Where APNs keeps it: only devices of this environment can subscribe to it.
    public var environment: PushEnvironment
    public var key: String?
    public var storagePolicy: Int
    public var createdAt: Date
    /// When the channel is to be deleted at APNs (its key ended, plus the storage window).
    public var deleteAfter: Date?
    public var deletedAt: Date?

    public init(
        channelID: String, bundleID: String, environment: PushEnvironment, key: String?, storagePolicy: Int, createdAt: Date,
        deleteAfter: Date? = nil, deletedAt: Date? = nil
    ) {
        self.channelID = channelID
        self.bundleID = bundleID
        self.environment = environment
        self.key = key
        self.storagePolicy = storagePolicy
        self.createdAt = createdAt
        self.deleteAfter = deleteAfter
        self.deletedAt = deletedAt
    }
}

/// A push's place in the outbox.
public enum DeliveryStatus: String, Sendable, Hashable, CaseIterable, Codable {
    /// Waiting to be sent (again, after a retryable failure, when `attempts > 0`).
    case queued
    /// Claimed by the dispatcher; back to due when the lease runs out without an answer.
    case sending
    /// APNs accepted it.
    case sent
    /// Failed for good: a dead letter, with APNs' status and reason.
    case failed
    /// A newer update for the same token was queued before this one was sent.
    case superseded
    /// Not sent: its token died first.
    case skipped
}

/// What a delivery goes to: a device token, or a broadcast channel.
public enum DeliveryTarget: Sendable, Hashable {
    case pushToStartToken(deviceID: String, token: String)
    case activityToken(deviceID: String, token: String)
    case channel(String)
}

/// A push in the outbox, with its history.
public struct DeliveryRecord: Sendable, Hashable {
    public var id: Int64
    /// The app it is sent for: its topic and the credentials that sign it.
    public var bundleID: String
    public var key: String
    public var event: LiveActivityPayload.Event
    public var target: DeliveryTarget
    /// Where it is sent: the APNs environment of its token or channel.
    public var environment: PushEnvironment
    public var payload: [UInt8]
    public var priority: APNsPriority
    public var priorityReason: String
    public var expiration: Int64?
    public var timestamp: Int64
    public var requestID: String
    public var status: DeliveryStatus
    public var attempts: Int
    public var nextAttemptAt: Date
    public var createdAt: Date
    public var finishedAt: Date?
    public var apnsStatus: Int?
    public var apnsReason: String?
    public var apnsID: String?

    public init(
        id: Int64, bundleID: String, key: String, event: LiveActivityPayload.Event, target: DeliveryTarget, environment: PushEnvironment,
        payload: [UInt8], priority: APNsPriority, priorityReason: String,
        expiration: Int64?, timestamp: Int64, requestID: String, status: DeliveryStatus, attempts: Int, nextAttemptAt: Date,
        createdAt: Date, finishedAt: Date? = nil, apnsStatus: Int? = nil, apnsReason: String? = nil, apnsID: String? = nil
    ) {
        self.id = id
        self.bundleID = bundleID
        self.key = key
        self.event = event
        self.target = target
        self.environment = environment
        self.payload = payload
        self.priority = priority
        self.priorityReason = priorityReason
        self.expiration = expiration
        self.timestamp = timestamp
        self.requestID = requestID
        self.status = status
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.createdAt = createdAt
        self.finishedAt = finishedAt
        self.apnsStatus = apnsStatus
        self.apnsReason = apnsReason
        self.apnsID = apnsID
    }
}

/// A start, update or end to run later.
public struct ScheduleRecord: Sendable, Hashable {
    public enum State: String, Sendable, Hashable, Codable {
        case pending, done, cancelled, failed
    }

    public var id: String
    public var bundleID: String
    public var key: String
    public var action: LiveActivityPayload.Event
    /// The request body, as the API accepted it.
    public var request: JSONValue
    public var dueAt: Date
    public var state: State
    /// What running it gave (nil while it waits, or when it was cancelled).
    public var result: ScheduleResult?
    public var createdAt: Date

    public init(
        id: String, bundleID: String, key: String, action: LiveActivityPayload.Event, request: JSONValue, dueAt: Date, state: State = .pending,
        result: ScheduleResult? = nil, createdAt: Date
    ) {
        self.id = id
        self.bundleID = bundleID
        self.key = key
        self.action = action
        self.request = request
        self.dueAt = dueAt
        self.state = state
        self.result = result
        self.createdAt = createdAt
    }
}

/// Kept in an answer (`AcceptedRequest.scheduled`): the request as its JSON text, which keeps
/// every literal as the API took it.
extension ScheduleRecord: Codable {
    private enum CodingKeys: String, CodingKey {
        case id, bundleID, key, action, request, dueAt, state, result, createdAt
    }

    public init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try values.decode(String.self, forKey: .id), bundleID: try values.decode(String.self, forKey: .bundleID),
            key: try values.decode(String.self, forKey: .key), action: try values.decode(LiveActivityPayload.Event.self, forKey: .action),
            request: try values.decodeJSON(forKey: .request), dueAt: try values.decode(Date.self, forKey: .dueAt),
            state: try values.decode(State.self, forKey: .state),
            result: try values.decodeIfPresent(ScheduleResult.self, forKey: .result), createdAt: try values.decode(Date.self, forKey: .createdAt))
    }

    public func encode(to encoder: any Encoder) throws {
        var values = encoder.container(keyedBy: CodingKeys.self)
        try values.encode(id, forKey: .id)
        try values.encode(bundleID, forKey: .bundleID)
        try values.encode(key, forKey: .key)
        try values.encode(action, forKey: .action)
        try values.encode(json: request, forKey: .request)
        try values.encode(dueAt, forKey: .dueAt)
        try values.encode(state, forKey: .state)
        try values.encodeIfPresent(result, forKey: .result)
        try values.encode(createdAt, forKey: .createdAt)
    }
}

/// A person signed in to the dashboard with an API key. Only the SHA-256 of the cookie's value is
/// kept, as for API keys; the form token guards every form of the session.
public struct DashboardSessionRecord: Sendable, Hashable {
    public var idHash: Data
    public var apiKeyID: String
    public var formToken: String
    public var signedInAt: Date
    public var expiresAt: Date

    public init(idHash: Data, apiKeyID: String, formToken: String, signedInAt: Date, expiresAt: Date) {
        self.idHash = idHash
        self.apiKeyID = apiKeyID
        self.formToken = formToken
        self.signedInAt = signedInAt
        self.expiresAt = expiresAt
    }
}
