import Foundation
import LiveActivityKit

// What the store holds, one type per table or state: the records both engines read and write.

/// What an API key may do. Each route accepts exactly one scope.
package enum APIKeyScope: String, Sendable, Hashable, CaseIterable, Codable {
    /// The app: registers its tokens and reports ended activities.
    case client
    /// The backend: starts, updates, ends and schedules activities, reads keys and deliveries.
    case server
    /// The operator: API keys and channels.
    case admin
    /// A person who watches: reads everything in the dashboard and the API's listings, changes nothing.
    case viewer
    /// A scraper (Prometheus): reads `/metrics`, nothing else.
    case metrics

    /// The scope as a sentence names one key of it: "a server key", "an admin key".
    package var aKey: String { (rawValue == "admin" ? "an " : "a ") + rawValue + " key" }

    /// Every scope, as a refusal names them: "client, server, admin, viewer or metrics".
    package static var listed: String {
        let names = allCases.map(\.rawValue)
        return names.dropLast().joined(separator: ", ") + " or " + names.last!
    }

    /// The rule a key of this scope breaks when made for `app` (nil: for every app), or nil: a
    /// client key is for one app, a server key for one or every app, the others for every app.
    package func appRuleBroken(by app: String?) -> String? {
        switch (self, app) {
        case (.client, nil): "a client key is for one app"
        case (.admin, .some): "an admin key is for every app"
        case (.viewer, .some): "a viewer key reads every app"
        case (.metrics, .some): "a metrics key reads the whole server's metrics"
        default: nil
        }
    }
}

/// An app the server sends for: its bundle ID and the APNs credentials that sign its pushes (apps of
/// one team may share a key).
package struct AppRecord: Sendable, Hashable {
    package var bundleID: String
    package var teamID: String
    package var keyID: String
    /// The `.p8` key sealed by the master key (`MasterKey.seal`), never its PEM.
    package var sealedSigningKey: String
    package var createdAt: Date
    package var updatedAt: Date
    /// The APNs environments whose reports (an update token or a channel listener under a key)
    /// are taken without a grant from a device the key's start was not sent to: a development
    /// convenience, sandbox unless the operator says otherwise. Everything an app ships is public,
    /// its client key included; a report elsewhere needs the backend's grant (`ActivityGrant`).
    package var ungrantedReports: Set<PushEnvironment>

    /// Sandbox's development builds report without grants unless told otherwise.
    package static let defaultUngrantedReports: Set<PushEnvironment> = [.sandbox]

    package init(
        bundleID: String, teamID: String, keyID: String, sealedSigningKey: String, createdAt: Date, updatedAt: Date,
        ungrantedReports: Set<PushEnvironment> = AppRecord.defaultUngrantedReports
    ) {
        self.ungrantedReports = ungrantedReports
        self.bundleID = bundleID
        self.teamID = teamID
        self.keyID = keyID
        self.sealedSigningKey = sealedSigningKey
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }
}

/// An API key as stored: only the SHA-256 of its secret is kept.
package struct APIKeyRecord: Sendable, Hashable {
    package var id: String
    package var name: String
    package var scope: APIKeyScope
    /// The app the key is for; nil for every app (a client key is always for one).
    package var bundleID: String?
    package var secretHash: Data
    package var createdAt: Date
    package var revokedAt: Date?

    package init(
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
package enum APIKeyRevocation: Sendable, Hashable {
    case revoked
    /// No unrevoked key has the id.
    case notFound
    /// It is the last unrevoked admin key, and stays.
    case lastAdminKey
}

/// A device's push-to-start token for one attributes type (one per device and type; a new one
/// replaces the old).
package struct PushToStartTokenRecord: Sendable, Hashable {
    package var bundleID: String
    package var deviceID: String
    package var attributesType: String
    package var userID: String?
    package var token: String
    package var frequentPushesEnabled: Bool
    package var environment: PushEnvironment
    package var updatedAt: Date
    /// Why APNs refused the token for good (`Unregistered`, `BadDeviceToken`, …); nil while live.
    package var deadReason: String?
    /// The iOS the device runs, when its app reported it.
    package var systemVersion: SystemVersion?
    /// The version of the app on the device (`ContractRecord.appVersion`), when it said.
    package var appVersion: String?

    package init(
        bundleID: String, deviceID: String, attributesType: String, userID: String? = nil, token: String, frequentPushesEnabled: Bool,
        environment: PushEnvironment, updatedAt: Date, deadReason: String? = nil, systemVersion: SystemVersion? = nil,
        appVersion: String? = nil
    ) {
        self.appVersion = appVersion
        self.bundleID = bundleID
        self.deviceID = deviceID
        self.attributesType = attributesType
        self.userID = userID
        self.token = token
        self.frequentPushesEnabled = frequentPushesEnabled
        self.environment = environment
        self.updatedAt = updatedAt
        self.deadReason = deadReason
        self.systemVersion = systemVersion
    }
}

/// Whether an activity key still takes updates.
package enum ActivityKeyState: String, Sendable, Hashable, Codable {
    case active
    case ended
}

/// Why a key ended. Its devices' own ends (the person dismissed it, the app or the system ended
/// it) are its tokens' states, not the key's.
package enum ActivityEndReason: String, Sendable, Hashable, Codable {
    /// The backend ended it.
    case ended
    /// It passed the 8-hour limit, as the iPhone ends it.
    case expired
}

/// An activity key: one person's order or a million people's match, as the backend named it.
package struct ActivityRecord: Sendable, Hashable {
    /// The app the key belongs to: keys of two apps never meet.
    package var bundleID: String
    package var key: String
    package var attributesType: String
    package var attributes: JSONValue?
    package var state: ActivityKeyState
    /// The broadcast channels the key is bound to, at most one per APNs environment; updates then
    /// go as one broadcast per channel.
    package var channelIDs: [PushEnvironment: String]
    package var contentState: JSONValue?
    package var staleDate: Date?
    package var relevanceScore: Double?
    package var startedAt: Date
    package var endedAt: Date?
    package var endReason: ActivityEndReason?
    package var dismissalDate: Date?
    /// The `timestamp` of the last accepted change, so that a later one is always newer.
    package var lastTimestamp: Int64
    /// The last change's alert, if it had one, and when it was accepted: a device that reports
    /// late is caught up with it only while it is fresh.
    package var alert: AlertConfiguration?
    package var alertAt: Date?
    /// How its devices stand, by their update tokens and channel listeners: read with a listing
    /// (nil: not read).
    package var devices: ActivityDevices?

    package init(
        bundleID: String, key: String, attributesType: String, attributes: JSONValue? = nil, state: ActivityKeyState = .active,
        channelIDs: [PushEnvironment: String] = [:], contentState: JSONValue? = nil, staleDate: Date? = nil, relevanceScore: Double? = nil,
        startedAt: Date, endedAt: Date? = nil, endReason: ActivityEndReason? = nil, dismissalDate: Date? = nil, lastTimestamp: Int64,
        alert: AlertConfiguration? = nil, alertAt: Date? = nil
    ) {
        self.alert = alert
        self.alertAt = alertAt
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

/// A key's devices by the state of their update tokens and channel listeners: what the server
/// knows of where the activity is shown. The key's own state is the backend's (it ended the key, or the 8 hours
/// passed); its devices may have ended it before (the person dismissed it, the app or the system
/// ended it), or never have reported it.
package struct ActivityDevices: Sendable, Hashable {
    package var live: Int
    package var ended: Int
    package var dismissed: Int
    /// Tokens APNs refused for good.
    package var dead: Int

    package init(live: Int = 0, ended: Int = 0, dismissed: Int = 0, dead: Int = 0) {
        (self.live, self.ended, self.dismissed, self.dead) = (live, ended, dismissed, dead)
    }

    package init(counts: [ActivityTokenState: Int]) {
        self.init(live: counts[.live] ?? 0, ended: counts[.ended] ?? 0, dismissed: counts[.dismissed] ?? 0, dead: counts[.dead] ?? 0)
    }

    /// A device shows a key through its update token, or listening to the key's channel.
    package init(tokens: [ActivityTokenRecord], listeners: [ChannelListenerRecord] = []) {
        self.init(counts: Dictionary(tokens.map { ($0.state, 1) } + listeners.map { ($0.state, 1) }, uniquingKeysWith: +))
    }

    package enum Reach: String, Sendable, Hashable {
        /// At least one device shows it (its token is live).
        case live
        /// Devices reported it, and on every one it is over: ended, dismissed or its token dead.
        case endedOnEveryDevice
        /// No device has reported it (yet, or ever: a start that never arrived).
        case noDevice
    }

    package var reach: Reach {
        if live > 0 { return .live }
        return ended + dismissed + dead > 0 ? .endedOnEveryDevice : .noDevice
    }
}

/// The state of a device's update token under a key.
package enum ActivityTokenState: String, Sendable, Hashable, Codable, CaseIterable {
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
package struct ActivityTokenRecord: Sendable, Hashable {
    /// The state's reason when the device reported the end: `reported by the device (person)`.
    static func reportedReason(_ cause: String?) -> String { "reported by the device" + (cause.map { " (\($0))" } ?? "") }

    package var bundleID: String
    package var key: String
    package var deviceID: String
    package var activityID: String?
    package var token: String
    package var frequentPushesEnabled: Bool
    package var environment: PushEnvironment
    package var registeredAt: Date
    package var state: ActivityTokenState
    package var stateReason: String?
    /// APNs' answer to the last delivery: its status, and its reason when refused.
    package var lastStatus: Int?
    package var lastReason: String?
    package var lastDeliveryAt: Date?
    /// What the app reported it with (`LiveRelayKit 0.1.0`), when it said.
    package var reportedBy: String?
    /// The version of the app on the device (`ContractRecord.appVersion`), when it said: the last
    /// the device reported, any report of the app's updating its tokens.
    package var appVersion: String?

    package init(
        bundleID: String, key: String, deviceID: String, activityID: String? = nil, token: String, frequentPushesEnabled: Bool,
        environment: PushEnvironment, registeredAt: Date, state: ActivityTokenState = .live, stateReason: String? = nil,
        lastStatus: Int? = nil, lastReason: String? = nil, lastDeliveryAt: Date? = nil, reportedBy: String? = nil, appVersion: String? = nil
    ) {
        self.appVersion = appVersion
        self.reportedBy = reportedBy
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

/// A device's channel-bound activity under a key (`PushType.channel`, iOS 18): it has no update
/// token, and hears the key's updates on the key's channel in its environment. What the device
/// reported, and nothing the server decides: it stays `live` until the device reports the end.
package struct ChannelListenerRecord: Sendable, Hashable {
    package var bundleID: String
    package var key: String
    package var deviceID: String
    package var activityID: String?
    package var channelID: String
    package var environment: PushEnvironment
    package var registeredAt: Date
    /// `live` while it listens, then `ended` or `dismissed` as the device reported.
    package var state: ActivityTokenState
    package var stateReason: String?
    package var reportedBy: String?

    package init(
        bundleID: String, key: String, deviceID: String, activityID: String? = nil, channelID: String, environment: PushEnvironment,
        registeredAt: Date, state: ActivityTokenState = .live, stateReason: String? = nil, reportedBy: String? = nil
    ) {
        self.bundleID = bundleID
        self.key = key
        self.deviceID = deviceID
        self.activityID = activityID
        self.channelID = channelID
        self.environment = environment
        self.registeredAt = registeredAt
        self.state = state
        self.stateReason = stateReason
        self.reportedBy = reportedBy
    }
}

extension ActivityTokenRecord {
    /// The token as a registration saves it: live (again).
    var live: Self {
        var token = self
        (token.state, token.stateReason) = (.live, nil)
        return token
    }

    /// The token's registration, as the outbox's rules take it.
    func report(isNew: Bool) -> ReportedActivity {
        ReportedActivity(bundleID: bundleID, key: key, deviceID: deviceID, activityID: activityID, environment: environment, isNew: isNew)
    }
}

extension ChannelListenerRecord {
    /// The listener as a registration saves it: listening (again).
    var live: Self {
        var listener = self
        (listener.state, listener.stateReason) = (.live, nil)
        return listener
    }

    func report(isNew: Bool) -> ReportedActivity {
        ReportedActivity(
            bundleID: bundleID, key: key, deviceID: deviceID, activityID: activityID, environment: environment, channelID: channelID, isNew: isNew)
    }
}

/// What an app's widget decodes one attributes type from, as one version of the app registered
/// it: the contract's JSON (`ActivityContract`'s form), kept as given.
package struct ContractRecord: Sendable, Hashable {
    /// The version that names a contract for any version of the app: what the backend registers,
    /// and what apps registered before they said their version.
    package static let anyVersion = ""

    package var bundleID: String
    package var attributesType: String
    /// The app version whose widget decodes with it (`2.1 (45)`: `CFBundleShortVersionString`
    /// and build), or `anyVersion`.
    package var appVersion: String
    package var contract: JSONValue
    package var updatedAt: Date
    /// Kept by the operator: never retired for want of devices on the version.
    package var pinned: Bool
    /// The environment of the app build that registered it, as the build said (`nil`: the backend
    /// or the operator registered it): one from an environment the app takes ungranted reports
    /// from (a development build) may be registered again, changed, by the app.
    package var registeredIn: PushEnvironment?

    package init(
        bundleID: String, attributesType: String, appVersion: String = ContractRecord.anyVersion, contract: JSONValue, updatedAt: Date,
        pinned: Bool = false, registeredIn: PushEnvironment? = nil
    ) {
        self.registeredIn = registeredIn
        self.bundleID = bundleID
        self.attributesType = attributesType
        self.appVersion = appVersion
        self.contract = contract
        self.updatedAt = updatedAt
        self.pinned = pinned
    }
}

/// A broadcast channel LiveRelay created or was given for a key.
package struct ChannelRecord: Sendable, Hashable {
    package var channelID: String
    /// The app whose channel it is.
    package var bundleID: String
    /// Where APNs keeps it: only devices of this environment can subscribe to it.
    package var environment: PushEnvironment
    package var key: String?
    package var storagePolicy: Int
    package var createdAt: Date
    /// When the channel is to be deleted at APNs (its key ended, plus the storage window).
    package var deleteAfter: Date?
    package var deletedAt: Date?

    package init(
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
package enum DeliveryStatus: String, Sendable, Hashable, CaseIterable, Codable {
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

    /// The statuses of pushes that ended unsent (failed for good, passed over, skipped): few beside
    /// those sent, and what an operator looks for, indexed apart (`StoreStatements.unsentIndex`).
    package static let endedUnsent: [DeliveryStatus] = [.failed, .superseded, .skipped]

    /// What `waitingAndUnsentCounts()` counts, from indexes alone: the claimable statuses and
    /// those ended unsent, every status but `sent`, the bulk of the history.
    package static let countedByIndex = DeliveryEvent.claim.sources + endedUnsent
}

/// What a delivery goes to: a device token, or a broadcast channel.
package enum DeliveryTarget: Sendable, Hashable {
    case pushToStartToken(deviceID: String, token: String)
    case activityToken(deviceID: String, token: String)
    case channel(String)
    /// An app's widget token or a control's token, which a reload push goes to.
    case surface(ReloadPushType, deviceID: String, token: String)
}

/// A push in the outbox, with its history.
package struct DeliveryRecord: Sendable, Hashable {
    package var id: Int64
    /// The app it is sent for: its topic and the credentials that sign it.
    package var bundleID: String
    package var key: String
    package var event: DeliveryAction
    package var target: DeliveryTarget
    /// Where it is sent: the APNs environment of its token or channel.
    package var environment: PushEnvironment
    package var payload: [UInt8]
    package var priority: APNsPriority
    package var priorityReason: String
    package var expiration: Int64?
    package var timestamp: Int64
    package var requestID: String
    package var status: DeliveryStatus
    package var attempts: Int
    package var nextAttemptAt: Date
    package var createdAt: Date
    package var finishedAt: Date?
    package var apnsStatus: Int?
    package var apnsReason: String?
    package var apnsID: String?
    /// The trace of the request that queued it (W3C `traceparent`), read with its payload.
    package var traceParent: String?

    package init(
        id: Int64, bundleID: String, key: String, event: DeliveryAction, target: DeliveryTarget, environment: PushEnvironment,
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
package struct ScheduleRecord: Sendable, Hashable {
    package enum State: String, Sendable, Hashable, Codable {
        case pending, done, cancelled, failed
    }

    package var id: String
    package var bundleID: String
    /// The activity key; empty for a reload.
    package var key: String
    package var action: DeliveryAction
    /// The request body, as the API accepted it.
    package var request: JSONValue
    package var dueAt: Date
    package var state: State
    /// What running it gave (nil while it waits, or when it was cancelled).
    package var result: ScheduleResult?
    package var createdAt: Date

    package init(
        id: String, bundleID: String, key: String, action: DeliveryAction, request: JSONValue, dueAt: Date, state: State = .pending,
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

    package init(from decoder: any Decoder) throws {
        let values = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            id: try values.decode(String.self, forKey: .id), bundleID: try values.decode(String.self, forKey: .bundleID),
            key: try values.decode(String.self, forKey: .key), action: try values.decode(DeliveryAction.self, forKey: .action),
            request: try values.decodeJSON(forKey: .request), dueAt: try values.decode(Date.self, forKey: .dueAt),
            state: try values.decode(State.self, forKey: .state),
            result: try values.decodeIfPresent(ScheduleResult.self, forKey: .result), createdAt: try values.decode(Date.self, forKey: .createdAt))
    }

    package func encode(to encoder: any Encoder) throws {
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
package struct DashboardSessionRecord: Sendable, Hashable {
    package var idHash: Data
    package var apiKeyID: String
    package var formToken: String
    package var signedInAt: Date
    package var expiresAt: Date

    package init(idHash: Data, apiKeyID: String, formToken: String, signedInAt: Date, expiresAt: Date) {
        self.idHash = idHash
        self.apiKeyID = apiKeyID
        self.formToken = formToken
        self.signedInAt = signedInAt
        self.expiresAt = expiresAt
    }
}
