import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

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
public final class PostgresStore: InstanceSharedStore {
    private let client: PostgresClient
    private let running: Task<Void, Never>
    /// Set just before the pool's `run()` starts, which marks the pool running before it first
    /// suspends: leased before then, the pool logs a warning.
    private let started: Arc<Atomic<Bool>>
    private let target: PostgresURL

    /// Connects to `url` (`postgres://user:password@host:port/database`; `?host=/dir` for a Unix
    /// socket in `/dir`; `?sslmode=disable|prefer|require`). Call `migrate()` before use and
    /// `close()` at the end.
    public init(url: String, maximumConnections: Int = 20, logger: Logger = Logger(label: "liverelay.postgres")) throws {
        target = try PostgresURL(url)
        var configuration = target.configuration
        configuration.options.maximumConnections = maximumConnections
        client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let (client, started) = (self.client, Arc(Atomic(false)))
        running = Task {
            started.value.store(true, ordering: .releasing)
            await client.run()
        }
        self.started = started
    }

    deinit { running.cancel() }

    /// Closes every connection.
    public func close() async {
        running.cancel()
        await running.value
    }

    @discardableResult
    public func migrate() async throws -> [String] {
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

    /// The advisory lock that serializes migrations of one schema (with the schema's hash).
    private static let migrationLock: Int32 = 0x4C52_4D49

    // MARK: Apps

    public func saveApp(_ app: AppRecord) async throws {
        try await run(
            StoreStatements.saveApp,
            [.text(app.bundleID), .text(app.teamID), .text(app.keyID), .text(app.signingKey), .seconds(app.createdAt), .seconds(app.updatedAt)])
    }

    public func apps() async throws -> [AppRecord] {
        try await rows("SELECT \(AppRecord.columns) FROM apps ORDER BY bundle_id").map(AppRecord.init(row:))
    }

    public func adoptUnnamedData(bundleID: String) async throws -> Bool {
        try await transaction { db in
            var adopted = false
            for table in [
                "push_to_start_tokens", "activities", "activity_tokens", "activity_channels", "channels", "schedules", "deliveries", "api_keys",
            ] {
                adopted = try await db.changed("UPDATE \(table) SET bundle_id = ? WHERE bundle_id = ''", [.text(bundleID)]) > 0 || adopted
            }
            return adopted
        }
    }

    // MARK: Dashboard sessions

    public func insertDashboardSession(_ session: DashboardSessionRecord) async throws {
        try await transaction { db in
            try await db.run(StoreStatements.deleteExpiredDashboardSessions, [.seconds(session.signedInAt)])
            try await db.run(
                StoreStatements.insertDashboardSession,
                [
                    .bytes(Array(session.idHash)), .text(session.apiKeyID), .text(session.formToken), .seconds(session.signedInAt),
                    .seconds(session.expiresAt),
                ])
        }
    }

    public func dashboardSession(idHash: Data, at now: Date) async throws -> (session: DashboardSessionRecord, key: APIKeyRecord)? {
        try await rows(StoreStatements.dashboardSession, [.bytes(Array(idHash)), .seconds(now)]).first.map { row in
            (DashboardSessionRecord(row: row, idHash: idHash), try APIKeyRecord(row: row))
        }
    }

    public func deleteDashboardSession(idHash: Data) async throws {
        try await run(StoreStatements.deleteDashboardSession, [.bytes(Array(idHash))])
    }

    // MARK: API keys

    public func insertAPIKey(_ key: APIKeyRecord) async throws {
        try await run(
            StoreStatements.insertAPIKey,
            [
                .text(key.id), .text(key.name), .text(key.scope.rawValue), .bytes(Array(key.secretHash)), .seconds(key.createdAt),
                .seconds(key.revokedAt), .text(key.bundleID),
            ])
    }

    public func apiKey(secretHash: Data) async throws -> APIKeyRecord? {
        try await rows(
            "SELECT \(APIKeyRecord.columns) FROM api_keys WHERE secret_hash = ?", [.bytes(Array(secretHash))]
        ).first.map(APIKeyRecord.init(row:))
    }

    public func apiKeys() async throws -> [APIKeyRecord] {
        try await rows("SELECT \(APIKeyRecord.columns) FROM api_keys ORDER BY created_at, id")
            .map(APIKeyRecord.init(row:))
    }

    public func revokeAPIKey(id: String, at: Date) async throws -> APIKeyRevocation {
        try await transaction { db in
            // The key and every live admin key, locked in one order: of two revocations at once,
            // the second reads what the first wrote.
            let live = try await db.rows(
                "SELECT id, scope FROM api_keys WHERE revoked_at IS NULL AND (id = ? OR scope = ?) ORDER BY id FOR UPDATE",
                [.text(id), .text(APIKeyScope.admin.rawValue)]
            ).map { (id: $0.string(0), scope: $0.string(1)) }
            guard let key = live.first(where: { $0.id == id }) else { return .notFound }
            if key.scope == APIKeyScope.admin.rawValue, live.count(where: { $0.scope == APIKeyScope.admin.rawValue }) <= 1 {
                return .lastAdminKey
            }
            try await db.run("UPDATE api_keys SET revoked_at = ? WHERE id = ?", [.seconds(at), .text(id)])
            return .revoked
        }
    }

    // MARK: Registrations

    public func savePushToStartToken(_ token: PushToStartTokenRecord) async throws {
        try await run(
            StoreStatements.savePushToStartToken,
            [
                .text(token.deviceID), .text(token.attributesType), .text(token.userID), .text(token.token), .bool(token.frequentPushesEnabled),
                .text(token.environment.rawValue), .seconds(token.updatedAt), .text(token.bundleID),
            ])
    }

    /// Registers many tokens into a store that has none of them yet, 10,000 to a statement: what
    /// the registration routes would write one by one, for seeding a benchmark's million tokens
    /// (a transaction each takes most of an hour). A key gets its activity from its first token,
    /// registered as `saveActivityToken` does; its other tokens join it as they are.
    public func importTokens(activityTokens: [ActivityTokenRecord], attributesType: String, pushToStart: [PushToStartTokenRecord]) async throws {
        var keysSeen = Set<[String]>()
        var others: [ActivityTokenRecord] = []
        for token in activityTokens {
            if keysSeen.insert([token.bundleID, token.key]).inserted {
                try await saveActivityToken(token, attributesType: attributesType)
            } else {
                others.append(token)
            }
        }
        try await insertInChunks(
            others,
            """
            INSERT INTO activity_tokens (bundle_id, key, device_id, token, frequent_pushes, registered_at, state, environment)
            SELECT b, k, d, t, f, r, 'live', e FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::boolean[],
                $6::double precision[], $7::text[]) AS u (b, k, d, t, f, r, e)
            """
        ) { chunk, binds in
            binds.append(chunk.map(\.bundleID))
            binds.append(chunk.map(\.key))
            binds.append(chunk.map(\.deviceID))
            binds.append(chunk.map(\.token))
            binds.append(chunk.map(\.frequentPushesEnabled))
            binds.append(chunk.map(\.registeredAt.timeIntervalSince1970))
            binds.append(chunk.map(\.environment.rawValue))
        }
        try await insertInChunks(
            pushToStart,
            """
            INSERT INTO push_to_start_tokens (bundle_id, device_id, attributes_type, user_id, token, frequent_pushes, environment, updated_at)
            SELECT b, d, a, NULLIF(u, ''), t, f, e, w FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[],
                $6::boolean[], $7::text[], $8::double precision[]) AS p (b, d, a, u, t, f, e, w)
            """
        ) { chunk, binds in
            binds.append(chunk.map(\.bundleID))
            binds.append(chunk.map(\.deviceID))
            binds.append(chunk.map(\.attributesType))
            binds.append(chunk.map { $0.userID ?? "" })
            binds.append(chunk.map(\.token))
            binds.append(chunk.map(\.frequentPushesEnabled))
            binds.append(chunk.map(\.environment.rawValue))
            binds.append(chunk.map(\.updatedAt.timeIntervalSince1970))
        }
    }

    /// Inserts `rows` 10,000 to a statement: `bind` gives a chunk's columns as the arrays `sql` unnests.
    private func insertInChunks<Row>(_ rows: [Row], _ sql: String, _ bind: (ArraySlice<Row>, inout PostgresBindings) -> Void) async throws {
        for start in stride(from: 0, to: rows.count, by: 10_000) {
            var binds = PostgresBindings()
            bind(rows[start..<min(rows.count, start + 10_000)], &binds)
            try await client.withConnection { db in
                _ = try await db.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: Self.quiet).collect()
            }
        }
    }

    @discardableResult
    public func saveActivityToken(_ token: ActivityTokenRecord, attributesType: String) async throws -> ActivityRecord {
        try await transaction { db in
            // The key, created active when the app started the activity itself.
            let created = ActivityRecord(
                bundleID: token.bundleID, key: token.key, attributesType: attributesType, startedAt: token.registeredAt, lastTimestamp: 0)
            try await db.run(
                "INSERT INTO activities (\(ActivityRecord.columns)) VALUES (\(SQLStatement.marks(13))) ON CONFLICT (bundle_id, key) DO NOTHING",
                Self.arguments(created))
            guard let activity = try await Self.activity(db, app: token.bundleID, key: token.key, locked: true) else {
                throw StoreError(.keyEnded, "activity key \"\(token.key)\" is gone")
            }
            if activity.state == .ended {
                throw StoreError(.keyEnded, "activity key \"\(activity.key)\" has ended")
            }
            try await db.run(
                StoreStatements.saveActivityToken,
                [
                    .text(token.key), .text(token.deviceID), .text(token.activityID), .text(token.token), .bool(token.frequentPushesEnabled),
                    .seconds(token.registeredAt), .text(token.environment.rawValue), .text(token.bundleID),
                ])
            try await db.carryOut(
                .activityTokenRegistered(app: token.bundleID, key: token.key, deviceID: token.deviceID), at: token.registeredAt)
            return activity
        }
    }

    public func endActivityToken(app: String, key: String, deviceID: String, state: ActivityTokenState, at: Date) async throws -> Bool {
        try await transaction { db in
            let changed = try await db.changed(
                StoreStatements.endActivityToken,
                [.text(state.rawValue), .text(app), .text(key), .text(deviceID)])
            guard changed > 0 else { return false }
            try await db.carryOut(.activityEndedOnDevice(app: app, key: key, deviceID: deviceID, state: state), at: at)
            return true
        }
    }

    // MARK: Accepting requests

    public func idempotentResponse(apiKeyID: String, key: String) async throws -> IdempotentResponse? {
        try await rows(
            "SELECT request_hash, status, body FROM idempotency_keys WHERE api_key_id = ? AND key = ?", [.text(apiKeyID), .text(key)]
        ).first.map { row in
            IdempotentResponse(requestHash: row.string(0), response: StoredResponse(status: row.int(1) ?? 0, body: row.bytes(2)))
        }
    }

    public func audienceEnvironments(app: String, attributesType: String, audience: Audience) async throws -> Set<PushEnvironment> {
        try await connection { db in
            Set(try await Self.pushToStartTokens(db, app: app, attributesType: attributesType, audience: audience).map(\.environment))
        }
    }

    public func acceptStart<Outcome: Sendable>(
        app: String, key: String, attributesType: String, audience: Audience, context: WriteContext,
        plan: @Sendable ([PushToStartTokenRecord]) throws -> (StartPlan, Outcome)
    ) async throws -> Accepted<Outcome> {
        try await transaction { db in
            if try await Self.activity(db, app: app, key: key, locked: false) != nil { throw Self.keyExists(key) }
            let tokens = try await Self.pushToStartTokens(db, app: app, attributesType: attributesType, audience: audience)
            let (planned, outcome) = try plan(tokens)
            do {
                try await Self.insert(db, activity: planned.activity)
            } catch let error as PSQLError where error.isUniqueViolation {
                // Started by another request since the check above.
                throw Self.keyExists(key)
            }
            let claimed = try await Self.enqueue(
                db, payloads: planned.payloads, deliveries: planned.deliveries, at: planned.acceptedAt, handOver: context.handOver)
            try await Self.record(db, context: context, response: planned.response, at: planned.acceptedAt)
            return Accepted(outcome: outcome, claimed: claimed)
        }
    }

    private static func keyExists(_ key: String) -> StoreError { StoreError(.keyExists, "activity key \"\(key)\" already exists") }

    /// A change of one key costs a statement to read it and one to write it. Each statement costs
    /// PostgreSQL and postgres-nio far more than its work on one key does, so the common change
    /// takes no transaction: it is written only if the key's row is still the version it was
    /// planned from (optimistic). One that must be written with more (an idempotency key, a
    /// schedule, an end's tokens and channels, other outbox decisions), or that another write
    /// came before, is planned again in a transaction that holds the key's row.
    public func acceptChange<Outcome: Sendable>(
        app: String, key: String, budget: ChangeBudget, context: WriteContext, plan: @Sendable (ChangeSnapshot) throws -> (ChangePlan, Outcome)
    ) async throws -> Accepted<Outcome> {
        let change = KeyChange(app: app, key: key, budget: budget, handOver: context.handOver)
        if context.idempotency == nil && context.scheduleID == nil,
            let written = try await connection({ try await change.write($0, locked: false, plan: plan) })
        {
            return written.accepted
        }
        return try await transaction { db in
            // Locked: the next change of this key waits for this one and plans from what it wrote.
            guard let written = try await change.write(db, locked: true, plan: plan) else {
                throw PostgresStoreInconsistency("the row of key \"\(key)\" changed while this transaction held it")
            }
            try await Self.record(db, context: context, response: written.response, at: written.acceptedAt)
            return written.accepted
        }
    }

    // MARK: Schedules

    public func insertSchedule(_ schedule: ScheduleRecord, context: WriteContext, response: StoredResponse) async throws {
        try await transaction { db in
            try await db.run(
                StoreStatements.insertSchedule,
                [
                    .text(schedule.id), .text(schedule.key), .text(schedule.action.rawValue), .text(schedule.request.serializedString),
                    .seconds(schedule.dueAt), .text(schedule.state.rawValue), .text(schedule.result), .seconds(schedule.createdAt),
                    .text(schedule.bundleID),
                ])
            try await Self.record(db, context: context, response: response, at: schedule.createdAt)
        }
    }

    public func schedule(id: String) async throws -> ScheduleRecord? {
        try await rows("SELECT \(ScheduleRecord.columns) FROM schedules WHERE id = ?", [.text(id)])
            .first.map(ScheduleRecord.init(row:))
    }

    public func schedules(app: String?, key: String?) async throws -> [ScheduleRecord] {
        try await rows(
            """
            SELECT \(ScheduleRecord.columns) FROM schedules WHERE (?::text IS NULL OR bundle_id = ?) AND (?::text IS NULL OR key = ?)
            ORDER BY due_at, id
            """,
            [.text(app), .text(app), .text(key), .text(key)]
        ).map(ScheduleRecord.init(row:))
    }

    public func cancelSchedule(id: String, at: Date) async throws -> ScheduleRecord? {
        try await transaction { db in
            guard
                var schedule = try await db.rows("SELECT \(ScheduleRecord.columns) FROM schedules WHERE id = ? FOR UPDATE", [.text(id)])
                    .first.map(ScheduleRecord.init(row:))
            else { return nil }
            guard schedule.state == .pending else {
                throw StoreError(.scheduleNotPending, "schedule \(id) is \(schedule.state.rawValue), not pending")
            }
            try await db.run("UPDATE schedules SET state = 'cancelled' WHERE id = ?", [.text(id)])
            schedule.state = .cancelled
            return schedule
        }
    }

    public func dueSchedules(at: Date, limit: Int) async throws -> [ScheduleRecord] {
        try await rows(
            "SELECT \(ScheduleRecord.columns) FROM schedules WHERE state = 'pending' AND due_at <= ? ORDER BY due_at, id LIMIT ?",
            [.seconds(at), .integer(Int64(limit))]
        ).map(ScheduleRecord.init(row:))
    }

    public func failSchedule(id: String, reason: String) async throws {
        try await run(
            "UPDATE schedules SET state = 'failed', result = ? WHERE id = ? AND state = 'pending'", [.text(reason), .text(id)])
    }

    // MARK: The outbox

    public func claimDeliveries(dueBy now: Date, limit: Int, leaseUntil: Date) async throws -> [DeliveryRecord] {
        try await transaction { db in
            // SKIP LOCKED: instances claiming at once each take other pushes, and none waits.
            let claimed = try await db.rows(Self.claim, [.seconds(leaseUntil), .seconds(now), .integer(Int64(limit))]).map(DeliveryRow.init(row:))
            let starts = claimed.filter { $0.record.target.kind == .pushToStart }.map(\.record.id)
            var withdrawn = Set<Int64>()
            for case .move(let move) in OutboxRules.decisions(after: .claimed(starts: starts), at: now) {
                withdrawn.formUnion(try await db.rows(OutboxStatements.move(move, returningIDs: true)).compactMap { $0.integer(0) })
            }
            return try await Self.withPayloads(db, claimed.filter { !withdrawn.contains($0.record.id) }.sorted { $0.record.id < $1.record.id })
        }
    }

    /// The due pushes are locked by a sub-select that runs once (`ARRAY(…)`, an init plan): as
    /// `id IN (…)`, a plan made on an empty table ran it again for every row, each run locking
    /// the next due pushes, and a claim took the whole outbox. And it is not prepared, but planned
    /// at each claim on the table as it is then (a claim is one statement per batch of up to
    /// 1,000 pushes): prepared on a new database's empty table, the plan found the locked pushes
    /// by reading the whole table, for every batch (`PostgresPlanTests`).
    static let claim = """
        UPDATE deliveries SET status = '\(DeliveryEvent.claim.destination.rawValue)', next_attempt_at = ?
        WHERE id = ANY(ARRAY(
            SELECT id FROM deliveries WHERE \(OutboxStatements.statusCondition(.claim)) AND next_attempt_at <= ?
            ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED))
        RETURNING \(DeliveryRecord.columns)
        """

    public func releaseClaims(at: Date) async throws {
        try await transaction { db in try await db.carryOut(.restarted(alone: false), at: at) }
    }

    public func abandonClaims(_ ids: [Int64], leasedUntil: Date, at: Date) async throws {
        try await transaction { db in try await db.carryOut(.abandoned(ids: ids, leasedUntil: leasedUntil), at: at) }
    }

    public func recordOutcomes(_ outcomes: [(id: Int64, outcome: DeliveryOutcome)], at: Date) async throws {
        guard !outcomes.isEmpty else { return }
        try await transaction { db in
            var sent: (ids: [Int64], statuses: [Int64], apnsIDs: [String]) = ([], [], [])
            for (id, outcome) in outcomes {
                switch outcome {
                case .sent(let status, let apnsID):
                    sent.ids.append(id)
                    sent.statuses.append(Int64(status))
                    sent.apnsIDs.append(apnsID ?? "")
                case .retry, .failed:
                    let answer = OutboxStatements.answer(id: id, outcome, at: at)
                    let answered = try await db.rows(answer).first.map { row in
                        try OutboxStatements.answered(
                            bundleID: row.string(0), key: row.string(1), target: row.string(2), deviceID: row.text(3), token: row.text(4),
                            channelID: row.text(5))
                    }
                    // An answer to a push no longer claimed changes nothing.
                    if let answered { try await db.carryOut(.answered(answered, outcome), at: at) }
                }
            }
            guard !sent.ids.isEmpty else { return }
            var binds = PostgresBindings()
            binds.append(at.timeIntervalSince1970)
            binds.append(sent.ids)
            binds.append(sent.statuses)
            binds.append(sent.apnsIDs)
            binds.append(OutboxStatements.sourceStatuses(.sent))
            try await db.rows(PreparedStatements.RecordSent.self, bindings: binds)
        }
    }

    public func nextDueDate() async throws -> Date? {
        try await rows(PreparedStatements.NextDue.self, []).first?.date(0)
    }

    public func deliveries(_ query: DeliveryQuery) async throws -> [DeliveryRecord] {
        try await connection { db in
            let rows = try await db.rows(
                """
                SELECT \(DeliveryRecord.columns) FROM deliveries
                WHERE (?::text IS NULL OR bundle_id = ?) AND (?::text IS NULL OR key = ?) AND (?::text IS NULL OR status = ?)
                    AND (?::bigint IS NULL OR id < ?) AND (?::text IS NULL OR apns_reason = ?)
                ORDER BY id DESC LIMIT ?
                """,
                [
                    .text(query.bundleID), .text(query.bundleID), .text(query.key), .text(query.key), .text(query.status?.rawValue),
                    .text(query.status?.rawValue), .integer(query.before), .integer(query.before), .text(query.reason), .text(query.reason),
                    .integer(Int64(query.limit)),
                ]
            ).map(DeliveryRow.init(row:))
            return query.includePayloads ? try await Self.withPayloads(db, rows) : rows.map(\.record)
        }
    }

    public func retryDelivery(id: Int64, app: String?, at now: Date) async throws -> DeliveryRetry.Outcome {
        try await transaction { db in
            guard
                let failed = try await db.rows(StoreStatements.retryCandidate + " FOR UPDATE", [.integer(id)]).first.map(DeliveryRow.init(row:))?
                    .record,
                app == nil || failed.bundleID == app
            else { return .notFound }
            let check = StoreStatements.retryTarget(failed.target, app: failed.bundleID, key: failed.key)
            let target = DeliveryRetry.targetState(failed.target, row: try await db.rows(check.text, check.arguments).first)
            let (kind, deviceID, _, channelID) = failed.target.columns
            let newer = try await db.rows(
                StoreStatements.newerPush,
                [.text(failed.bundleID), .text(failed.key), .text(kind), .text(deviceID ?? ""), .text(channelID ?? ""), .integer(id)]
            ).first?.integer(0)
            if let refusal = DeliveryRetry.refusal(status: failed.status, target: target, newerPush: newer) { return .refused(refusal) }
            let rows = try await db.rows(StoreStatements.retry, [.text("retry of push \(id)"), .seconds(now), .seconds(now), .integer(id)])
                .map(DeliveryRow.init(row:))
            try await db.run("SELECT pg_notify(?, '')", [.text(Self.outboxChannel)])
            guard let retried = try await Self.withPayloads(db, rows).first else { return .notFound }
            return .retried(retried)
        }
    }

    public func deliveryCounts() async throws -> [DeliveryStatus: Int] {
        var counts: [DeliveryStatus: Int] = [:]
        for row in try await rows("SELECT status, COUNT(*) FROM deliveries GROUP BY status") {
            counts[try DeliveryStatus(stored: row.string(0), column: "deliveries.status")] = row.int(1)
        }
        return counts
    }

    // MARK: Keys and tokens

    public func activities(_ query: ActivityQuery) async throws -> [ActivityRecord] {
        let statement = StoreStatements.activities(query)
        return try await rows(statement.text, statement.arguments).map(ActivityRecord.listed(row:))
    }

    public func activity(app: String, key: String) async throws -> ActivityRecord? {
        try await connection { db in try await Self.activity(db, app: app, key: key, locked: false) }
    }

    public func activityTokens(app: String, key: String) async throws -> [ActivityTokenRecord] {
        // A token's last result is that of its newest delivery that was attempted.
        try await rows(
            """
            SELECT \(ActivityTokenRecord.columns("t")), d.apns_status, d.apns_reason, d.attempted_at
            FROM activity_tokens t LEFT JOIN LATERAL (
                SELECT apns_status, apns_reason, attempted_at FROM deliveries
                WHERE bundle_id = t.bundle_id AND key = t.key AND device_id = t.device_id AND token = t.token AND attempts > 0
                ORDER BY created_at DESC, id DESC LIMIT 1) d ON TRUE
            WHERE t.bundle_id = ? AND t.key = ? ORDER BY t.device_id
            """,
            [.text(app), .text(key)]
        ).map { row in
            var token = try ActivityTokenRecord(row: row)
            (token.lastStatus, token.lastReason, token.lastDeliveryAt) = (row.int(10), row.text(11), row.date(12))
            return token
        }
    }

    public func pushToStartTokens(deviceID: String) async throws -> [PushToStartTokenRecord] {
        try await rows(
            "SELECT \(PushToStartTokenRecord.columns) FROM push_to_start_tokens WHERE device_id = ? ORDER BY bundle_id, attributes_type",
            [.text(deviceID)]
        ).map(PushToStartTokenRecord.init(row:))
    }

    public func expireActivities(startedBefore: Date, at: Date, channelDeleteAfter: Date) async throws -> [String] {
        try await transaction { db in
            let keys = try await db.rows(
                "SELECT bundle_id, key FROM activities WHERE state = 'active' AND started_at < ? ORDER BY bundle_id, key FOR UPDATE SKIP LOCKED",
                [.seconds(startedBefore)]
            ).map { (app: $0.string(0), key: $0.string(1)) }
            for (app, key) in keys {
                try await db.run(
                    StoreStatements.expireActivity,
                    [.seconds(at), .text(app), .text(key)])
                try await db.run(
                    StoreStatements.expireTokens,
                    [.text(app), .text(key)])
                try await db.carryOut(.activityExpired(app: app, key: key), at: at)
                try await db.run(
                    StoreStatements.deleteKeyChannelsAfter,
                    [.seconds(channelDeleteAfter), .text(app), .text(key)])
            }
            return keys.map(\.key)
        }
    }

    public func counts() async throws -> StoreCounts {
        let row = try await rows(
            """
            SELECT (SELECT COUNT(*) FROM push_to_start_tokens WHERE dead_reason IS NULL),
                (SELECT COUNT(*) FROM activity_tokens WHERE state = 'live'),
                (SELECT COUNT(*) FROM activities WHERE state = 'active'),
                (SELECT COUNT(*) FROM channels WHERE deleted_at IS NULL)
            """
        ).first
        return StoreCounts(
            pushToStartTokens: row?.int(0) ?? 0, liveActivityTokens: row?.int(1) ?? 0, activeKeys: row?.int(2) ?? 0, channels: row?.int(3) ?? 0)
    }

    // MARK: Instances

    public func takeLease(_ name: String, holder: String, until: Date, at now: Date) async throws -> Bool {
        try await !rows(StoreStatements.takeLease, [.text(name), .text(holder), .seconds(until), .seconds(now)]).isEmpty
    }

    /// LISTENs on its own connection, held while it watches; queued pushes are NOTIFYed in the
    /// transaction that queues them, so a listener hears of them once they are committed.
    public func watchOutbox(_ queued: @escaping @Sendable () -> Void) async throws {
        try await connection { connection in
            try await connection.listen(on: Self.outboxChannel) { notifications in
                for try await _ in notifications { queued() }
            }
        }
    }

    /// One statement takes a token when the refilled bucket holds one (as `TokenBucket.refilled`
    /// computes); nothing comes back when it does not, and the wait is then read.
    public func takeRequest(_ key: String, from bucket: TokenBucket, at now: Date) async throws -> Int? {
        let (burst, seconds, rate): (SQLArgument, SQLArgument, SQLArgument) = (.real(bucket.burst), .seconds(now), .real(bucket.rate))
        let taken = try await rows(
            PreparedStatements.TakeRequest.self, [.text(key), .real(bucket.burst - 1), seconds, burst, seconds, rate, seconds, burst, seconds, rate])
        guard taken.isEmpty else { return nil }
        guard let row = try await rows("SELECT tokens, at FROM rate_buckets WHERE key = ?", [.text(key)]).first,
            let tokens = row.real(0), let last = row.date(1)
        else { return nil }
        return bucket.wait(holding: bucket.refilled(tokens, since: last, at: now))
    }

    /// The channel the instances sharing a database hear of queued pushes on.
    static let outboxChannel = "liverelay_outbox"

    // MARK: Contracts

    public func saveContract(_ contract: ContractRecord) async throws {
        try await run(
            StoreStatements.saveContract,
            [.text(contract.bundleID), .text(contract.attributesType), .text(contract.contract.serializedString), .seconds(contract.updatedAt)])
    }

    public func contracts() async throws -> [ContractRecord] {
        try await rows("SELECT \(ContractRecord.columns) FROM contracts ORDER BY bundle_id, attributes_type")
            .map(ContractRecord.init(row:))
    }

    // MARK: Channels

    public func saveChannel(_ channel: ChannelRecord) async throws {
        try await run(
            StoreStatements.saveChannel,
            [
                .text(channel.channelID), .text(channel.key), .integer(Int64(channel.storagePolicy)), .seconds(channel.createdAt),
                .seconds(channel.deleteAfter), .seconds(channel.deletedAt), .text(channel.environment.rawValue), .text(channel.bundleID),
            ])
    }

    public func channels() async throws -> [ChannelRecord] {
        try await rows("SELECT \(ChannelRecord.columns) FROM channels ORDER BY created_at, channel_id")
            .map(ChannelRecord.init(row:))
    }

    public func channel(id: String) async throws -> ChannelRecord? {
        try await rows("SELECT \(ChannelRecord.columns) FROM channels WHERE channel_id = ?", [.text(id)])
            .first.map(ChannelRecord.init(row:))
    }

    public func channelsToDelete(at: Date) async throws -> [ChannelRecord] {
        try await rows(
            "SELECT \(ChannelRecord.columns) FROM channels WHERE deleted_at IS NULL AND delete_after <= ? ORDER BY delete_after",
            [.seconds(at)]
        ).map(ChannelRecord.init(row:))
    }

    public func markChannelDeleted(id: String, at: Date) async throws {
        try await run("UPDATE channels SET deleted_at = ? WHERE channel_id = ?", [.seconds(at), .text(id)])
    }
}

// MARK: Statements shared by the transactions

extension PostgresStore {
    private func ready() async {
        while !started.value.load(ordering: .acquiring) { await Task.yield() }
    }

    private func connection<Value: Sendable>(_ body: (PostgresConnection) async throws -> Value) async throws -> Value {
        await ready()
        return try await client.withConnection(body)
    }

    private func rows(_ sql: String, _ arguments: [SQLArgument] = []) async throws -> [PostgresRandomAccessRow] {
        await ready()
        return try await client.query(SQLStatement(text: sql, arguments: arguments).postgresQuery, logger: Self.quiet).collect()
            .map { $0.makeRandomAccess() }
    }

    private func run(_ sql: String, _ arguments: [SQLArgument] = []) async throws {
        _ = try await rows(sql, arguments)
    }

    private func rows(_ sql: any PreparedSQL.Type, _ arguments: [SQLArgument]) async throws -> [PostgresRandomAccessRow] {
        try await connection { try await $0.rows(sql, arguments) }
    }

    /// A transaction on one connection; the error that ended it is the one thrown (not wrapped),
    /// so that the store's own errors reach the service as they are.
    private func transaction<Value: Sendable>(_ body: (PostgresConnection) async throws -> Value) async throws -> Value {
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
    fileprivate static let quiet = Logger(label: "liverelay.postgres.statements", factory: { _ in SwiftLogNoOpLogHandler() })

    private static func activity(_ db: PostgresConnection, app: String, key: String, locked: Bool) async throws -> ActivityRecord? {
        let select: any PreparedSQL.Type = locked ? PreparedStatements.ActivityForUpdate.self : PreparedStatements.Activity.self
        guard var activity = try await db.rows(select, [.text(app), .text(key)]).first.map(ActivityRecord.init(row:)) else { return nil }
        for row in try await db.rows(PreparedStatements.ActivityChannels.self, [.text(app), .text(key)]) {
            activity.channelIDs[try row.value(0, "channels.environment")] = row.string(1)
        }
        return activity
    }

    private static func arguments(_ activity: ActivityRecord) -> [SQLArgument] {
        [
            .text(activity.key), .text(activity.attributesType), .text(activity.attributes?.serializedString), .text(activity.state.rawValue),
            .text(activity.contentState?.serializedString), .seconds(activity.staleDate), .real(activity.relevanceScore),
            .seconds(activity.startedAt), .seconds(activity.endedAt), .text(activity.endReason?.rawValue), .seconds(activity.dismissalDate),
            .integer(activity.lastTimestamp), .text(activity.bundleID),
        ]
    }

    private static func insert(_ db: PostgresConnection, activity: ActivityRecord) async throws {
        try await db.run("INSERT INTO activities (\(ActivityRecord.columns)) VALUES (\(SQLStatement.marks(13)))", arguments(activity))
        for (environment, channelID) in activity.channelIDs {
            try await db.run(
                StoreStatements.insertActivityChannel,
                [.text(activity.bundleID), .text(activity.key), .text(environment.rawValue), .text(channelID)])
        }
    }

    private static func pushToStartTokens(
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
        return try await db.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: quiet).collect()
            .map { try PushToStartTokenRecord(row: $0.makeRandomAccess()) }
    }

    /// Rows per INSERT of planned deliveries: 18 values each, well under PostgreSQL's 65,535.
    private static let insertBatch = 500

    /// Writes the pushes of an accepted start, each payload once, after carrying out what the
    /// outbox's rules say they make pointless: queued, or claimed for the dispatcher (and
    /// returned) when a hand-over allows as many. (A change writes its own: `KeyChange`.)
    private static func enqueue(
        _ db: PostgresConnection, payloads: [[UInt8]], deliveries: [NewDelivery], at: Date, handOver: HandOver?
    ) async throws -> [DeliveryRecord] {
        guard !deliveries.isEmpty else { return [] }
        var payloadIDs: [Int64] = []
        for payload in payloads {
            let id = try await db.rows(PreparedStatements.InsertPayload.self, [.bytes(payload)]).first?.integer(0)
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
            return record
        }.sorted { $0.id < $1.id }
    }

    private static func record(_ db: PostgresConnection, context: WriteContext, response: StoredResponse, at: Date) async throws {
        if let claim = context.idempotency {
            do {
                try await db.run(
                    StoreStatements.insertIdempotencyKey,
                    [
                        .text(claim.apiKeyID), .text(claim.key), .text(claim.requestHash), .integer(Int64(response.status)), .bytes(response.body),
                        .seconds(at),
                    ])
            } catch let error as PSQLError where error.isUniqueViolation {
                throw StoreError(.idempotencyKeyTaken, "idempotency key \"\(claim.key)\" was used by a request at the same time")
            }
        }
        if let scheduleID = context.scheduleID {
            let done = try await db.changed(
                StoreStatements.scheduleDone,
                [.text(String(decoding: response.body, as: UTF8.self)), .text(scheduleID)])
            guard done > 0 else {
                throw StoreError(.scheduleNotPending, "schedule \(scheduleID) is no longer pending")
            }
        }
    }

    /// The records with their payloads, each payload read once and shared.
    private static func withPayloads(_ db: PostgresConnection, _ rows: [DeliveryRow]) async throws -> [DeliveryRecord] {
        var payloads: [Int64: [UInt8]] = [:]
        let ids = Array(Set(rows.map(\.payloadID)))
        if !ids.isEmpty {
            var binds = PostgresBindings()
            binds.append(ids)
            for row in try await db.rows(PreparedStatements.Payloads.self, bindings: binds) {
                payloads[row.integer(0) ?? 0] = row.bytes(1)
            }
        }
        return rows.map { row in
            var record = row.record
            record.payload = payloads[row.payloadID] ?? []
            return record
        }
    }
}

// MARK: Statements and rows

extension PostgresConnection {
    /// Carries out what the outbox's rules decide after `trigger`.
    func carryOut(_ trigger: OutboxTrigger, at now: Date) async throws {
        try await carryOut(OutboxRules.decisions(after: trigger, at: now))
    }

    func carryOut(_ decisions: [OutboxDecision]) async throws {
        for decision in decisions {
            switch decision {
            case .move(let move): try await rows(OutboxStatements.move(move))
            case .killToken(let token): try await rows(OutboxStatements.kill(token))
            }
        }
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
        try await query(statement.postgresQuery, logger: PostgresStore.quiet).collect().map { $0.makeRandomAccess() }
    }

    /// How many rows `sql` (an UPDATE or DELETE) changed.
    fileprivate func changed(_ sql: String, _ arguments: [SQLArgument]) async throws -> Int {
        try await rows("WITH changed AS (\(sql) RETURNING 1) SELECT COUNT(*) FROM changed", arguments).first?.int(0) ?? 0
    }
}

extension SQLStatement {
    fileprivate var postgresQuery: PostgresQuery { PostgresQuery(unsafeSQL: numbered, binds: arguments.postgresBindings) }
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

/// A database address that does not read, and why.
public struct InvalidDatabaseURL: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) { self.description = description }
}

/// A PostgreSQL address as `libpq` reads one: `postgres://user:password@host:port/database`,
/// `?host=/dir` for a Unix socket in `/dir`, `?sslmode=disable|prefer|require`.
struct PostgresURL: CustomStringConvertible {
    enum Endpoint {
        case socket(path: String)
        case tcp(host: String, port: Int)
    }

    enum SSLMode: String {
        case disable, prefer, require
    }

    var endpoint: Endpoint
    var user: String
    var password: String?
    var database: String
    var sslMode: SSLMode
    /// libpq's `options` (`-c search_path=…`, say), sent to the server as they are.
    var options: String?
    var description: String

    init(_ url: String) throws {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme?.lowercased() ?? "") else {
            throw InvalidDatabaseURL("a PostgreSQL address starts with postgres://, as postgres://user@host:5432/database")
        }
        let items = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        user = components.user.flatMap { $0.removingPercentEncoding } ?? "postgres"
        password = components.password.flatMap { $0.removingPercentEncoding }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? user : (path.removingPercentEncoding ?? path)
        let port = components.port ?? Int(items["port"] ?? "") ?? 5432
        let host = items["host"] ?? components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        switch items["sslmode"] ?? "prefer" {
        case "disable": sslMode = .disable
        case "prefer", "allow": sslMode = .prefer
        // Stricter than libpq's `require`: the certificate is verified too.
        case "require", "verify-ca", "verify-full": sslMode = .require
        case let mode: throw InvalidDatabaseURL("sslmode \"\(mode)\" is not one of disable, prefer, require")
        }
        options = items["options"]
        if host.hasPrefix("/") {
            endpoint = .socket(path: "\(host)/.s.PGSQL.\(port)")
            description = "postgres://\(user)@/\(database)?host=\(host)&port=\(port)"
        } else {
            endpoint = .tcp(host: host, port: port)
            description = "postgres://\(user)@\(host):\(port)/\(database)"
        }
    }

    var configuration: PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        switch endpoint {
        case .socket(let path):
            configuration = .init(unixSocketPath: path, username: user, password: password, database: database)
        case .tcp(let host, let port):
            let tls: PostgresClient.Configuration.TLS =
                switch sslMode {
                case .disable: .disable
                case .prefer: .prefer(.makeClientConfiguration())
                case .require: .require(.makeClientConfiguration())
                }
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        }
        configuration.options.additionalStartupParameters = Self.planOnce + (options.map { [("options", $0)] } ?? [])
        return configuration
    }

    /// The store's statements are prepared once per connection (`PreparedStatements`), and each is
    /// planned once too: left to choose, PostgreSQL planned a change's read and write again at
    /// every run (their generic plans look dearer to it than they are), which took a fifth of
    /// its CPU under `bench server`'s single-key updates.
    static let planOnce = [("plan_cache_mode", "force_generic_plan")]

    /// Connects once, outside the pool: a server that is not there, or refuses us, fails now with
    /// its reason, where the pool would go on trying.
    func probe(logger: Logger) async throws {
        var configuration: PostgresConnection.Configuration
        switch endpoint {
        case .socket(let path):
            configuration = .init(unixSocketPath: path, username: user, password: password, database: database)
        case .tcp(let host, let port):
            let tls: PostgresConnection.Configuration.TLS =
                switch sslMode {
                case .disable: .disable
                case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
                case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
                }
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        }
        configuration.options.additionalStartupParameters = options.map { [("options", $0)] } ?? []
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        try await connection.close()
    }
}

/// A class box, so that the store and the pool's task share one atomic.
private final class Arc<Value: ~Copyable>: Sendable where Value: Sendable {
    let value: Value
    init(_ value: consuming Value) { self.value = value }
}
