import Foundation
import LiveActivityKit
import PostgresNIO

/// A statement PostgreSQL parses once per connection and then only runs with new values. The
/// statements of every change and recording are such (not the claim, one per batch, which must be
/// planned on the table as it is: `PostgresStore.claim`): an unnamed statement is parsed and
/// planned again each time, which took half of PostgreSQL's CPU under `bench server`'s single-key
/// updates (pgbench with the same 11 statements: 735 transactions/s unnamed, 1,721 prepared).
///
/// Only fixed text belongs here. postgres-nio keeps a statement whose preparation failed failed
/// on that connection for good, so none may be run where its preparation could fail for a
/// passing reason, as in a transaction an earlier error aborted: the store rolls back at the
/// first error, and runs nothing after it.
protocol PreparedSQL {
    /// The text with numbered parameters, made once (`static let`).
    static var sql: String { get }
}

extension PreparedSQL {
    /// Short and unique: PostgreSQL cuts names at 63 bytes. (`_typeName` is cached by the
    /// runtime; `String(describing:)` took 1.5% of the server's CPU, asked at every execution.)
    static var name: String { "liverelay_" + _typeName(Self.self, qualified: false) }
}

/// `SQL` with its values; postgres-nio prepares it on a connection the first time it runs there.
struct Prepared<SQL: PreparedSQL>: PostgresPreparedStatement {
    typealias Row = PostgresRandomAccessRow

    static var name: String { SQL.name }
    static var sql: String { SQL.sql }

    var bindings: PostgresBindings

    init(_ arguments: [SQLArgument]) { bindings = arguments.postgresBindings }
    init(bindings: PostgresBindings) { self.bindings = bindings }

    func makeBindings() throws -> PostgresBindings { bindings }
    func decodeRow(_ row: PostgresRow) throws -> Row { row.makeRandomAccess() }
}

extension [SQLArgument] {
    var postgresBindings: PostgresBindings {
        var binds = PostgresBindings(capacity: count)
        for argument in self {
            switch argument {
            case .text(let value): binds.append(value)
            case .real(let value): binds.append(value)
            case .integer(let value): binds.append(value)
            case .bool(let value): binds.append(value)
            case .bytes(let value): binds.append(ByteBuffer(bytes: value))
            }
        }
        return binds
    }
}

/// The prepared statements, each the text both engines share where there is one.
enum PreparedStatements {
    enum Begin: PreparedSQL { static let sql = "BEGIN" }
    enum Commit: PreparedSQL { static let sql = "COMMIT" }

    enum Activity: PreparedSQL {
        static let sql = SQLStatement.numbering(StoreStatements.activity)
    }
    enum ActivityForUpdate: PreparedSQL {
        static let sql = SQLStatement.numbering(StoreStatements.activity + " FOR UPDATE")
    }
    enum ActivityChannels: PreparedSQL { static let sql = SQLStatement.numbering(StoreStatements.activityChannels) }
    enum ChannelsOfKey: PreparedSQL { static let sql = SQLStatement.numbering(StoreStatements.channelsOfKeyRecords) }

    /// What a change reads of its key, in one statement (`ChangeSnapshot`): the key (its record's
    /// columns first), then, by name, its channels (`environments`, `ids`), how many live tokens it
    /// has (`live`) and, when the change lists its pushes (the first argument), the live tokens
    /// themselves (arrays in device order; `no_activity_ids` says where `activity_id` is NULL,
    /// `app_versions` holds '' where `app_version` is) and
    /// the priority-10 counts by device or channel (`targets`, `counts`), the devices sent its start
    /// that have not reported (`awaiting`); then the version of the
    /// key's row (`version`: `xmin`, which every write of the row changes).
    /// `LockedChangeSnapshotRead` also locks the key's row until the transaction ends.
    enum ChangeSnapshotRead: PreparedSQL { static let sql = changeSnapshotRead(locking: false) }
    enum LockedChangeSnapshotRead: PreparedSQL { static let sql = changeSnapshotRead(locking: true) }
    /// Their parameters, in the order of their placeholders (`NamedArguments`).
    static let changeSnapshotParameters: SQLParameters = ["counting", "counts_app", "counts_key", "window_start", "app", "key"]

    private static func changeSnapshotRead(locking: Bool) -> String {
        func tokenArray(_ value: String, _ name: String) -> String {
            "COALESCE(array_agg(\(value) ORDER BY device_id) FILTER (WHERE budget.counting), '{}') AS \(name)"
        }
        return SQLStatement.numbering(
            """
            SELECT \(ActivityRecord.columns), c.environments, c.ids, t.live, t.device_ids, t.activity_ids, t.no_activity_ids, t.tokens,
                t.frequent, t.registered, t.token_environments, t.app_versions, p.targets, p.counts, w.awaiting, a.xmin::text AS version
            FROM (SELECT ?::boolean AS counting) budget, activities a,
            LATERAL (
                SELECT COALESCE(array_agg(environment ORDER BY environment), '{}') AS environments,
                    COALESCE(array_agg(channel_id ORDER BY environment), '{}') AS ids
                FROM activity_channels WHERE bundle_id = a.bundle_id AND key = a.key) c,
            LATERAL (
                SELECT COUNT(*) AS live,
                    \(tokenArray("device_id", "device_ids")), \(tokenArray("COALESCE(activity_id, '')", "activity_ids")),
                    \(tokenArray("activity_id IS NULL", "no_activity_ids")), \(tokenArray("token", "tokens")),
                    \(tokenArray("frequent_pushes", "frequent")), \(tokenArray("registered_at", "registered")),
                    \(tokenArray("environment", "token_environments")), \(tokenArray("COALESCE(app_version, '')", "app_versions"))
                FROM activity_tokens WHERE bundle_id = a.bundle_id AND key = a.key AND state = 'live') t,
            LATERAL (
                SELECT COALESCE(array_agg(x.target), '{}') AS targets, COALESCE(array_agg(x.n), '{}') AS counts
                FROM (\(StoreStatements.priority10Counts)) AS x (target, n) WHERE budget.counting) p,
            LATERAL (SELECT (\(StoreStatements.awaitingDevices(app: "a.bundle_id", key: "a.key"))) AS awaiting) w
            WHERE a.bundle_id = ? AND a.key = ?\(locking ? " FOR UPDATE OF a" : "")
            """)
    }

    /// What a change writes, in one statement, when the key's row is still the version its plan
    /// was made from: the key's new content, its payload, the supersede of the key's queued
    /// updates (when the outbox's rules decide exactly that), the listed pushes (as JSON records,
    /// `ListedDelivery`) and the fan-out. Queued, the pushes wake the other instances
    /// (`pg_notify`); handed over, they come back claimed (a delivery's columns, NULL when there are
    /// none). `written` counts the rows changed: 0 when another write came first, and nothing was
    /// written.
    enum QueuedChange: PreparedSQL { static let sql = changeWrite(handedOver: false) }
    enum HandedOverChange: PreparedSQL { static let sql = changeWrite(handedOver: true) }
    /// Their parameters, in the order of their placeholders (`NamedArguments`): the key's new
    /// values and the version its plan was made from; the payload; the supersede and the record of
    /// the budget's exhaustion (each its own statement's arguments) and whether each applies; the
    /// listed pushes; the fan-out; queued, the channel to notify.
    static func changeWriteParameters(handedOver: Bool) -> SQLParameters { handedOver ? handedOverChangeParameters : queuedChangeParameters }
    private static let handedOverChangeParameters = SQLParameters(changeWriteNames)
    private static let queuedChangeParameters = SQLParameters(changeWriteNames + ["notify_channel"])
    private static let changeWriteNames = [
        "content_state", "stale_date", "relevance_score", "last_timestamp", "alert", "alert_at", "state", "ended_at", "end_reason", "dismissal_date",
        "app", "key",
        "version", "payload", "trace_parent", "sends_anything", "supersede", "supersede_applies", "exhaustion", "exhaustion_applies",
        "listed_status", "listed_due", "listed_at", "listed",
        "fan_out_event", "fan_out_priority", "fan_out_reason", "fan_out_expiration", "fan_out_timestamp", "fan_out_request",
        "fan_out_status", "fan_out_due", "fan_out_at", "fan_out_app", "fan_out_key", "fan_out",
    ]

    /// The record of a key's budget spent, unless recorded in the hour, as the outbox's rules decide
    /// it (`OutboxRules`): the write carries it out itself, a round trip less for every change
    /// past its budget; its text is the same for every key, its arguments are each change's.
    static let exhaustionTemplate = OutboxDecision.recordUnlessRecorded(
        NewEvent(.budgetExhausted, bundleID: "", key: "", data: []), since: .distantPast)

    /// Each push-writing `INSERT … SELECT` takes its values straight in its own select list: a
    /// parameter there gets its column's type, where one in a nested `SELECT` or a `UNION` would be
    /// typed text (so the fan-out's condition goes in its `WHERE`, not around it).
    private static func changeWrite(handedOver: Bool) -> String {
        let returning = handedOver ? " RETURNING \(DeliveryRecord.columns)" : ""
        let supersede = OutboxStatements.move(OutboxRules.supersedingKey(app: "", key: "", at: .distantPast)).text
        let exhaustion = OutboxStatements.statement(Self.exhaustionTemplate, at: .distantPast).text
        let written = "(SELECT COUNT(*) FROM changed) AS written"
        return SQLStatement.numbering(
            """
            WITH changed AS (
                UPDATE activities SET content_state = ?, stale_date = ?, relevance_score = ?, last_timestamp = ?, alert = ?, alert_at = ?,
                    state = ?, ended_at = ?, end_reason = ?, dismissal_date = ?
                WHERE bundle_id = ? AND key = ? AND xmin::text = ?
                RETURNING 1),
            payload AS (INSERT INTO payloads (body, trace_parent) SELECT ?, ? WHERE ? AND EXISTS (SELECT 1 FROM changed) RETURNING id),
            superseded AS (\(supersede) AND ? AND EXISTS (SELECT 1 FROM changed)),
            exhausted AS (\(exhaustion) AND ? AND EXISTS (SELECT 1 FROM changed)),
            listed AS (
                INSERT INTO deliveries (\(StoreStatements.newDeliveryColumns))
                SELECT d.key, d.event, d.target, d.device_id, d.token, d.channel_id, payload.id, d.priority, d.priority_reason,
                    d.expiration, d.timestamp, d.request_id, ?, 0, ?, ?, d.environment, d.bundle_id
                FROM payload, ROWS FROM (json_to_recordset(?::json) AS (\(ListedDelivery.columns))) WITH ORDINALITY AS d
                ORDER BY d.ordinality\(returning)),
            fanned AS (
                INSERT INTO deliveries (\(StoreStatements.newDeliveryColumns))
                \(StoreStatements.fanOutRows(payload: "(SELECT id FROM payload)", and: "? AND EXISTS (SELECT 1 FROM payload)"))\(returning))
            \(handedOver
                ? "SELECT pushes.*, \(written) FROM (SELECT 1) one LEFT JOIN (SELECT * FROM listed UNION ALL SELECT * FROM fanned) pushes ON true"
                : "SELECT \(written), (SELECT pg_notify(?, '') FROM payload)")
            """)
    }

    enum InsertPayload: PreparedSQL { static let sql = "INSERT INTO payloads (body, trace_parent) VALUES ($1, $2) RETURNING id" }

    /// A request's one push (the common single-key change), queued; and claimed at once for a hand-over.
    enum InsertDelivery: PreparedSQL { static let sql = oneDelivery }
    enum InsertClaimedDelivery: PreparedSQL { static let sql = oneDelivery + " RETURNING \(DeliveryRecord.columns)" }
    private static let oneDelivery = SQLStatement.numbering(
        "INSERT INTO deliveries (\(StoreStatements.newDeliveryColumns)) VALUES (\(SQLStatement.marks(18)))")

    enum TakeRequests: PreparedSQL {
        private static let refill = "LEAST(?, b.tokens + GREATEST(0, ? - b.at) * ?)"
        static let sql = SQLStatement.numbering(
            """
            INSERT INTO rate_buckets AS b (key, tokens, at, taken) VALUES (?, ?, ?, ?)
            ON CONFLICT (key) DO UPDATE SET tokens = \(refill) - LEAST(?, FLOOR(\(refill))), taken = LEAST(?, FLOOR(\(refill))), at = ?
            WHERE \(refill) >= 1
            RETURNING taken
            """)
    }

    enum Payloads: PreparedSQL { static let sql = "SELECT id, body, trace_parent FROM payloads WHERE id = ANY($1::bigint[])" }

    /// Every sent push of a recording, its values as arrays (an empty apns-id is none).
    /// The statuses it moves from are bound (`$5`), as `OutboxStatements.statusCondition(amongIDs:)` says why.
    enum RecordSent: PreparedSQL {
        static let sql = """
            UPDATE deliveries d SET status = '\(DeliveryEvent.sent.destination.rawValue)', attempts = d.attempts + 1,
                finished_at = $1, attempted_at = $1, apns_status = o.status, apns_id = NULLIF(o.apns_id, ''), apns_reason = NULL
            FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS o (id, status, apns_id)
            WHERE d.id = o.id AND d.status = ANY($5::text[])
            """
    }

    enum NextDue: PreparedSQL {
        static let sql = "SELECT MIN(next_attempt_at) FROM deliveries WHERE \(OutboxStatements.statusCondition(.claim))"
    }
}

/// A listed push of a change as `QueuedChange` and `HandedOverChange` read it: one record of a
/// JSON array (`json_to_recordset`), so that one statement writes any number, NULLs included.
enum ListedDelivery {
    /// The record's fields and their types, in the order `json(_:)` writes them.
    static let columns = fields.map { "\($0.name) \($0.type)" }.joined(separator: ", ")

    static func json(_ deliveries: [NewDelivery]) -> String {
        JSONValue.array(deliveries.map { delivery in .object(fields.map { ($0.name, $0.value(delivery)) }) }).serializedString
    }

    private static let fields: [(name: String, type: String, value: @Sendable (NewDelivery) -> JSONValue)] = [
        ("key", "text", { .string($0.push.key) }),
        ("event", "text", { .string($0.push.event.rawValue) }),
        ("target", "text", { .string($0.target.columns.0) }),
        ("device_id", "text", { text($0.target.columns.1) }),
        ("token", "text", { text($0.target.columns.2) }),
        ("channel_id", "text", { text($0.target.columns.3) }),
        ("priority", "bigint", { .number(String($0.push.priority.rawValue)) }),
        ("priority_reason", "text", { .string($0.push.priorityReason) }),
        ("expiration", "bigint", { $0.push.expiration.map { .number(String($0)) } ?? .null }),
        ("timestamp", "bigint", { .number(String($0.push.timestamp)) }),
        ("request_id", "text", { .string($0.push.requestID) }),
        ("environment", "text", { .string($0.environment.rawValue) }),
        ("bundle_id", "text", { .string($0.push.bundleID) }),
    ]

    private static func text(_ value: String?) -> JSONValue { value.map(JSONValue.string) ?? .null }
}
