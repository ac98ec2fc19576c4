import Foundation
import LiveActivityKit

/// A row of a store's query, read by column position, whichever engine ran it: each record is
/// decoded here once for every engine, from the columns its `columns` lists in that order. Times
/// are seconds since 1970 in every engine.
protocol StoreRow {
    func text(_ index: Int) -> String?
    func real(_ index: Int) -> Double?
    func integer(_ index: Int) -> Int64?
    func bool(_ index: Int) -> Bool
    func bytes(_ index: Int) -> [UInt8]
}

/// A row holds a value this release has no meaning for (written by a newer release, or by hand):
/// the read fails instead of guessing, so that nothing is sent or shown on a guess.
package struct UnreadableStoreValue: Error, Sendable, Hashable, CustomStringConvertible {
    package let column: String
    package let value: String

    package init(column: String, value: String) {
        self.column = column
        self.value = value
    }

    package var description: String { "the store's \(column) holds \(value), which this release cannot read" }
}

extension RawRepresentable where RawValue == String {
    /// One of the type's names, as the store's `column` holds it.
    init(stored text: String, column: String) throws {
        guard let value = Self(rawValue: text) else { throw UnreadableStoreValue(column: column, value: "\"\(text)\"") }
        self = value
    }
}

extension StoreRow {
    /// A column that is never NULL.
    func string(_ index: Int) -> String { text(index) ?? "" }
    func int(_ index: Int) -> Int? { integer(index).map(Int.init) }
    func date(_ index: Int) -> Date? { real(index).map(Date.init(timeIntervalSince1970:)) }
    func json(_ index: Int) -> JSONValue? { text(index).flatMap { try? JSONValue(parsing: $0) } }

    /// A column that holds one of a type's names: any other value, NULL included, is an error.
    func value<Value: RawRepresentable>(_ index: Int, _ column: String) throws -> Value where Value.RawValue == String {
        guard let value = try optionalValue(index, column) as Value? else { throw UnreadableStoreValue(column: column, value: "NULL") }
        return value
    }

    /// The same, where NULL means none.
    func optionalValue<Value: RawRepresentable>(_ index: Int, _ column: String) throws -> Value? where Value.RawValue == String {
        try text(index).map { try Value(stored: $0, column: column) }
    }

    /// A column that holds one of a type's numbers.
    func value<Value: RawRepresentable>(_ index: Int, _ column: String) throws -> Value where Value.RawValue == Int {
        guard let number = int(index), let value = Value(rawValue: number) else {
            throw UnreadableStoreValue(column: column, value: int(index).map(String.init) ?? "NULL")
        }
        return value
    }
}

extension AppRecord {
    static let columns = "bundle_id, team_id, key_id, signing_key, created_at, updated_at, ungranted_reports"

    init(row: some StoreRow) throws {
        self.init(
            bundleID: row.string(0), teamID: row.string(1), keyID: row.string(2), sealedSigningKey: row.string(3), createdAt: row.date(4)!,
            updatedAt: row.date(5)!,
            ungrantedReports: Set(
                try row.string(6).split(separator: ",").map { try PushEnvironment(stored: String($0), column: "apps.ungranted_reports") }))
    }

    /// `ungrantedReports` as its column keeps it: the environments' names, sorted, comma-separated.
    var storedUngrantedReports: String { ungrantedReports.map(\.rawValue).sorted().joined(separator: ",") }
}

extension APIKeyRecord {
    static let columns = "id, name, scope, secret_hash, created_at, revoked_at, bundle_id"

    init(row: some StoreRow) throws {
        self.init(
            id: row.string(0), name: row.string(1), scope: try row.value(2, "api_keys.scope"), bundleID: row.text(6),
            secretHash: Data(row.bytes(3)), createdAt: row.date(4)!, revokedAt: row.date(5))
    }
}

extension DashboardSessionRecord {
    /// From `StoreStatements.dashboardSession`: the key's columns, then the session's.
    init(row: some StoreRow, idHash: Data) {
        self.init(
            idHash: idHash, apiKeyID: row.string(7), formToken: row.string(8), signedInAt: row.date(9)!, expiresAt: row.date(10)!)
    }
}

extension PushToStartTokenRecord {
    static let columns =
        "device_id, attributes_type, user_id, token, frequent_pushes, environment, updated_at, dead_reason, bundle_id, system_version, app_version"

    init(row: some StoreRow) throws {
        self.init(
            bundleID: row.string(8), deviceID: row.string(0), attributesType: row.string(1), userID: row.text(2), token: row.string(3),
            frequentPushesEnabled: row.bool(4), environment: try row.value(5, "push_to_start_tokens.environment"), updatedAt: row.date(6)!,
            deadReason: row.text(7), systemVersion: row.text(9).flatMap(SystemVersion.init), appVersion: row.text(10))
    }
}

extension ActivityRecord {
    static let columns = names.joined(separator: ", ")

    /// The columns `init(row:)` reads, in order; what a query selects after them starts at `names.count`.
    static let names = [
        "key", "attributes_type", "attributes", "state", "content_state", "stale_date", "relevance_score", "started_at", "ended_at",
        "end_reason", "dismissal_date", "last_timestamp", "bundle_id", "alert", "alert_at",
    ]

    /// A key without its channels, which are read from `activity_channels`.
    init(row: some StoreRow) throws {
        self.init(
            bundleID: row.string(12), key: row.string(0), attributesType: row.string(1), attributes: row.json(2),
            state: try row.value(3, "activities.state"), contentState: row.json(4), staleDate: row.date(5),
            relevanceScore: row.real(6), startedAt: row.date(7)!, endedAt: row.date(8), endReason: try row.optionalValue(9, "activities.end_reason"),
            dismissalDate: row.date(10), lastTimestamp: row.integer(11) ?? 0,
            alert: try row.text(13).map { try JSONDecoder().decode(AlertConfiguration.self, from: Data($0.utf8)) }, alertAt: row.date(14))
    }

    /// The alert as its column keeps it (JSON).
    var storedAlert: String? {
        alert.flatMap { try? JSONEncoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) }
    }

    /// The columns of a listing: a key's, then its devices by state, those with an update token
    /// and those listening to its channel (`listed(row:)`).
    static let listedColumns =
        columns + ", "
        + ActivityTokenState.allCases.map { state in
            ["activity_tokens", "channel_listeners"].map { table in
                "(SELECT count(*) FROM \(table) t WHERE t.bundle_id = activities.bundle_id AND t.key = activities.key AND t.state = '\(state.rawValue)')"
            }.joined(separator: " + ")
        }.joined(separator: ", ")

    static func listed(row: some StoreRow) throws -> ActivityRecord {
        var activity = try ActivityRecord(row: row)
        activity.devices = ActivityDevices(
            counts: Dictionary(
                uniqueKeysWithValues: ActivityTokenState.allCases.enumerated().map { ($0.element, row.int(names.count + $0.offset) ?? 0) }))
        return activity
    }
}

extension ActivityTokenRecord {
    static let columns = columns(nil)

    /// The columns `init(row:)` reads, in order; what a query selects after them starts at `names.count`.
    static let names = [
        "key", "device_id", "activity_id", "token", "frequent_pushes", "registered_at", "state", "state_reason", "environment", "bundle_id",
        "reported_by", "app_version",
    ]

    /// The columns `init(row:)` reads, of the table named `alias` if given.
    static func columns(_ alias: String?) -> String {
        names.map { column in alias.map { "\($0).\(column)" } ?? column }.joined(separator: ", ")
    }

    /// A token without its last result, which comes from the deliveries.
    init(row: some StoreRow) throws {
        self.init(
            bundleID: row.string(9), key: row.string(0), deviceID: row.string(1), activityID: row.text(2), token: row.string(3),
            frequentPushesEnabled: row.bool(4), environment: try row.value(8, "activity_tokens.environment"), registeredAt: row.date(5)!,
            state: try row.value(6, "activity_tokens.state"), stateReason: row.text(7), reportedBy: row.text(10), appVersion: row.text(11))
    }
}

extension EventRecord {
    static let columns = "seq, id, type, bundle_id, environment, key, device_id, occurred_at, data"

    init(row: some StoreRow) throws {
        let environment = try row.text(4).map { text in
            guard let value = PushEnvironment(rawValue: text) else { throw UnreadableStoreValue(column: "events.environment", value: "\"\(text)\"") }
            return value
        }
        self.init(
            sequence: row.integer(0) ?? 0, id: row.string(1), type: try row.value(2, "events.type"), bundleID: row.string(3),
            environment: environment, key: row.string(5), deviceID: row.text(6), occurredAt: row.date(7)!,
            data: (try? JSONValue(parsing: row.string(8))) ?? .object([]))
    }
}

extension ChannelListenerRecord {
    static let columns =
        "bundle_id, key, device_id, activity_id, channel_id, environment, registered_at, state, state_reason, reported_by"

    init(row: some StoreRow) throws {
        self.init(
            bundleID: row.string(0), key: row.string(1), deviceID: row.string(2), activityID: row.text(3), channelID: row.string(4),
            environment: try row.value(5, "channel_listeners.environment"), registeredAt: row.date(6)!,
            state: try row.value(7, "channel_listeners.state"), stateReason: row.text(8), reportedBy: row.text(9))
    }
}

extension ChannelRecord {
    static let columns = "channel_id, key, storage_policy, created_at, delete_after, deleted_at, environment, bundle_id"

    init(row: some StoreRow) throws {
        self.init(
            channelID: row.string(0), bundleID: row.string(7), environment: try row.value(6, "channels.environment"), key: row.text(1),
            storagePolicy: row.int(2) ?? 0, createdAt: row.date(3)!, deleteAfter: row.date(4), deletedAt: row.date(5))
    }
}

extension ContractRecord {
    static let columns = "bundle_id, attributes_type, contract, updated_at, app_version, pinned"

    init(row: some StoreRow) {
        self.init(
            bundleID: row.string(0), attributesType: row.string(1), appVersion: row.string(4), contract: row.json(2) ?? .null,
            updatedAt: row.date(3)!, pinned: row.bool(5))
    }
}

extension ScheduleRecord {
    static let columns = "id, key, action, request, due_at, state, result, created_at, bundle_id"

    init(row: some StoreRow) throws {
        let state: State = try row.value(5, "schedules.state")
        self.init(
            id: row.string(0), bundleID: row.string(8), key: row.string(1), action: try row.value(2, "schedules.action"),
            request: row.json(3) ?? .null, dueAt: row.date(4)!, state: state, result: ScheduleResult(stored: row.text(6), state: state),
            createdAt: row.date(7)!)
    }
}

extension DeliveryRecord {
    static let columns = """
        id, key, event, target, device_id, token, channel_id, payload_id, priority, priority_reason, expiration, timestamp, \
        request_id, status, attempts, next_attempt_at, created_at, finished_at, apns_status, apns_reason, apns_id, environment, bundle_id
        """
}

/// A delivery read without its payload, which many deliveries share: each payload is read once.
struct DeliveryRow {
    var record: DeliveryRecord
    var payloadID: Int64

    init(row: some StoreRow) throws {
        let target = DeliveryTarget(kind: try row.value(3, "deliveries.target"), deviceID: row.text(4), token: row.text(5), channelID: row.text(6))
        payloadID = row.integer(7) ?? 0
        record = DeliveryRecord(
            id: row.integer(0) ?? 0, bundleID: row.string(22), key: row.string(1), event: try row.value(2, "deliveries.event"), target: target,
            environment: try row.value(21, "deliveries.environment"), payload: [], priority: try row.value(8, "deliveries.priority"),
            priorityReason: row.string(9), expiration: row.integer(10), timestamp: row.integer(11) ?? 0, requestID: row.string(12),
            status: try row.value(13, "deliveries.status"), attempts: row.int(14) ?? 0, nextAttemptAt: row.date(15)!,
            createdAt: row.date(16)!, finishedAt: row.date(17), apnsStatus: row.int(18), apnsReason: row.text(19), apnsID: row.text(20))
    }
}

/// Answers as the store keeps them: JSON of the typed values (`KeptAnswers.swift`).
/// A typed value as the store keeps it: its JSON, as text.
func storedText(_ value: some Encodable) throws -> String { String(decoding: try JSONEncoder().encode(value), as: UTF8.self) }

extension AcceptedRequest {
    /// `idempotency_keys.answer`.
    func storedText() throws -> String { try LiveRelayStore.storedText(self) }
}

extension KeptAnswer {
    /// An idempotency key's answer: typed, or, where a release before typed answers kept it
    /// (no `answer`), the HTTP answer it gave.
    init(status: Int?, body: [UInt8], answer: String?) throws {
        guard let answer else {
            self = .rendered(status: status ?? 0, body: body)
            return
        }
        guard let typed = try? JSONDecoder().decode(AcceptedRequest.self, from: Data(answer.utf8)) else {
            throw UnreadableStoreValue(column: "idempotency_keys.answer", value: "\"\(answer.prefix(80))\"")
        }
        self = .typed(typed)
    }
}

extension ScheduleResult {
    /// `schedules.result`: a run's acceptance as JSON, a failure's reason as text.
    func storedText() throws -> String {
        switch self {
        case .accepted(let acceptance): try LiveRelayStore.storedText(acceptance)
        case .failed(let reason), .rendered(let reason): reason
        }
    }

    /// Read as the schedule's state says: a done one's acceptance, or the HTTP body a release
    /// before typed answers kept there; a failed one's reason.
    init?(stored text: String?, state: ScheduleRecord.State) {
        guard let text else { return nil }
        switch state {
        case .done:
            if let acceptance = try? JSONDecoder().decode(Acceptance.self, from: Data(text.utf8)) {
                self = .accepted(acceptance)
            } else {
                self = .rendered(text)
            }
        case .failed: self = .failed(text)
        case .pending, .cancelled: return nil
        }
    }
}

extension WebhookEndpointRecord {
    init(row: some StoreRow) throws {
        let types = try row.text(4).map { text in
            Set(
                try text.split(separator: " ").map { name in
                    guard let type = EventType(rawValue: String(name)) else {
                        throw UnreadableStoreValue(column: "webhook_endpoints.event_types", value: "\"\(text)\"")
                    }
                    return type
                })
        }
        self.init(
            id: row.string(0), bundleID: row.string(1), url: row.string(2), description: row.text(3), eventTypes: types,
            secret: row.string(5), enabled: row.bool(6), disabledReason: row.text(7), failingSince: row.date(8), createdAt: row.date(9)!,
            updatedAt: row.date(10))
    }
}

extension WebhookDeliveryRecord {
    init(row: some StoreRow) throws {
        var attempt: WebhookAttempt?
        if let at = row.date(8) {
            attempt = WebhookAttempt(
                at: at, status: row.int(9), error: row.text(10), latencyMilliseconds: row.int(11) ?? 0, excerpt: row.text(12))
        }
        self.init(
            id: row.integer(0) ?? 0, endpointID: row.string(1), eventID: row.string(2), eventType: try row.value(3, "events.type"),
            key: row.string(4), status: try row.value(5, "webhook_deliveries.status"), attempts: row.int(6) ?? 0, dueAt: row.date(7)!,
            lastAttempt: attempt, finishedAt: row.date(13))
    }
}
