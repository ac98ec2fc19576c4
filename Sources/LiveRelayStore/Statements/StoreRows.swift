import Foundation
import LiveActivityKit

/// A row of a store's query, whichever engine ran it. Records are read by column name, as their
/// `ColumnTable` lists them (`NamedRow`); a query of a few bare values reads them by position.
/// Times are seconds since 1970 in every engine.
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
    /// One of the type's names, as the store's `column` holds it (the column's name made only for
    /// the error).
    init(stored text: String, column: @autoclosure () -> String) throws {
        guard let value = Self(rawValue: text) else { throw UnreadableStoreValue(column: column(), value: "\"\(text)\"") }
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
    func value<Value: RawRepresentable>(_ index: Int, _ column: @autoclosure () -> String) throws -> Value where Value.RawValue == String {
        guard let value = try optionalValue(index, column()) as Value? else { throw UnreadableStoreValue(column: column(), value: "NULL") }
        return value
    }

    /// The same, where NULL means none.
    func optionalValue<Value: RawRepresentable>(_ index: Int, _ column: @autoclosure () -> String) throws -> Value?
    where Value.RawValue == String {
        try text(index).map { try Value(stored: $0, column: column()) }
    }

    /// A column that holds one of a type's numbers.
    func value<Value: RawRepresentable>(_ index: Int, _ column: @autoclosure () -> String) throws -> Value where Value.RawValue == Int {
        guard let number = int(index), let value = Value(rawValue: number) else {
            throw UnreadableStoreValue(column: column(), value: int(index).map(String.init) ?? "NULL")
        }
        return value
    }
}

extension AppRecord {
    static let table = ColumnTable<AppRecord>(
        "apps",
        [
            .text("bundle_id") { $0.bundleID }, .text("team_id") { $0.teamID }, .text("key_id") { $0.keyID },
            .text("signing_key") { $0.sealedSigningKey }, .date("created_at") { $0.createdAt }, .date("updated_at") { $0.updatedAt },
            .text("ungranted_reports") { $0.storedUngrantedReports },
        ])
    static let columns = table.list

    init(row: some StoreRow) throws {
        let row = Self.table.read(row)
        self.init(
            bundleID: row.string("bundle_id"), teamID: row.string("team_id"), keyID: row.string("key_id"),
            sealedSigningKey: row.string("signing_key"), createdAt: row.date("created_at")!, updatedAt: row.date("updated_at")!,
            ungrantedReports: Set(
                try row.string("ungranted_reports").split(separator: ",").map {
                    try PushEnvironment(stored: String($0), column: "apps.ungranted_reports")
                }))
    }

    /// `ungrantedReports` as its column keeps it: the environments' names, sorted, comma-separated.
    var storedUngrantedReports: String { ungrantedReports.map(\.rawValue).sorted().joined(separator: ",") }
}

extension APIKeyRecord {
    static let table = ColumnTable<APIKeyRecord>(
        "api_keys",
        [
            .text("id") { $0.id }, .text("name") { $0.name }, .name("scope") { $0.scope }, .bytes("secret_hash") { Array($0.secretHash) },
            .date("created_at") { $0.createdAt }, .date("revoked_at") { $0.revokedAt }, .text("bundle_id") { $0.bundleID },
        ])
    static let columns = table.list

    init(row: some StoreRow) throws {
        let row = Self.table.read(row)
        self.init(
            id: row.string("id"), name: row.string("name"), scope: try row.value("scope"), bundleID: row.text("bundle_id"),
            secretHash: Data(row.bytes("secret_hash")), createdAt: row.date("created_at")!, revokedAt: row.date("revoked_at"))
    }
}

extension DashboardSessionRecord {
    static let table = ColumnTable<DashboardSessionRecord>(
        "dashboard_sessions",
        [
            .bytes("id_hash") { Array($0.idHash) }, .text("api_key_id") { $0.apiKeyID }, .text("form_token") { $0.formToken },
            .date("signed_in_at") { $0.signedInAt }, .date("expires_at") { $0.expiresAt },
        ])

    /// From `StoreStatements.dashboardSession`: the key's columns, then the session's.
    init(row: some StoreRow, idHash: Data) {
        let row = Self.table.read(row, from: APIKeyRecord.table.count)
        self.init(
            idHash: idHash, apiKeyID: row.string("api_key_id"), formToken: row.string("form_token"), signedInAt: row.date("signed_in_at")!,
            expiresAt: row.date("expires_at")!)
    }
}

extension PushToStartTokenRecord {
    static let table = ColumnTable<PushToStartTokenRecord>(
        "push_to_start_tokens",
        [
            .text("device_id") { $0.deviceID }, .text("attributes_type") { $0.attributesType }, .text("user_id") { $0.userID },
            .text("token") { $0.token }, .bool("frequent_pushes") { $0.frequentPushesEnabled }, .name("environment") { $0.environment },
            .date("updated_at") { $0.updatedAt }, .text("dead_reason") { $0.deadReason }, .text("bundle_id") { $0.bundleID },
            .text("system_version") { $0.systemVersion?.description }, .text("app_version") { $0.appVersion },
        ])
    static let columns = table.list

    init(row: some StoreRow) throws {
        let row = Self.table.read(row)
        self.init(
            bundleID: row.string("bundle_id"), deviceID: row.string("device_id"), attributesType: row.string("attributes_type"),
            userID: row.text("user_id"), token: row.string("token"), frequentPushesEnabled: row.bool("frequent_pushes"),
            environment: try row.value("environment"), updatedAt: row.date("updated_at")!, deadReason: row.text("dead_reason"),
            systemVersion: row.text("system_version").flatMap(SystemVersion.init), appVersion: row.text("app_version"))
    }
}

extension SurfaceTokenRecord {
    static let table = ColumnTable<SurfaceTokenRecord>(
        "surface_tokens",
        [
            .text("bundle_id") { $0.bundleID }, .text("device_id") { $0.deviceID }, .name("push_type") { $0.pushType },
            .text("kind") { $0.kind }, .text("token") { $0.token }, .text("widgets") { $0.storedWidgets },
            .name("environment") { $0.environment }, .text("user_id") { $0.userID }, .text("app_version") { $0.appVersion },
            .date("updated_at") { $0.updatedAt },
        ])
    static let columns = table.list

    init(row: some StoreRow) throws {
        let row = Self.table.read(row)
        self.init(
            bundleID: row.string("bundle_id"), deviceID: row.string("device_id"), pushType: try row.value("push_type"), kind: row.string("kind"),
            token: row.string("token"), widgets: Self.widgets(stored: row.text("widgets")), environment: try row.value("environment"),
            userID: row.text("user_id"), appVersion: row.text("app_version"), updatedAt: row.date("updated_at")!)
    }
}

extension ActivityRecord {
    static let table = ColumnTable<ActivityRecord>(
        "activities",
        [
            .text("key") { $0.key }, .text("attributes_type") { $0.attributesType }, .text("attributes") { $0.attributes?.serializedString },
            .name("state") { $0.state }, .text("content_state") { $0.contentState?.serializedString }, .date("stale_date") { $0.staleDate },
            .real("relevance_score") { $0.relevanceScore }, .date("started_at") { $0.startedAt }, .date("ended_at") { $0.endedAt },
            .name("end_reason") { $0.endReason }, .date("dismissal_date") { $0.dismissalDate },
            .integer("last_timestamp") { $0.lastTimestamp }, .text("bundle_id") { $0.bundleID }, .text("alert") { $0.storedAlert },
            .date("alert_at") { $0.alertAt },
        ])
    static let columns = table.list

    /// A key without its channels, which are read from `activity_channels`.
    init(row: some StoreRow) throws {
        try self.init(row: Self.table.read(row))
    }

    private init(row: NamedRow<some StoreRow>) throws {
        self.init(
            bundleID: row.string("bundle_id"), key: row.string("key"), attributesType: row.string("attributes_type"),
            attributes: row.json("attributes"), state: try row.value("state"), contentState: row.json("content_state"),
            staleDate: row.date("stale_date"), relevanceScore: row.real("relevance_score"), startedAt: row.date("started_at")!,
            endedAt: row.date("ended_at"), endReason: try row.optionalValue("end_reason"), dismissalDate: row.date("dismissal_date"),
            lastTimestamp: row.integer("last_timestamp") ?? 0,
            alert: try row.text("alert").map { try JSONDecoder().decode(AlertConfiguration.self, from: Data($0.utf8)) },
            alertAt: row.date("alert_at"))
    }

    /// The alert as its column keeps it (JSON).
    var storedAlert: String? {
        alert.flatMap { try? JSONEncoder().encode($0) }.map { String(decoding: $0, as: UTF8.self) }
    }

    /// A listing's row: a key's columns, then its devices by state (`devices_live`…), those with
    /// an update token and those listening to its channel.
    private static let listedTable = table.appending(ActivityTokenState.allCases.map { "devices_\($0.rawValue)" })

    /// The columns of a listing (`listed(row:)`).
    static let listedColumns =
        columns + ", "
        + ActivityTokenState.allCases.map { state in
            ["activity_tokens", "channel_listeners"].map { table in
                "(SELECT count(*) FROM \(table) t WHERE t.bundle_id = activities.bundle_id AND t.key = activities.key AND t.state = '\(state.rawValue)')"
            }.joined(separator: " + ") + " AS devices_\(state.rawValue)"
        }.joined(separator: ", ")

    static func listed(row: some StoreRow) throws -> ActivityRecord {
        let row = listedTable.read(row)
        var activity = try ActivityRecord(row: row)
        activity.devices = ActivityDevices(
            counts: Dictionary(uniqueKeysWithValues: ActivityTokenState.allCases.map { ($0, row.int("devices_\($0.rawValue)") ?? 0) }))
        return activity
    }
}

extension ActivityTokenRecord {
    static let table = ColumnTable<ActivityTokenRecord>(
        "activity_tokens",
        [
            .text("key") { $0.key }, .text("device_id") { $0.deviceID }, .text("activity_id") { $0.activityID }, .text("token") { $0.token },
            .bool("frequent_pushes") { $0.frequentPushesEnabled }, .date("registered_at") { $0.registeredAt }, .name("state") { $0.state },
            .text("state_reason") { $0.stateReason }, .name("environment") { $0.environment }, .text("bundle_id") { $0.bundleID },
            .text("reported_by") { $0.reportedBy }, .text("app_version") { $0.appVersion },
        ])
    static let columns = table.list

    /// A token with its last result, as `activityTokens(app:key:)` reads it: its columns, then
    /// the last delivery's.
    private static let lastDeliveryColumns = table.appending(["apns_status", "apns_reason", "attempted_at"])

    /// A token without its last result, which comes from the deliveries.
    init(row: some StoreRow) throws {
        try self.init(row: Self.table.read(row))
    }

    init(row: NamedRow<some StoreRow>) throws {
        self.init(
            bundleID: row.string("bundle_id"), key: row.string("key"), deviceID: row.string("device_id"), activityID: row.text("activity_id"),
            token: row.string("token"), frequentPushesEnabled: row.bool("frequent_pushes"), environment: try row.value("environment"),
            registeredAt: row.date("registered_at")!, state: try row.value("state"), stateReason: row.text("state_reason"),
            reportedBy: row.text("reported_by"), appVersion: row.text("app_version"))
    }

    /// A token with its last delivery's answer (`lastDeliveryColumns`).
    static func withLastDelivery(row: some StoreRow) throws -> ActivityTokenRecord {
        let row = lastDeliveryColumns.read(row)
        var token = try ActivityTokenRecord(row: row)
        token.lastStatus = row.int("apns_status")
        token.lastReason = row.text("apns_reason")
        token.lastDeliveryAt = row.date("attempted_at")
        return token
    }
}

extension EventRecord {
    static let table = ColumnTable<EventRecord>(
        "events",
        [
            .filled("seq"), .text("id") { $0.id }, .name("type") { $0.type }, .text("bundle_id") { $0.bundleID },
            .name("environment") { $0.environment }, .text("key") { $0.key }, .text("device_id") { $0.deviceID },
            .date("occurred_at") { $0.occurredAt }, .text("data") { $0.data.serializedString },
        ])
    static let columns = table.list

    init(row: some StoreRow) throws {
        try self.init(row: Self.table.read(row))
    }

    init(row: NamedRow<some StoreRow>) throws {
        self.init(
            sequence: row.integer("seq") ?? 0, id: row.string("id"), type: try row.value("type"), bundleID: row.string("bundle_id"),
            environment: try row.optionalValue("environment"), key: row.string("key"), deviceID: row.text("device_id"),
            occurredAt: row.date("occurred_at")!, data: (try? JSONValue(parsing: row.string("data"))) ?? .object([]))
    }
}

extension ChannelListenerRecord {
    static let table = ColumnTable<ChannelListenerRecord>(
        "channel_listeners",
        [
            .text("bundle_id") { $0.bundleID }, .text("key") { $0.key }, .text("device_id") { $0.deviceID },
            .text("activity_id") { $0.activityID }, .text("channel_id") { $0.channelID }, .name("environment") { $0.environment },
            .date("registered_at") { $0.registeredAt }, .name("state") { $0.state }, .text("state_reason") { $0.stateReason },
            .text("reported_by") { $0.reportedBy },
        ])
    static let columns = table.list

    init(row: some StoreRow) throws {
        let row = Self.table.read(row)
        self.init(
            bundleID: row.string("bundle_id"), key: row.string("key"), deviceID: row.string("device_id"), activityID: row.text("activity_id"),
            channelID: row.string("channel_id"), environment: try row.value("environment"), registeredAt: row.date("registered_at")!,
            state: try row.value("state"), stateReason: row.text("state_reason"), reportedBy: row.text("reported_by"))
    }
}

extension ChannelRecord {
    static let table = ColumnTable<ChannelRecord>(
        "channels",
        [
            .text("channel_id") { $0.channelID }, .text("key") { $0.key }, .integer("storage_policy") { Int64($0.storagePolicy) },
            .date("created_at") { $0.createdAt }, .date("delete_after") { $0.deleteAfter }, .date("deleted_at") { $0.deletedAt },
            .name("environment") { $0.environment }, .text("bundle_id") { $0.bundleID },
        ])
    static let columns = table.list

    init(row: some StoreRow) throws {
        let row = Self.table.read(row)
        self.init(
            channelID: row.string("channel_id"), bundleID: row.string("bundle_id"), environment: try row.value("environment"),
            key: row.text("key"), storagePolicy: row.int("storage_policy") ?? 0, createdAt: row.date("created_at")!,
            deleteAfter: row.date("delete_after"), deletedAt: row.date("deleted_at"))
    }
}

extension ContractRecord {
    static let table = ColumnTable<ContractRecord>(
        "contracts",
        [
            .text("bundle_id") { $0.bundleID }, .text("attributes_type") { $0.attributesType }, .text("contract") { $0.contract.serializedString },
            .date("updated_at") { $0.updatedAt }, .text("app_version") { $0.appVersion }, .bool("pinned") { $0.pinned },
            .name("registered_in") { $0.registeredIn },
        ])
    static let columns = table.list

    init(row: some StoreRow) throws {
        let row = Self.table.read(row)
        self.init(
            bundleID: row.string("bundle_id"), attributesType: row.string("attributes_type"), appVersion: row.string("app_version"),
            contract: row.json("contract") ?? .null, updatedAt: row.date("updated_at")!, pinned: row.bool("pinned"),
            registeredIn: try row.optionalValue("registered_in"))
    }
}

extension ScheduleRecord {
    static let table = ColumnTable<ScheduleRecord>(
        "schedules",
        [
            .text("id") { $0.id }, .text("key") { $0.key }, .name("action") { $0.action }, .text("request") { $0.request.serializedString },
            .date("due_at") { $0.dueAt }, .name("state") { $0.state }, .text("result") { (try? $0.result?.storedText()) ?? nil },
            .date("created_at") { $0.createdAt }, .text("bundle_id") { $0.bundleID },
        ])
    static let columns = table.list

    init(row: some StoreRow) throws {
        let row = Self.table.read(row)
        let state: State = try row.value("state")
        self.init(
            id: row.string("id"), bundleID: row.string("bundle_id"), key: row.string("key"), action: try row.value("action"),
            request: row.json("request") ?? .null, dueAt: row.date("due_at")!, state: state,
            result: ScheduleResult(stored: row.text("result"), state: state), createdAt: row.date("created_at")!)
    }
}

extension DeliveryRecord {
    /// A push's columns, in the order every statement lists them (`columns`); its payload is a
    /// row of its own, which many pushes share. Pushes are written by the outbox's own statements
    /// (a fan-out's straight from the tokens).
    static let table = ColumnTable<DeliveryRecord>("deliveries", Column.allCases.map { .filled($0.name) })
    static let columns = table.list

    /// Read by position, not by name as other records are: a page or a claim reads thousands of
    /// pushes, and finding each column by its name (a hash of the name) took a third of such a
    /// read (a page of 1,000: 2.0–2.1 ms against 1.3).
    enum Column: Int, CaseIterable {
        case id, key, event, target, deviceID, token, channelID, payloadID, priority, priorityReason, expiration, timestamp, requestID
        case status, attempts, nextAttemptAt, createdAt, finishedAt, apnsStatus, apnsReason, apnsID, environment, bundleID

        var name: String {
            switch self {
            case .id: "id"
            case .key: "key"
            case .event: "event"
            case .target: "target"
            case .deviceID: "device_id"
            case .token: "token"
            case .channelID: "channel_id"
            case .payloadID: "payload_id"
            case .priority: "priority"
            case .priorityReason: "priority_reason"
            case .expiration: "expiration"
            case .timestamp: "timestamp"
            case .requestID: "request_id"
            case .status: "status"
            case .attempts: "attempts"
            case .nextAttemptAt: "next_attempt_at"
            case .createdAt: "created_at"
            case .finishedAt: "finished_at"
            case .apnsStatus: "apns_status"
            case .apnsReason: "apns_reason"
            case .apnsID: "apns_id"
            case .environment: "environment"
            case .bundleID: "bundle_id"
            }
        }
    }
}

/// A delivery read without its payload, which many deliveries share: each payload is read once.
struct DeliveryRow {
    var record: DeliveryRecord
    var payloadID: Int64

    init(row: some StoreRow) throws {
        typealias Column = DeliveryRecord.Column
        func text(_ column: Column) -> String? { row.text(column.rawValue) }
        func string(_ column: Column) -> String { row.string(column.rawValue) }
        func integer(_ column: Column) -> Int64? { row.integer(column.rawValue) }
        func date(_ column: Column) -> Date? { row.date(column.rawValue) }
        func name<Value: RawRepresentable>(_ column: Column) throws -> Value where Value.RawValue == String {
            try row.value(column.rawValue, "deliveries.\(column.name)")
        }
        func number<Value: RawRepresentable>(_ column: Column) throws -> Value where Value.RawValue == Int {
            try row.value(column.rawValue, "deliveries.\(column.name)")
        }
        let target = DeliveryTarget(kind: try name(.target), deviceID: text(.deviceID), token: text(.token), channelID: text(.channelID))
        payloadID = integer(.payloadID) ?? 0
        record = DeliveryRecord(
            id: integer(.id) ?? 0, bundleID: string(.bundleID), key: string(.key), event: try name(.event), target: target,
            environment: try name(.environment), payload: [], priority: try number(.priority), priorityReason: string(.priorityReason),
            expiration: integer(.expiration), timestamp: integer(.timestamp) ?? 0, requestID: string(.requestID),
            status: try name(.status), attempts: row.int(Column.attempts.rawValue) ?? 0, nextAttemptAt: date(.nextAttemptAt)!,
            createdAt: date(.createdAt)!, finishedAt: date(.finishedAt), apnsStatus: row.int(Column.apnsStatus.rawValue),
            apnsReason: text(.apnsReason), apnsID: text(.apnsID))
    }
}

/// Answers as the store keeps them: JSON of the typed values (`KeptAnswers.swift`).
/// A typed value as the store keeps it: its JSON, as text.
func storedText(_ value: some Encodable) throws -> String { String(decoding: try JSONEncoder().encode(value), as: UTF8.self) }

extension AcceptedRequest {
    /// `idempotency_keys.answer`.
    func storedText() throws -> String { try LiveRelayStore.storedText(self) }
}

extension AcceptedRequest {
    /// An idempotency key's answer, as `storedText()` keeps it.
    init(stored answer: String?) throws {
        guard let answer, let typed = try? JSONDecoder().decode(AcceptedRequest.self, from: Data(answer.utf8)) else {
            throw UnreadableStoreValue(column: "idempotency_keys.answer", value: answer.map { "\"\($0.prefix(80))\"" } ?? "NULL")
        }
        self = typed
    }
}

extension ScheduleResult {
    /// `schedules.result`: a run's acceptance as JSON, a failure's reason as text.
    func storedText() throws -> String {
        switch self {
        case .accepted(let acceptance): try LiveRelayStore.storedText(acceptance)
        case .reloaded(let reload): try LiveRelayStore.storedText(reload)
        case .failed(let reason): reason
        }
    }

    /// Read as the schedule's state says: a done one's acceptance; a failed one's reason.
    init?(stored text: String?, state: ScheduleRecord.State) {
        guard let text else { return nil }
        switch state {
        case .done:
            if let acceptance = try? JSONDecoder().decode(Acceptance.self, from: Data(text.utf8)) {
                self = .accepted(acceptance)
            } else if let reload = try? JSONDecoder().decode(ReloadAcceptance.self, from: Data(text.utf8)) {
                self = .reloaded(reload)
            } else {
                return nil
            }
        case .failed: self = .failed(text)
        case .pending, .cancelled: return nil
        }
    }
}

extension WebhookEndpointRecord {
    static let table = ColumnTable<WebhookEndpointRecord>(
        "webhook_endpoints",
        [
            .text("id") { $0.id }, .text("bundle_id") { $0.bundleID }, .text("url") { $0.url }, .text("description") { $0.description },
            .text("event_types") { $0.eventTypes.map(WebhookStatements.storedTypes) }, .text("secret") { $0.secret },
            .bool("enabled") { $0.enabled }, .text("disabled_reason") { $0.disabledReason }, .date("failing_since") { $0.failingSince },
            .date("created_at") { $0.createdAt }, .date("updated_at") { $0.updatedAt },
        ])

    init(row: some StoreRow) throws {
        let row = Self.table.read(row)
        let types = try row.text("event_types").map { text in
            Set(
                try text.split(separator: " ").map { name in
                    guard let type = EventType(rawValue: String(name)) else {
                        throw UnreadableStoreValue(column: "webhook_endpoints.event_types", value: "\"\(text)\"")
                    }
                    return type
                })
        }
        self.init(
            id: row.string("id"), bundleID: row.string("bundle_id"), url: row.string("url"), description: row.text("description"),
            eventTypes: types, secret: row.string("secret"), enabled: row.bool("enabled"), disabledReason: row.text("disabled_reason"),
            failingSince: row.date("failing_since"), createdAt: row.date("created_at")!, updatedAt: row.date("updated_at"))
    }
}

extension WebhookDeliveryRecord {
    /// Read only: deliveries are written by the webhooks' own statements, from the event log.
    static let table = ColumnTable<WebhookDeliveryRecord>(
        "webhook_deliveries",
        [
            "id", "endpoint_id", "event_id", "type", "key", "status", "attempts", "due_at", "last_attempt_at", "last_status", "last_error",
            "last_latency_ms", "last_excerpt", "finished_at",
        ].map { .filled($0) })

    init(row: some StoreRow) throws {
        let row = Self.table.read(row)
        var attempt: WebhookAttempt?
        if let at = row.date("last_attempt_at") {
            attempt = WebhookAttempt(
                at: at, status: row.int("last_status"), error: row.text("last_error"), latencyMilliseconds: row.int("last_latency_ms") ?? 0,
                excerpt: row.text("last_excerpt"))
        }
        self.init(
            id: row.integer("id") ?? 0, endpointID: row.string("endpoint_id"), eventID: row.string("event_id"),
            eventType: try row.value("type"), key: row.string("key"), status: try row.value("status"), attempts: row.int("attempts") ?? 0,
            dueAt: row.date("due_at")!, lastAttempt: attempt, finishedAt: row.date("finished_at"))
    }
}
