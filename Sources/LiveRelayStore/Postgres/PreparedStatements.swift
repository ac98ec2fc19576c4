import PostgresNIO

/// A statement PostgreSQL parses once per connection and then only runs with new values. The
/// statements of every change, claim and recording are such: an unnamed statement is parsed and
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
    /// Short and unique: PostgreSQL cuts names at 63 bytes.
    static var name: String { "liverelay_\(String(describing: Self.self))" }
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

    enum ActivityForUpdate: PreparedSQL {
        static let sql = SQLStatement.numbering("SELECT \(ActivityRecord.columns) FROM activities WHERE bundle_id = ? AND key = ? FOR UPDATE")
    }
    enum Activity: PreparedSQL {
        static let sql = SQLStatement.numbering("SELECT \(ActivityRecord.columns) FROM activities WHERE bundle_id = ? AND key = ?")
    }
    enum ActivityChannels: PreparedSQL { static let sql = SQLStatement.numbering(StoreStatements.activityChannels) }
    enum LiveTokens: PreparedSQL { static let sql = SQLStatement.numbering(StoreStatements.liveTokens) }
    enum LiveTokenCount: PreparedSQL { static let sql = SQLStatement.numbering(StoreStatements.liveTokenCount) }
    enum Priority10Counts: PreparedSQL { static let sql = SQLStatement.numbering(StoreStatements.priority10Counts) }
    enum ChannelsOfKey: PreparedSQL { static let sql = SQLStatement.numbering(StoreStatements.channelsOfKeyRecords) }

    enum ChangeActivity: PreparedSQL {
        static let sql = SQLStatement.numbering(
            """
            UPDATE activities SET content_state = ?, stale_date = ?, relevance_score = ?, last_timestamp = ?,
                state = ?, ended_at = ?, end_reason = ?, dismissal_date = ?
            WHERE bundle_id = ? AND key = ?
            """)
    }

    enum InsertPayload: PreparedSQL { static let sql = "INSERT INTO payloads (body) VALUES ($1) RETURNING id" }

    /// A request's one push (the common single-key change), queued; and claimed at once for a hand-over.
    enum InsertDelivery: PreparedSQL { static let sql = oneDelivery }
    enum InsertClaimedDelivery: PreparedSQL { static let sql = oneDelivery + " RETURNING \(DeliveryRecord.columns)" }
    private static let oneDelivery = SQLStatement.numbering(
        "INSERT INTO deliveries (\(StoreStatements.newDeliveryColumns)) VALUES (\(Array(repeating: "?", count: 18).joined(separator: ", ")))")

    enum TakeRequest: PreparedSQL {
        private static let refill = "LEAST(?, b.tokens + GREATEST(0, ? - b.at) * ?)"
        static let sql = SQLStatement.numbering(
            """
            INSERT INTO rate_buckets AS b (key, tokens, at) VALUES (?, ?, ?)
            ON CONFLICT (key) DO UPDATE SET tokens = \(refill) - 1, at = ? WHERE \(refill) >= 1
            RETURNING tokens
            """)
    }

    enum Claim: PreparedSQL {
        static let sql = SQLStatement.numbering(
            """
            UPDATE deliveries SET status = '\(DeliveryEvent.claim.destination.rawValue)', next_attempt_at = ?
            WHERE id IN (
                SELECT id FROM deliveries WHERE \(OutboxStatements.statusCondition(.claim)) AND next_attempt_at <= ?
                ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED)
            RETURNING \(DeliveryRecord.columns)
            """)
    }

    enum Payloads: PreparedSQL { static let sql = "SELECT id, body FROM payloads WHERE id = ANY($1::bigint[])" }

    /// Every sent push of a recording, its values as arrays (an empty apns-id is none).
    enum RecordSent: PreparedSQL {
        static let sql = """
            UPDATE deliveries d SET status = '\(DeliveryEvent.sent.destination.rawValue)', attempts = d.attempts + 1,
                finished_at = $1, attempted_at = $1, apns_status = o.status, apns_id = NULLIF(o.apns_id, ''), apns_reason = NULL
            FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS o (id, status, apns_id)
            WHERE d.id = o.id AND d.\(OutboxStatements.statusCondition(.sent))
            """
    }

    enum NextDue: PreparedSQL {
        static let sql = "SELECT MIN(next_attempt_at) FROM deliveries WHERE \(OutboxStatements.statusCondition(.claim))"
    }
}
