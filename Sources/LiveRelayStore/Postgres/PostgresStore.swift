import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOSSL
import PostgresNIO

/// The store on a PostgreSQL server, for several `serve` instances on one database. The same
/// contract as `SQLiteStore`, the same named migrations, the same outbox rules; what differs is
/// what a server shared by several writers needs:
///
/// - A claim takes due pushes `FOR UPDATE SKIP LOCKED`: two instances claiming at once get
///   different pushes, neither waits for the other.
/// - A change writes its key only if the key's row is still the version it planned from, or
///   else plans again holding the row (`FOR UPDATE`), so the changes of one key are applied one
///   after the other, each from what the previous one wrote (`KeyChange`).
/// - Ids come from `RETURNING`, never from "every row above the highest id", which only holds
///   with one writer.
/// - A unique key taken by a concurrent writer (a start's activity key, an idempotency key) is
///   the same error as one taken before.
package final class PostgresStore: InstanceSharedStore {
    let client: PostgresClient
    let target: PostgresURL
    let statements = StatementCount()
    package var statementsRun: Int { statements.total }

    /// Connects to `url` (`postgres://user:password@host:port/database`; `?host=/dir` for a Unix
    /// socket in `/dir`; `?sslmode=disable|prefer|require`). Use it within `running(_:)`, which
    /// runs its connection pool; then `migrate()` before anything else.
    package init(url: String, maximumConnections: Int = 20, logger: Logger = Logger(label: "liverelay.postgres")) throws {
        target = try PostgresURL(url)
        var configuration = target.configuration
        configuration.options.maximumConnections = maximumConnections
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
    }

    /// Runs the connection pool until the task is cancelled, then closes every connection. The
    /// pool marks itself running before it first suspends, so `started` is called just before.
    package func run(started: @Sendable () -> Void) async {
        started()
        await client.run()
    }

    @discardableResult
    package func migrate() async throws -> [String] {
        try await target.probe(logger: Self.quiet)
        return try await transaction { db in
            // Instances starting together on one schema: one migrates, the others then find it done.
            try await db.run("SELECT pg_advisory_xact_lock(\(Self.migrationLock), hashtext(current_schema()))")
            try await db.run(
                "CREATE TABLE IF NOT EXISTS liverelay_migrations (name text PRIMARY KEY, applied_at double precision NOT NULL)")
            let applied = Set(try await db.rows("SELECT name FROM liverelay_migrations").map { $0.string(0) })
            var now: [String] = []
            for migration in PostgresMigrations.all where !applied.contains(migration.name) {
                for statement in migration.statements { try await db.run(statement) }
                try await db.run(
                    "INSERT INTO liverelay_migrations (name, applied_at) VALUES (?, ?)", [.text(migration.name), .seconds(Date())])
                now.append(migration.name)
            }
            return now
        }
    }

    /// The database's upkeep so far: checkpoints begun, the seconds checkpoints that ended spent
    /// writing and syncing, and tables autovacuumed or autoanalyzed. A benchmark reports what of it
    /// fell in a latency run: on a small machine each stalls commits.
    package func upkeep() async throws -> (checkpoints: Int, checkpointSeconds: Double, autovacuums: Int) {
        // PostgreSQL 17 moved the checkpoint counters to pg_stat_checkpointer.
        var checkpoints = try? await rows("SELECT num_timed + num_requested, write_time + sync_time FROM pg_stat_checkpointer").first
        if checkpoints == nil {
            checkpoints = try await rows(
                "SELECT checkpoints_timed + checkpoints_req, checkpoint_write_time + checkpoint_sync_time FROM pg_stat_bgwriter"
            ).first
        }
        let autovacuums = try await rows("SELECT COALESCE(SUM(autovacuum_count + autoanalyze_count), 0)::bigint FROM pg_stat_all_tables")
            .first?.integer(0)
        return (Int(checkpoints?.integer(0) ?? 0), (checkpoints?.real(1) ?? 0) / 1000, Int(autovacuums ?? 0))
    }

    /// The advisory lock that serializes migrations of one schema (with the schema's hash).
    static let migrationLock: Int32 = 0x4C52_4D49
}

// MARK: Statements shared by the transactions

extension PostgresStore {
    func connection<Value: Sendable>(_ body: (PostgresConnection) async throws -> Value) async throws -> Value {
        try await StatementCount.$current.withValue(statements) { try await client.withConnection(body) }
    }

    func rows(_ sql: String, _ arguments: [SQLArgument] = []) async throws -> [PostgresRandomAccessRow] {
        statements.add()
        return try await client.query(SQLStatement(text: sql, arguments: arguments).postgresQuery, logger: Self.quiet).collect()
            .map { $0.makeRandomAccess() }
    }

    func run(_ sql: String, _ arguments: [SQLArgument] = []) async throws {
        _ = try await rows(sql, arguments)
    }

    func rows(_ sql: any PreparedSQL.Type, _ arguments: [SQLArgument]) async throws -> [PostgresRandomAccessRow] {
        try await connection { try await $0.rows(sql, arguments) }
    }

    /// A transaction on one connection; the error that ended it is the one thrown (not wrapped),
    /// so that the store's own errors reach the service as they are.
    func transaction<Value: Sendable>(_ body: (PostgresConnection) async throws -> Value) async throws -> Value {
        try await connection { connection in
            try await connection.rows(PreparedStatements.Begin.self, [])
            do {
                let value = try await body(connection)
                try await connection.rows(PreparedStatements.Commit.self, [])
                return value
            } catch {
                try? await connection.run("ROLLBACK")
                throw error
            }
        }
    }

    /// Statements the transactions' callers could not act on anyway: failures are thrown, not logged.
    static let quiet = Logger(label: "liverelay.postgres.statements", factory: { _ in SwiftLogNoOpLogHandler() })

    static func activity(_ db: PostgresConnection, app: String, key: String, locked: Bool) async throws -> ActivityRecord? {
        let select: any PreparedSQL.Type = locked ? PreparedStatements.ActivityForUpdate.self : PreparedStatements.Activity.self
        guard var activity = try await db.rows(select, [.text(app), .text(key)]).first.map(ActivityRecord.init(row:)) else { return nil }
        for row in try await db.rows(PreparedStatements.ActivityChannels.self, [.text(app), .text(key)]) {
            activity.channelIDs[try row.value(0, "channels.environment")] = row.string(1)
        }
        return activity
    }

    static func insert(_ db: PostgresConnection, activity: ActivityRecord) async throws {
        try await db.run(StoreStatements.insertActivity, ActivityRecord.table.arguments(activity))
        for (environment, channelID) in activity.channelIDs {
            try await db.run(
                StoreStatements.insertActivityChannel,
                [.text(activity.bundleID), .text(activity.key), .text(environment.rawValue), .text(channelID)])
        }
    }

    static func pushToStartTokens(
        _ db: PostgresConnection, app: String, attributesType: String, audience: Audience
    ) async throws -> [PushToStartTokenRecord] {
        let base = """
            SELECT \(PushToStartTokenRecord.columns) FROM push_to_start_tokens
            WHERE bundle_id = $1 AND attributes_type = $2 AND dead_reason IS NULL
            """
        var binds = PostgresBindings()
        binds.append(app)
        binds.append(attributesType)
        let sql: String
        switch audience {
        case .everyone:
            sql = base + " ORDER BY device_id"
        case .devices(let ids), .users(let ids):
            guard !ids.isEmpty else { return [] }
            let column = if case .devices = audience { "device_id" } else { "user_id" }
            binds.append(ids)
            sql = base + " AND \(column) = ANY($3::text[]) ORDER BY device_id"
        }
        StatementCount.current?.add()
        return try await db.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: quiet).collect()
            .map { try PushToStartTokenRecord(row: $0.makeRandomAccess()) }
    }

    /// Rows per INSERT of planned deliveries: 18 values each, well under PostgreSQL's 65,535.
    static let insertBatch = 500

    /// Writes the pushes of an accepted start, each payload once, after carrying out what the
    /// outbox's rules say they make pointless: queued, or claimed for the dispatcher (and
    /// returned) when a hand-over allows as many. (A change writes its own: `KeyChange`.)
    static func enqueue(
        _ db: PostgresConnection, payloads: [[UInt8]], deliveries: [NewDelivery], at: Date, context: WriteContext
    ) async throws -> [DeliveryRecord] {
        guard !deliveries.isEmpty else { return [] }
        let handOver = context.handOver
        var payloadIDs: [Int64] = []
        for payload in payloads {
            let id = try await db.rows(PreparedStatements.InsertPayload.self, [.bytes(payload), .text(context.traceParent)]).first?.integer(0)
            payloadIDs.append(id ?? 0)
        }
        try await db.carryOut(.accepted(deliveries: deliveries, fanOut: nil), at: at)
        let entry = OutboxRules.entry(count: deliveries.count, handOver: handOver, at: at)
        let handedOver = entry.status != .queued
        let returning = handedOver ? " RETURNING \(DeliveryRecord.columns)" : ""
        let fixed: [SQLArgument] = [.text(entry.status.rawValue), .seconds(entry.due), .seconds(at)]
        var rows: [DeliveryRow] = []
        for start in stride(from: 0, to: deliveries.count, by: insertBatch) {
            let batch = deliveries[start..<min(start + insertBatch, deliveries.count)]
            var arguments: [SQLArgument] = []
            arguments.reserveCapacity(batch.count * 18)
            for delivery in batch {
                let push = delivery.push
                let (kind, deviceID, token, channelID) = delivery.target.columns
                arguments +=
                    [
                        .text(push.key), .text(push.event.rawValue), .text(kind), .text(deviceID), .text(token), .text(channelID),
                        .integer(payloadIDs[push.payloadIndex]),
                        .integer(Int64(push.priority.rawValue)), .text(push.priorityReason), .integer(push.expiration), .integer(push.timestamp),
                        .text(push.requestID),
                    ] + fixed[0...0] + [.integer(0)] + fixed[1...2] + [.text(delivery.environment.rawValue), .text(push.bundleID)]
            }
            if batch.count == 1 {
                let insert: any PreparedSQL.Type = handedOver ? PreparedStatements.InsertClaimedDelivery.self : PreparedStatements.InsertDelivery.self
                rows += try await db.rows(insert, arguments).map(DeliveryRow.init(row:))
                continue
            }
            let values = repeatElement("(\(SQLStatement.marks(18)))", count: batch.count).joined(separator: ", ")
            rows += try await db.rows(
                "INSERT INTO deliveries (\(StoreStatements.newDeliveryColumns)) VALUES \(values)\(returning)", arguments
            ).map(DeliveryRow.init(row:))
        }
        if !handedOver {
            // The other instances help send them (the dispatcher here is told in-process).
            try await db.run("SELECT pg_notify(?, '')", [.text(outboxChannel)])
        }
        guard handedOver else { return [] }
        let payloadsByID = Dictionary(uniqueKeysWithValues: zip(payloadIDs, payloads))
        return rows.map { row in
            var record = row.record
            record.payload = payloadsByID[row.payloadID] ?? []
            record.traceParent = context.traceParent
            return record
        }.sorted { $0.id < $1.id }
    }

    /// What else an accepting write keeps: its answer under its idempotency key, and, when it ran
    /// a schedule, the schedule done with what the request did.
    static func record(_ db: PostgresConnection, context: WriteContext, answer: AcceptedRequest, at: Date) async throws {
        if let claim = context.idempotency {
            do {
                try await db.run(
                    StoreStatements.insertIdempotencyKey,
                    [.text(claim.apiKeyID), .text(claim.key), .text(claim.requestHash), .text(try answer.storedText()), .seconds(at)])
            } catch let error as PSQLError where error.isUniqueViolation {
                throw StoreError(.idempotencyKeyTaken, "idempotency key \"\(claim.key)\" was used by a request at the same time")
            }
        }
        if let scheduleID = context.scheduleID, let result = ScheduleResult(ran: answer) {
            let done = try await db.changed(StoreStatements.scheduleDone, [.text(try result.storedText()), .text(scheduleID)])
            guard done > 0 else {
                throw StoreError(.scheduleNotPending, "schedule \(scheduleID) is no longer pending")
            }
        }
    }

    /// The records with their payloads, each payload read once and shared.
    static func withPayloads(_ db: PostgresConnection, _ rows: [DeliveryRow]) async throws -> [DeliveryRecord] {
        var payloads: [Int64: (body: [UInt8], traceParent: String?)] = [:]
        let ids = Array(Set(rows.map(\.payloadID)))
        if !ids.isEmpty {
            var binds = PostgresBindings()
            binds.append(ids)
            for row in try await db.rows(PreparedStatements.Payloads.self, bindings: binds) {
                payloads[row.integer(0) ?? 0] = (row.bytes(1), row.text(2))
            }
        }
        return rows.map { row in
            var record = row.record
            (record.payload, record.traceParent) = payloads[row.payloadID] ?? ([], nil)
            return record
        }
    }
}

// MARK: Statements and rows

extension PostgresConnection {
    /// Carries out what the outbox's rules decide after `trigger`.
    func carryOut(_ trigger: OutboxTrigger, at now: Date) async throws {
        try await carryOut(OutboxRules.decisions(after: trigger, at: now), at: now)
    }

    func carryOut(_ decisions: [OutboxDecision], at now: Date) async throws {
        for decision in decisions { try await rows(OutboxStatements.statement(decision, at: now)) }
    }

    func run(_ sql: String, _ arguments: [SQLArgument] = []) async throws {
        try await rows(SQLStatement(text: sql, arguments: arguments))
    }

    @discardableResult
    func rows(_ sql: any PreparedSQL.Type, _ arguments: [SQLArgument]) async throws -> [PostgresRandomAccessRow] {
        try await rows(sql, bindings: arguments.postgresBindings)
    }

    @discardableResult
    func rows(_ sql: any PreparedSQL.Type, bindings: PostgresBindings) async throws -> [PostgresRandomAccessRow] {
        StatementCount.current?.add()
        func run<SQL: PreparedSQL>(_: SQL.Type) async throws -> [PostgresRandomAccessRow] {
            var rows: [PostgresRandomAccessRow] = []
            for try await row in try await execute(Prepared<SQL>(bindings: bindings), logger: PostgresStore.quiet) { rows.append(row) }
            return rows
        }
        return try await run(sql)
    }

    func rows(_ sql: String, _ arguments: [SQLArgument] = []) async throws -> [PostgresRandomAccessRow] {
        try await rows(SQLStatement(text: sql, arguments: arguments))
    }

    @discardableResult
    func rows(_ statement: SQLStatement) async throws -> [PostgresRandomAccessRow] {
        StatementCount.current?.add()
        return try await query(statement.postgresQuery, logger: PostgresStore.quiet).collect().map { $0.makeRandomAccess() }
    }

    /// How many rows `sql` (an UPDATE or DELETE) changed.
    func changed(_ sql: String, _ arguments: [SQLArgument]) async throws -> Int {
        try await rows("WITH changed AS (\(sql) RETURNING 1) SELECT COUNT(*) FROM changed", arguments).first?.int(0) ?? 0
    }
}

extension SQLStatement {
    var postgresQuery: PostgresQuery { PostgresQuery(unsafeSQL: numbered, binds: arguments.postgresBindings) }
}

extension PostgresRandomAccessRow: StoreRow {
    func text(_ index: Int) -> String? { (try? self[index].decode(String?.self)) ?? nil }
    func real(_ index: Int) -> Double? { (try? self[index].decode(Double?.self)) ?? nil }
    func integer(_ index: Int) -> Int64? { (try? self[index].decode(Int64?.self)) ?? nil }
    func bool(_ index: Int) -> Bool { (try? self[index].decode(Bool.self)) ?? false }
    func bytes(_ index: Int) -> [UInt8] { self[index].bytes.map { Array($0.readableBytesView) } ?? [] }
}

extension PSQLError {
    /// A unique key taken (SQLSTATE 23505).
    var isUniqueViolation: Bool { code == .server && serverInfo?[.sqlState] == "23505" }
}
