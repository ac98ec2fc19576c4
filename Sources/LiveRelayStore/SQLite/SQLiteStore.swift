import Foundation
import GRDB
import GRDBSQLite
import LiveActivityKit
import Synchronization

/// The embedded store: one SQLite file in WAL mode through GRDB. Every statement with a fixed
/// text comes from the connection's statement cache, and rows are decoded by column position
/// straight from the statement: compiling a statement or copying a row costs more than most of
/// the statements here take to run.
///
/// Committed transactions survive the process being killed (`synchronous=NORMAL` in WAL mode
/// loses at most the last transactions on power loss, never on a crash of the process).
package final class SQLiteStore: RelayStore {
    let pool: DatabasePool
    package let path: String
    /// Copies the WAL back into the database file beside the writer, never inside a commit.
    /// SQLite's automatic checkpoint runs in whichever commit crosses 1000 pages, and the request
    /// behind that commit would wait for the copy and an fsync.
    let checkpointer: DatabaseQueue
    let checkpoints = Mutex<(running: Bool, last: ContinuousClock.Instant)>((false, .now))
    let statements: StatementCount
    package var statementsRun: Int { statements.total }

    /// Opens (creating) the database at `path`. Call `migrate()` before use. The database and its
    /// `-wal` and `-shm` files are the owner's alone (0600): they hold full push tokens. SQLite
    /// gives the last two the database file's mode, so an empty file made 0600 comes first, and
    /// files made by an older release are tightened.
    ///
    /// Opening waits for SQLite's locks (up to the busy timeout) on a thread of its own.
    package static func open(path: String) async throws -> SQLiteStore {
        try await BlockingWork.run { try SQLiteStore(path: path) }
    }

    private init(path: String) throws {
        let manager = FileManager.default
        if !manager.fileExists(atPath: path) {
            guard manager.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
                throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: path])
            }
        }
        for file in [path, path + "-wal", path + "-shm"] where manager.fileExists(atPath: file) {
            try manager.setAttributes([.posixPermissions: 0o600], ofItemAtPath: file)
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        let statements = StatementCount()
        configuration.prepareDatabase { db in
            // Every statement of every connection, as SQLite starts it; not a trigger's, which
            // SQLite traces as a comment (`-- TRIGGER …`): what the store runs, counted as
            // PostgreSQL's are. SQLite's own callback reads the first byte of the text, where
            // GRDB's trace would copy the text of every statement. The count outlives the
            // connection: this closure, which the pool keeps, holds it. With a profile asked for,
            // each statement's end is traced too (`SQLiteStatementProfile`).
            let profiled = SQLiteStatementProfile.shared == nil ? 0 : UInt32(SQLITE_TRACE_PROFILE)
            sqlite3_trace_v2(
                db.sqliteConnection, UInt32(SQLITE_TRACE_STMT) | profiled,
                { kind, count, statement, text in
                    if kind == UInt32(SQLITE_TRACE_PROFILE) {
                        SQLiteStatementProfile.shared?.finished(OpaquePointer(statement!))
                    } else if text?.load(as: UInt8.self) != UInt8(ascii: "-") {
                        Unmanaged<StatementCount>.fromOpaque(count!).takeUnretainedValue().add()
                        SQLiteStatementProfile.shared?.started(OpaquePointer(statement!))
                    }
                    return 0
                }, Unmanaged.passUnretained(statements).toOpaque())
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
            // What a write replaces or deletes is zeroed, not left in the file: the plain-text
            // signing key an earlier release stored is gone once sealed. (Debian's SQLite does this
            // by default; other builds do not.)
            try db.execute(sql: "PRAGMA secure_delete = ON")
        }
        self.statements = statements
        pool = try DatabasePool(path: path, configuration: configuration)
        checkpointer = try DatabaseQueue(path: path, configuration: configuration)
        self.path = path
    }

    /// A write transaction, then a checkpoint in the background when the last is 250 ms old.
    func write<Value: Sendable>(_ body: @Sendable (Database) throws -> Value) async throws -> Value {
        let value = try await pool.write(body)
        let due = checkpoints.withLock { state in
            guard !state.running, ContinuousClock.now - state.last >= .milliseconds(250) else { return false }
            state.running = true
            return true
        }
        if due {
            checkpointer.asyncWriteWithoutTransaction { [self] db in
                // PASSIVE: copies what no reader still needs, and never waits for the writer.
                let pages = SQLiteStatementProfile.measuring("[checkpoint]") { (try? db.checkpoint(.passive))?.walFrameCount ?? 0 }
                // A write starts the log over only once every page in it is back in the database,
                // which never happens while writes keep coming: the writer copies the few pages
                // written since, between two transactions, so the log stops growing.
                if pages >= 1000 {
                    pool.asyncWriteWithoutTransaction { db in _ = try? db.checkpoint(.passive) }
                }
                checkpoints.withLock { $0 = (false, .now) }
            }
        }
        return value
    }

    /// Tests: makes every write fail as SQLite fails it on a full disk or a read-only file (the
    /// writer turns `query_only`), or work again. Reads go on.
    package func setWritesFail(_ failing: Bool) async throws {
        try await pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA query_only = \(failing ? 1 : 0)") }
    }

    /// Copies the whole log into the database file and empties the log, waiting for the writer
    /// and readers (for tests that read the file itself).
    package func checkpointWholly() async throws {
        try await checkpointer.writeWithoutTransaction { db in _ = try db.checkpoint(.truncate) }
    }

    /// A file needs nothing running beside its statements. Once stopped, the log is copied into
    /// the database file and emptied: a stopped server leaves one file, which holds none of what
    /// its writes replaced (a secret sealed since it started, say), even when the process exits
    /// before its connections close.
    package func run(started: @Sendable () -> Void) async {
        started()
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
        // In a task of its own: GRDB refuses work to a cancelled one, as this one is now.
        await Task { try? await checkpointWholly() }.value
    }

    @discardableResult
    package func migrate() async throws -> [String] {
        var migrator = DatabaseMigrator()
        for migration in SQLiteMigrations.all {
            migrator.registerMigration(migration.name) { db in
                for statement in migration.statements { try db.execute(sql: statement) }
            }
        }
        let ready = migrator
        let before = try await pool.read { try ready.appliedIdentifiers($0) }
        // On the writer's queue, never on the caller's thread (see `BlockingWork`).
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
            ready.asyncMigrate(pool) { result in continuation.resume(with: result.map { _ in () }) }
        }
        return SQLiteMigrations.all.map(\.name).filter { !before.contains($0) }
    }
}

// MARK: Statements shared by the transactions

extension SQLiteStore {
    static func activity(_ db: Database, app: String, key: String) throws -> ActivityRecord? {
        guard
            var activity = try db.fetchOne(
                StoreStatements.activity, [app, key], as: ActivityRecord.init(row:))
        else { return nil }
        try db.forEach(StoreStatements.activityChannels, [app, key]) { row in
            activity.channelIDs[try PushEnvironment(stored: row[0], column: "channels.environment")] = row[1]
        }
        return activity
    }

    static func insert(_ db: Database, activity: ActivityRecord) throws {
        try db.run(
            StoreStatements.insertActivity, ActivityRecord.table.arguments(activity).sqlite)
        for (environment, channelID) in activity.channelIDs {
            try db.run(
                StoreStatements.insertActivityChannel,
                [activity.bundleID, activity.key, environment.rawValue, channelID])
        }
    }

    /// Writes what a change can change: the content, and the lifecycle fields when it ends the key.
    /// An update leaves `key` and `state` out of its SET list on purpose: SQLite rewrites every
    /// index entry whose columns (or partial-index condition) an UPDATE assigns, changed or not.
    static func updateChanged(_ db: Database, activity: ActivityRecord) throws {
        let content: StatementArguments = [
            activity.contentState?.serializedString, activity.staleDate?.seconds, activity.relevanceScore, activity.lastTimestamp,
            activity.storedAlert, activity.alertAt?.seconds,
        ]
        if activity.state == .active {
            try db.run(
                """
                UPDATE activities SET content_state = ?, stale_date = ?, relevance_score = ?, last_timestamp = ?, alert = ?, alert_at = ?
                WHERE bundle_id = ? AND key = ?
                """,
                content + [activity.bundleID, activity.key])
        } else {
            try db.run(
                """
                UPDATE activities SET content_state = ?, stale_date = ?, relevance_score = ?, last_timestamp = ?, alert = ?, alert_at = ?,
                    state = ?, ended_at = ?, end_reason = ?, dismissal_date = ?
                WHERE bundle_id = ? AND key = ?
                """,
                content + [
                    activity.state.rawValue, activity.endedAt?.seconds, activity.endReason?.rawValue, activity.dismissalDate?.seconds,
                    activity.bundleID,
                    activity.key,
                ])
        }
    }

    static func pushToStartTokens(
        _ db: Database, app: String, attributesType: String, audience: Audience
    ) throws -> [PushToStartTokenRecord] {
        let base = """
            SELECT \(PushToStartTokenRecord.columns) FROM push_to_start_tokens
            WHERE bundle_id = ? AND attributes_type = ? AND dead_reason IS NULL
            """
        switch audience {
        case .everyone:
            return try db.fetchAll(base + " ORDER BY device_id", [app, attributesType], as: PushToStartTokenRecord.init(row:))
        case .devices(let ids), .users(let ids):
            guard !ids.isEmpty else { return [] }
            let column = if case .devices = audience { "device_id" } else { "user_id" }
            let marks = SQLStatement.marks(ids.count)
            var arguments: StatementArguments = [app, attributesType]
            _ = arguments.append(contentsOf: StatementArguments(ids))
            // A statement for this many ids only: compiled here, not kept in the cache.
            return try Row.fetchAll(db, sql: base + " AND \(column) IN (\(marks)) ORDER BY device_id", arguments: arguments)
                .map(PushToStartTokenRecord.init(row:))
        }
    }

    /// Writes the pushes of an accepted request, each payload once, after superseding what they
    /// make pointless: queued, or claimed for the dispatcher (and returned) when a hand-over allows
    /// as many. `fanOut` is a push to each live token of its key, of which there are `count`.
    static func enqueue(
        _ db: Database, payloads: [[UInt8]], deliveries: [NewDelivery], fanOut: (push: NewPush, count: Int)? = nil, at: Date,
        context: WriteContext
    ) throws -> [DeliveryRecord] {
        guard !deliveries.isEmpty || fanOut != nil else { return [] }
        let handOver = context.handOver
        var payloadIDs: [Int64] = []
        let insertPayload = try db.cachedStatement(sql: "INSERT INTO payloads (body, trace_parent) VALUES (?, ?)")
        for payload in payloads {
            try insertPayload.execute(arguments: [Data(payload), context.traceParent])
            payloadIDs.append(db.lastInsertedRowID)
        }
        let now = at.seconds
        try db.carryOut(.accepted(deliveries: deliveries, fanOut: fanOut?.push), at: at)
        let entry = OutboxRules.entry(count: deliveries.count + (fanOut?.count ?? 0), handOver: handOver, at: at)
        let (status, due) = (entry.status.rawValue, entry.due.seconds)
        // Pushes handed over come back from their inserts, to be sent without being read again.
        let handedOver = entry.status != .queued
        var rows: [DeliveryRow] = []
        func insert(_ statement: (queued: String, handedOver: String), _ arguments: StatementArguments) throws {
            if handedOver {
                rows += try db.fetchAll(statement.handedOver, arguments, as: DeliveryRow.init(row:))
            } else {
                try db.run(statement.queued, arguments)
            }
        }
        for delivery in deliveries {
            let (kind, deviceID, token, channelID) = delivery.target.columns
            let push = delivery.push
            try insert(
                StoreStatements.insertDelivery,
                [
                    push.key, push.event.rawValue, kind, deviceID, token, channelID, payloadIDs[push.payloadIndex], push.priority.rawValue,
                    push.priorityReason,
                    push.expiration, push.timestamp, push.requestID, status, due, now, delivery.environment.rawValue, push.bundleID,
                ])
        }
        if let push = fanOut?.push {
            try insert(
                StoreStatements.fanOut,
                [
                    push.event.rawValue, payloadIDs[push.payloadIndex], push.priority.rawValue, push.priorityReason, push.expiration,
                    push.timestamp, push.requestID, status, due, now, push.bundleID, push.key,
                ])
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
    static func record(_ db: Database, context: WriteContext, answer: AcceptedRequest, at: Date) throws {
        if let claim = context.idempotency {
            do {
                try db.run(StoreStatements.insertIdempotencyKey, [claim.apiKeyID, claim.key, claim.requestHash, try answer.storedText(), at.seconds])
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                throw StoreError(.idempotencyKeyTaken, "idempotency key \"\(claim.key)\" was used by a request at the same time")
            }
        }
        if let scheduleID = context.scheduleID, let result = ScheduleResult(ran: answer) {
            try db.run(StoreStatements.scheduleDone, [try result.storedText(), scheduleID])
            guard db.changesCount > 0 else {
                throw StoreError(.scheduleNotPending, "schedule \(scheduleID) is no longer pending")
            }
        }
    }
}

// MARK: Statements and rows

extension Database {
    /// Carries out what the outbox's rules decide after `trigger`.
    func carryOut(_ trigger: OutboxTrigger, at now: Date) throws {
        for decision in OutboxRules.decisions(after: trigger, at: now) {
            let statement = OutboxStatements.statement(decision, at: now)
            try run(statement.text, statement.sqliteArguments)
        }
    }

    /// Carries out the moves the rules decide after `trigger`, and gives the ids of the deliveries
    /// moved. Their statements name ids, so each is compiled here, not kept in the cache.
    func carryOutMoves(_ trigger: OutboxTrigger, at now: Date) throws -> Set<Int64> {
        var moved = Set<Int64>()
        for case .move(let move) in OutboxRules.decisions(after: trigger, at: now) {
            let statement = OutboxStatements.move(move, returningIDs: true)
            moved.formUnion(try Int64.fetchAll(self, sql: statement.text, arguments: statement.sqliteArguments))
        }
        return moved
    }

    /// Runs `sql` from the statement cache: compiled once per connection, not on every call.
    func run(_ sql: String, _ arguments: StatementArguments = []) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }

    /// Calls `body` with each row of `sql`, read in place (valid during the call only).
    func forEach(_ sql: String, _ arguments: StatementArguments = [], _ body: (Row) throws -> Void) throws {
        let rows = try Row.fetchCursor(cachedStatement(sql: sql), arguments: arguments)
        while let row = try rows.next() { try body(row) }
    }

    func fetchAll<Value>(_ sql: String, _ arguments: StatementArguments = [], as decode: (Row) throws -> Value) throws -> [Value] {
        var values: [Value] = []
        try forEach(sql, arguments) { values.append(try decode($0)) }
        return values
    }

    /// The first row's value; the statement still runs to its end (an UPDATE … RETURNING does
    /// its work on the first step, but is reset for reuse only once finished).
    func fetchOne<Value>(_ sql: String, _ arguments: StatementArguments = [], as decode: (Row) throws -> Value) throws -> Value? {
        var value: Value?
        try forEach(sql, arguments) { row in if value == nil { value = try decode(row) } }
        return value
    }
}

extension Date {
    var seconds: Double { timeIntervalSince1970 }
}

extension SQLStatement {
    var sqliteArguments: StatementArguments { arguments.sqlite }
}

extension [SQLArgument] {
    /// The values as GRDB binds them.
    var sqlite: StatementArguments {
        StatementArguments(
            map { argument -> (any DatabaseValueConvertible)? in
                switch argument {
                case .text(let value): value
                case .real(let value): value
                case .integer(let value): value
                case .bool(let value): value
                case .bytes(let value): Data(value)
                }
            })
    }
}

extension Row: StoreRow {
    func text(_ index: Int) -> String? { self[index] }
    func real(_ index: Int) -> Double? { self[index] }
    func integer(_ index: Int) -> Int64? { self[index] }
    func bool(_ index: Int) -> Bool { self[index] ?? false }

    func bytes(_ index: Int) -> [UInt8] {
        (try? withUnsafeData(atIndex: index) { data in data.map { [UInt8]($0) } }) ?? []
    }
}

extension SQLiteStore {
    /// The records with their payloads, each payload read once and shared.
    static func withPayloads(_ db: Database, _ rows: [DeliveryRow]) throws -> [DeliveryRecord] {
        var payloads: [Int64: (body: [UInt8], traceParent: String?)] = [:]
        return try rows.map { row in
            var record = row.record
            let payload =
                try payloads[row.payloadID]
                ?? db.fetchOne("SELECT body, trace_parent FROM payloads WHERE id = ?", [row.payloadID]) { row in
                    (row.bytes(0), row.text(1))
                } ?? ([], nil)
            payloads[row.payloadID] = payload
            (record.payload, record.traceParent) = payload
            return record
        }
    }
}

extension Array {
    /// Consecutive slices, each of the largest of `sizes` (largest first, ending with 1) that fits.
    func batched(_ sizes: [Int]) -> [ArraySlice<Element>] {
        var batches: [ArraySlice<Element>] = []
        var start = startIndex
        for size in sizes {
            while endIndex - start >= size {
                batches.append(self[start..<start + size])
                start += size
            }
        }
        return batches
    }
}
