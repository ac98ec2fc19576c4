import Foundation
import GRDB
import LiveActivityKit
import Synchronization

/// The embedded store: one SQLite file in WAL mode through GRDB. Every statement with a fixed
/// text comes from the connection's statement cache, and rows are decoded by column position
/// straight from the statement: compiling a statement or copying a row costs more than most of
/// the statements here take to run.
///
/// Committed transactions survive the process being killed (`synchronous=NORMAL` in WAL mode
/// loses at most the last transactions on power loss, never on a crash of the process).
public final class SQLiteStore: RelayStore {
    private let pool: DatabasePool
    public let path: String
    /// Copies the WAL back into the database file beside the writer, never inside a commit.
    /// SQLite's automatic checkpoint runs in whichever commit crosses 1000 pages, and the request
    /// behind that commit would wait for the copy and an fsync.
    private let checkpointer: DatabaseQueue
    private let checkpoints = Mutex<(running: Bool, last: ContinuousClock.Instant)>((false, .now))

    /// Opens (creating) the database at `path`. Call `migrate()` before use. The database and its
    /// `-wal` and `-shm` files are the owner's alone (0600): they hold full push tokens. SQLite
    /// gives the last two the database file's mode, so an empty file made 0600 comes first, and
    /// files made by an older release are tightened.
    public init(path: String) throws {
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
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            try db.execute(sql: "PRAGMA wal_autocheckpoint = 0")
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        checkpointer = try DatabaseQueue(path: path, configuration: configuration)
        self.path = path
    }

    /// A write transaction, then a checkpoint in the background when the last is 250 ms old.
    private func write<Value: Sendable>(_ body: @Sendable (Database) throws -> Value) async throws -> Value {
        let value = try await pool.write(body)
        let due = checkpoints.withLock { state in
            guard !state.running, ContinuousClock.now - state.last >= .milliseconds(250) else { return false }
            state.running = true
            return true
        }
        if due {
            checkpointer.asyncWriteWithoutTransaction { [self] db in
                // PASSIVE: copies what no reader still needs, and never waits for the writer.
                let pages = (try? db.checkpoint(.passive))?.walFrameCount ?? 0
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

    @discardableResult
    public func migrate() async throws -> [String] {
        var migrator = DatabaseMigrator()
        for migration in SQLiteMigrations.all {
            migrator.registerMigration(migration.name) { db in
                for statement in migration.statements { try db.execute(sql: statement) }
            }
        }
        let ready = migrator
        let before = try await pool.read { try ready.appliedIdentifiers($0) }
        try ready.migrate(pool)
        return SQLiteMigrations.all.map(\.name).filter { !before.contains($0) }
    }

    // MARK: Apps

    public func saveApp(_ app: AppRecord) async throws {
        try await write { db in
            try db.run(
                StoreStatements.saveApp,
                [app.bundleID, app.teamID, app.keyID, app.signingKey, app.createdAt.seconds, app.updatedAt.seconds])
        }
    }

    public func apps() async throws -> [AppRecord] {
        try await pool.read { db in
            try db.fetchAll("SELECT \(AppRecord.columns) FROM apps ORDER BY bundle_id", as: AppRecord.init(row:))
        }
    }

    public func adoptUnnamedData(bundleID: String) async throws -> Bool {
        try await write { db in
            var adopted = false
            for table in [
                "push_to_start_tokens", "activities", "activity_tokens", "activity_channels", "channels", "schedules", "deliveries", "api_keys",
            ] {
                try db.run("UPDATE \(table) SET bundle_id = ? WHERE bundle_id = ''", [bundleID])
                adopted = adopted || db.changesCount > 0
            }
            return adopted
        }
    }

    // MARK: Dashboard sessions

    public func insertDashboardSession(_ session: DashboardSessionRecord) async throws {
        try await write { db in
            try db.run(StoreStatements.deleteExpiredDashboardSessions, [session.signedInAt.seconds])
            try db.run(
                StoreStatements.insertDashboardSession,
                [session.idHash, session.apiKeyID, session.formToken, session.signedInAt.seconds, session.expiresAt.seconds])
        }
    }

    public func dashboardSession(idHash: Data, at now: Date) async throws -> (session: DashboardSessionRecord, key: APIKeyRecord)? {
        try await pool.read { db in
            try db.fetchOne(StoreStatements.dashboardSession, [idHash, now.seconds]) { row in
                (DashboardSessionRecord(row: row, idHash: idHash), try APIKeyRecord(row: row))
            }
        }
    }

    public func deleteDashboardSession(idHash: Data) async throws {
        try await write { db in try db.run(StoreStatements.deleteDashboardSession, [idHash]) }
    }

    // MARK: API keys

    public func insertAPIKey(_ key: APIKeyRecord) async throws {
        try await write { db in
            try db.run(
                StoreStatements.insertAPIKey,
                [key.id, key.name, key.scope.rawValue, key.secretHash, key.createdAt.seconds, key.revokedAt?.seconds, key.bundleID])
        }
    }

    public func apiKey(secretHash: Data) async throws -> APIKeyRecord? {
        try await pool.read { db in
            try db.fetchOne("SELECT \(APIKeyRecord.columns) FROM api_keys WHERE secret_hash = ?", [secretHash], as: APIKeyRecord.init(row:))
        }
    }

    public func apiKeys() async throws -> [APIKeyRecord] {
        try await pool.read { db in
            try db.fetchAll("SELECT \(APIKeyRecord.columns) FROM api_keys ORDER BY created_at, id", as: APIKeyRecord.init(row:))
        }
    }

    public func revokeAPIKey(id: String, at: Date) async throws -> APIKeyRevocation {
        try await write { db in
            let scope = try String.fetchOne(db, sql: "SELECT scope FROM api_keys WHERE id = ? AND revoked_at IS NULL", arguments: [id])
            guard let scope else { return .notFound }
            if scope == APIKeyScope.admin.rawValue {
                let liveAdmins = try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM api_keys WHERE scope = ? AND revoked_at IS NULL", arguments: [APIKeyScope.admin.rawValue])
                if liveAdmins ?? 0 <= 1 { return .lastAdminKey }
            }
            try db.run("UPDATE api_keys SET revoked_at = ? WHERE id = ?", [at.seconds, id])
            return .revoked
        }
    }

    // MARK: Registrations

    public func savePushToStartToken(_ token: PushToStartTokenRecord) async throws {
        try await write { db in
            try db.run(
                StoreStatements.savePushToStartToken,
                [
                    token.deviceID, token.attributesType, token.userID, token.token, token.frequentPushesEnabled,
                    token.environment.rawValue, token.updatedAt.seconds, token.bundleID,
                ])
        }
    }

    @discardableResult
    public func saveActivityToken(_ token: ActivityTokenRecord, attributesType: String) async throws -> ActivityRecord {
        try await write { db in
            var activity = try Self.activity(db, app: token.bundleID, key: token.key)
            if let existing = activity, existing.state == .ended {
                throw StoreError(.keyEnded, "activity key \"\(existing.key)\" has ended")
            }
            if activity == nil {
                let created = ActivityRecord(
                    bundleID: token.bundleID, key: token.key, attributesType: attributesType, startedAt: token.registeredAt, lastTimestamp: 0)
                try Self.insert(db, activity: created)
                activity = created
            }
            try db.run(
                StoreStatements.saveActivityToken,
                [
                    token.key, token.deviceID, token.activityID, token.token, token.frequentPushesEnabled,
                    token.registeredAt.seconds, token.environment.rawValue, token.bundleID,
                ])
            try db.carryOut(
                .activityTokenRegistered(app: token.bundleID, key: token.key, deviceID: token.deviceID), at: token.registeredAt)
            return activity!
        }
    }

    public func endActivityToken(app: String, key: String, deviceID: String, state: ActivityTokenState, at: Date) async throws -> Bool {
        try await write { db in
            try db.run(
                StoreStatements.endActivityToken,
                [state.rawValue, app, key, deviceID])
            guard db.changesCount > 0 else { return false }
            try db.carryOut(.activityEndedOnDevice(app: app, key: key, deviceID: deviceID, state: state), at: at)
            return true
        }
    }

    // MARK: Accepting requests

    public func idempotentResponse(apiKeyID: String, key: String) async throws -> IdempotentResponse? {
        try await pool.read { db in
            try db.fetchOne("SELECT request_hash, status, body FROM idempotency_keys WHERE api_key_id = ? AND key = ?", [apiKeyID, key]) { row in
                IdempotentResponse(requestHash: row[0], response: StoredResponse(status: row[1], body: row.bytes(2)))
            }
        }
    }

    public func audienceEnvironments(app: String, attributesType: String, audience: Audience) async throws -> Set<PushEnvironment> {
        try await pool.read { db in
            Set(try Self.pushToStartTokens(db, app: app, attributesType: attributesType, audience: audience).map(\.environment))
        }
    }

    public func acceptStart<Outcome: Sendable>(
        app: String, key: String, attributesType: String, audience: Audience, context: WriteContext,
        plan: @Sendable ([PushToStartTokenRecord]) throws -> (StartPlan, Outcome)
    ) async throws -> Accepted<Outcome> {
        try await write { db in
            if try Self.activity(db, app: app, key: key) != nil {
                throw StoreError(.keyExists, "activity key \"\(key)\" already exists")
            }
            let tokens = try Self.pushToStartTokens(db, app: app, attributesType: attributesType, audience: audience)
            let (planned, outcome) = try plan(tokens)
            try Self.insert(db, activity: planned.activity)
            let claimed = try Self.enqueue(
                db, payloads: planned.payloads, deliveries: planned.deliveries, at: planned.acceptedAt, handOver: context.handOver)
            try Self.record(db, context: context, response: planned.response, at: planned.acceptedAt)
            return Accepted(outcome: outcome, claimed: claimed)
        }
    }

    public func acceptChange<Outcome: Sendable>(
        app: String, key: String, budget: ChangeBudget, context: WriteContext,
        plan: @Sendable (ChangeSnapshot) throws -> (ChangePlan, Outcome)
    ) async throws -> Accepted<Outcome> {
        try await write { db in
            let activity = try Self.activity(db, app: app, key: key)
            var tokens: [ActivityTokenRecord] = []
            var tokenCount = 0
            var counts: [String: Int] = [:]
            if activity != nil, case .perDevice(let windowStart) = budget {
                tokens = try db.fetchAll(
                    StoreStatements.liveTokens,
                    [app, key], as: ActivityTokenRecord.init(row:))
                tokenCount = tokens.count
                try db.forEach(
                    StoreStatements.priority10Counts,
                    [app, key, windowStart.seconds]
                ) { row in counts[row[0]] = row[1] }
            } else if activity != nil {
                // One priority for every push: the plan needs only how many there will be.
                tokenCount =
                    try db.fetchOne(
                        StoreStatements.liveTokenCount, [app, key]
                    ) { $0[0] as Int } ?? 0
            }
            let channels =
                activity == nil || activity!.channelIDs.isEmpty
                ? []
                : try db.fetchAll(
                    StoreStatements.channelsOfKeyRecords, [app, key],
                    as: ChannelRecord.init(row:))
            let (planned, outcome) = try plan(
                ChangeSnapshot(activity: activity, liveTokens: tokens, liveTokenCount: tokenCount, priority10Counts: counts, channels: channels))
            try Self.updateChanged(db, activity: planned.activity)
            // Written before an end ends the tokens: its fan-out goes to those live until now.
            let claimed = try Self.enqueue(
                db, payloads: [planned.payload], deliveries: planned.deliveries, fanOut: planned.fanOut.map { ($0, tokenCount) },
                at: planned.acceptedAt, handOver: context.handOver)
            if planned.activity.state == .ended {
                try db.run(
                    StoreStatements.endKeyTokens,
                    [app, key])
                if let deleteAfter = planned.channelDeleteAfter {
                    try db.run(
                        StoreStatements.deleteKeyChannelsAfter,
                        [deleteAfter.seconds, app, key])
                }
            }
            try Self.record(db, context: context, response: planned.response, at: planned.acceptedAt)
            return Accepted(outcome: outcome, claimed: claimed)
        }
    }

    // MARK: Schedules

    public func insertSchedule(_ schedule: ScheduleRecord, context: WriteContext, response: StoredResponse) async throws {
        try await write { db in
            try db.run(
                StoreStatements.insertSchedule,
                [
                    schedule.id, schedule.key, schedule.action.rawValue, schedule.request.serializedString, schedule.dueAt.seconds,
                    schedule.state.rawValue, schedule.result, schedule.createdAt.seconds, schedule.bundleID,
                ])
            try Self.record(db, context: context, response: response, at: schedule.createdAt)
        }
    }

    public func schedule(id: String) async throws -> ScheduleRecord? {
        try await pool.read { db in
            try db.fetchOne("SELECT \(ScheduleRecord.columns) FROM schedules WHERE id = ?", [id], as: ScheduleRecord.init(row:))
        }
    }

    public func schedules(app: String?, key: String?) async throws -> [ScheduleRecord] {
        try await pool.read { db in
            try db.fetchAll(
                """
                SELECT \(ScheduleRecord.columns) FROM schedules WHERE (? IS NULL OR bundle_id = ?) AND (? IS NULL OR key = ?)
                ORDER BY due_at, id
                """,
                [app, app, key, key], as: ScheduleRecord.init(row:))
        }
    }

    public func cancelSchedule(id: String, at: Date) async throws -> ScheduleRecord? {
        try await write { db in
            guard let schedule = try db.fetchOne("SELECT \(ScheduleRecord.columns) FROM schedules WHERE id = ?", [id], as: ScheduleRecord.init(row:))
            else {
                return nil
            }
            guard schedule.state == .pending else {
                throw StoreError(.scheduleNotPending, "schedule \(id) is \(schedule.state.rawValue), not pending")
            }
            try db.run("UPDATE schedules SET state = 'cancelled' WHERE id = ?", [id])
            var cancelled = schedule
            cancelled.state = .cancelled
            return cancelled
        }
    }

    public func dueSchedules(at: Date, limit: Int) async throws -> [ScheduleRecord] {
        try await pool.read { db in
            try db.fetchAll(
                "SELECT \(ScheduleRecord.columns) FROM schedules WHERE state = 'pending' AND due_at <= ? ORDER BY due_at, id LIMIT ?",
                [at.seconds, limit], as: ScheduleRecord.init(row:))
        }
    }

    public func failSchedule(id: String, reason: String) async throws {
        try await write { db in
            try db.run("UPDATE schedules SET state = 'failed', result = ? WHERE id = ? AND state = 'pending'", [reason, id])
        }
    }

    // MARK: The outbox

    public func claimDeliveries(dueBy now: Date, limit: Int, leaseUntil: Date) async throws -> [DeliveryRecord] {
        try await write { db in
            // One statement picks and leases; RETURNING gives no order, so the oldest go first by id.
            let claimed = try db.fetchAll(
                Self.claim,
                [leaseUntil.seconds, now.seconds, limit], as: DeliveryRow.init(row:))
            let starts = claimed.filter { $0.record.target.kind == .pushToStart }.map(\.record.id)
            let withdrawn = try db.carryOutMoves(.claimed(starts: starts), at: now)
            return try Self.withPayloads(db, claimed.filter { !withdrawn.contains($0.record.id) }.sorted { $0.record.id < $1.record.id })
        }
    }

    public func releaseClaims(at: Date) async throws {
        try await write { db in try db.carryOut(.restarted(alone: true), at: at) }
    }

    public func abandonClaims(_ ids: [Int64], leasedUntil: Date, at: Date) async throws {
        try await write { db in try db.carryOut(.abandoned(ids: ids, leasedUntil: leasedUntil), at: at) }
    }

    /// Due deliveries, claimed until a lease's end (`?`: the lease, now, how many).
    private static let claim = """
        UPDATE deliveries SET status = '\(DeliveryEvent.claim.destination.rawValue)', next_attempt_at = ?
        WHERE id IN (
            SELECT id FROM deliveries WHERE \(OutboxStatements.statusCondition(.claim)) AND next_attempt_at <= ?
            ORDER BY next_attempt_at, id LIMIT ?)
        RETURNING \(DeliveryRecord.columns)
        """

    /// Batch sizes: a handful of statement texts to cache, and few statements for any count.
    private static let batchSizes = [256, 32, 4, 1]

    /// Sent pushes, `rows` at a time: (id, status, apns-id) each. One statement per few hundred
    /// pushes instead of one each, which was most of the cost of recording a fan-out. The statuses
    /// it moves from come last, bound (`OutboxStatements.statusCondition(amongIDs:)`).
    private static let recordSent = Dictionary(
        uniqueKeysWithValues: batchSizes.map { rows in
            (
                rows,
                """
                UPDATE deliveries SET status = '\(DeliveryEvent.sent.destination.rawValue)', attempts = attempts + 1, finished_at = ?,
                    attempted_at = ?, apns_status = o.column2, apns_id = o.column3, apns_reason = NULL
                FROM (VALUES \(repeatElement("(?, ?, ?)", count: rows).joined(separator: ", "))) AS o
                WHERE deliveries.id = o.column1 AND \(OutboxStatements.statusCondition(amongIDs: .sent, column: "deliveries.status").text)
                """
            )
        })
    private static let recordSentStatuses = OutboxStatements.sourceStatuses(.sent)

    public func recordOutcomes(_ outcomes: [(id: Int64, outcome: DeliveryOutcome)], at: Date) async throws {
        guard !outcomes.isEmpty else { return }
        try await write { db in
            let now = at.seconds
            var sent: [(id: Int64, status: Int, apnsID: String?)] = []
            for (id, outcome) in outcomes {
                switch outcome {
                case .sent(let status, let apnsID):
                    sent.append((id, status, apnsID))
                case .retry, .failed:
                    let answer = OutboxStatements.answer(id: id, outcome, at: at)
                    let answered = try db.fetchOne(answer.text, answer.sqliteArguments) { row in
                        try OutboxStatements.answered(
                            bundleID: row[0], key: row[1], target: row[2], deviceID: row[3], token: row[4], channelID: row[5])
                    }
                    // An answer to a push no longer claimed changes nothing.
                    if let answered { try db.carryOut(.answered(answered, outcome), at: at) }
                }
            }
            for batch in sent.batched(Self.batchSizes) {
                var arguments: [(any DatabaseValueConvertible)?] = [now, now]
                arguments.reserveCapacity(2 + 3 * batch.count)
                for push in batch { arguments += [push.id, push.status, push.apnsID] }
                arguments += Self.recordSentStatuses.map { $0 }
                try db.run(Self.recordSent[batch.count]!, StatementArguments(arguments))
            }
        }
    }

    public func nextDueDate() async throws -> Date? {
        try await pool.read { db in
            try db.fetchOne("SELECT MIN(next_attempt_at) FROM deliveries WHERE \(OutboxStatements.statusCondition(.claim))") { $0.date(0) } ?? nil
        }
    }

    public func deliveries(_ query: DeliveryQuery) async throws -> [DeliveryRecord] {
        try await pool.read { db in
            let rows = try db.fetchAll(
                """
                SELECT \(DeliveryRecord.columns) FROM deliveries
                WHERE (? IS NULL OR bundle_id = ?) AND (? IS NULL OR key = ?) AND (? IS NULL OR status = ?) AND (? IS NULL OR id < ?)
                    AND (? IS NULL OR apns_reason = ?)
                ORDER BY id DESC LIMIT ?
                """,
                [
                    query.bundleID, query.bundleID, query.key, query.key, query.status?.rawValue, query.status?.rawValue, query.before,
                    query.before, query.reason, query.reason, query.limit,
                ],
                as: DeliveryRow.init(row:))
            return query.includePayloads ? try Self.withPayloads(db, rows) : rows.map(\.record)
        }
    }

    public func retryDelivery(id: Int64, app: String?, at now: Date) async throws -> DeliveryRetry.Outcome {
        try await write { db in
            guard let failed = try db.fetchOne(StoreStatements.retryCandidate, [id], as: DeliveryRow.init(row:))?.record,
                app == nil || failed.bundleID == app
            else { return .notFound }
            let check = StoreStatements.retryTarget(failed.target, app: failed.bundleID, key: failed.key)
            let target = DeliveryRetry.targetState(failed.target, row: try Row.fetchOne(db, sql: check.text, arguments: check.sqliteArguments))
            let (kind, deviceID, _, channelID) = failed.target.columns
            let newer =
                try db.fetchOne(
                    StoreStatements.newerPush, [failed.bundleID, failed.key, kind, deviceID ?? "", channelID ?? "", id]
                ) { try $0.integer(0) } ?? nil
            if let refusal = DeliveryRetry.refusal(status: failed.status, target: target, newerPush: newer) { return .refused(refusal) }
            let rows = try db.fetchAll(StoreStatements.retry, ["retry of push \(id)", now.seconds, now.seconds, id], as: DeliveryRow.init(row:))
            guard let retried = try Self.withPayloads(db, rows).first else { return .notFound }
            return .retried(retried)
        }
    }

    public func deliveryCounts() async throws -> [DeliveryStatus: Int] {
        try await pool.read { db in
            var counts: [DeliveryStatus: Int] = [:]
            try db.forEach("SELECT status, COUNT(*) FROM deliveries GROUP BY status") { row in
                counts[try DeliveryStatus(stored: row[0], column: "deliveries.status")] = row[1]
            }
            return counts
        }
    }

    // MARK: Keys and tokens

    public func activities(_ query: ActivityQuery) async throws -> [ActivityRecord] {
        let statement = StoreStatements.activities(query)
        return try await pool.read { db in try db.fetchAll(statement.text, statement.sqliteArguments, as: ActivityRecord.listed(row:)) }
    }

    public func activity(app: String, key: String) async throws -> ActivityRecord? {
        try await pool.read { db in try Self.activity(db, app: app, key: key) }
    }

    public func activityTokens(app: String, key: String) async throws -> [ActivityTokenRecord] {
        try await pool.read { db in
            // A token's last result is that of its newest delivery that was attempted.
            try db.fetchAll(
                """
                SELECT \(ActivityTokenRecord.columns("t")), d.apns_status, d.apns_reason, d.attempted_at
                FROM activity_tokens t LEFT JOIN deliveries d ON d.id = (
                    SELECT id FROM deliveries
                    WHERE bundle_id = t.bundle_id AND key = t.key AND device_id = t.device_id AND token = t.token AND attempts > 0
                    ORDER BY created_at DESC, id DESC LIMIT 1)
                WHERE t.bundle_id = ? AND t.key = ? ORDER BY t.device_id
                """, [app, key]
            ) { row in
                var token = try ActivityTokenRecord(row: row)
                (token.lastStatus, token.lastReason, token.lastDeliveryAt) = (row.int(10), row.text(11), row.date(12))
                return token
            }
        }
    }

    public func pushToStartTokens(deviceID: String) async throws -> [PushToStartTokenRecord] {
        try await pool.read { db in
            try db.fetchAll(
                "SELECT \(PushToStartTokenRecord.columns) FROM push_to_start_tokens WHERE device_id = ? ORDER BY bundle_id, attributes_type",
                [deviceID],
                as: PushToStartTokenRecord.init(row:))
        }
    }

    public func expireActivities(startedBefore: Date, at: Date, channelDeleteAfter: Date) async throws -> [String] {
        try await write { db in
            let keys = try db.fetchAll(
                "SELECT bundle_id, key FROM activities WHERE state = 'active' AND started_at < ? ORDER BY bundle_id, key",
                [startedBefore.seconds]
            ) { (app: $0[0] as String, key: $0[1] as String) }
            for (app, key) in keys {
                try db.run(
                    StoreStatements.expireActivity,
                    [at.seconds, app, key])
                try db.run(
                    StoreStatements.expireTokens,
                    [app, key])
                try db.carryOut(.activityExpired(app: app, key: key), at: at)
                try db.run(
                    StoreStatements.deleteKeyChannelsAfter,
                    [channelDeleteAfter.seconds, app, key])
            }
            return keys.map(\.key)
        }
    }

    public func counts() async throws -> StoreCounts {
        try await pool.read { db in
            StoreCounts(
                pushToStartTokens: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push_to_start_tokens WHERE dead_reason IS NULL") ?? 0,
                liveActivityTokens: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM activity_tokens WHERE state = 'live'") ?? 0,
                activeKeys: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM activities WHERE state = 'active'") ?? 0,
                channels: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM channels WHERE deleted_at IS NULL") ?? 0)
        }
    }

    // MARK: Instances

    public func takeLease(_ name: String, holder: String, until: Date, at now: Date) async throws -> Bool {
        try await write { db in
            try db.fetchOne(StoreStatements.takeLease, [name, holder, until.seconds, now.seconds]) { _ in true } ?? false
        }
    }

    // MARK: Contracts

    public func saveContract(_ contract: ContractRecord) async throws {
        try await write { db in
            try db.run(
                StoreStatements.saveContract,
                [contract.bundleID, contract.attributesType, contract.contract.serializedString, contract.updatedAt.seconds])
        }
    }

    public func contracts() async throws -> [ContractRecord] {
        try await pool.read { db in
            try db.fetchAll(
                "SELECT \(ContractRecord.columns) FROM contracts ORDER BY bundle_id, attributes_type", as: ContractRecord.init(row:))
        }
    }

    public func saveChannel(_ channel: ChannelRecord) async throws {
        try await write { db in
            try db.run(
                StoreStatements.saveChannel,
                [
                    channel.channelID, channel.key, channel.storagePolicy, channel.createdAt.seconds, channel.deleteAfter?.seconds,
                    channel.deletedAt?.seconds, channel.environment.rawValue, channel.bundleID,
                ])
        }
    }

    public func channels() async throws -> [ChannelRecord] {
        try await pool.read { db in
            try db.fetchAll("SELECT \(ChannelRecord.columns) FROM channels ORDER BY created_at, channel_id", as: ChannelRecord.init(row:))
        }
    }

    public func channel(id: String) async throws -> ChannelRecord? {
        try await pool.read { db in
            try db.fetchOne("SELECT \(ChannelRecord.columns) FROM channels WHERE channel_id = ?", [id], as: ChannelRecord.init(row:))
        }
    }

    public func channelsToDelete(at: Date) async throws -> [ChannelRecord] {
        try await pool.read { db in
            try db.fetchAll(
                "SELECT \(ChannelRecord.columns) FROM channels WHERE deleted_at IS NULL AND delete_after <= ? ORDER BY delete_after",
                [at.seconds], as: ChannelRecord.init(row:))
        }
    }

    public func markChannelDeleted(id: String, at: Date) async throws {
        try await write { db in
            try db.run("UPDATE channels SET deleted_at = ? WHERE channel_id = ?", [at.seconds, id])
        }
    }
}

// MARK: Statements shared by the transactions

extension SQLiteStore {
    private static func activity(_ db: Database, app: String, key: String) throws -> ActivityRecord? {
        guard
            var activity = try db.fetchOne(
                "SELECT \(ActivityRecord.columns) FROM activities WHERE bundle_id = ? AND key = ?", [app, key], as: ActivityRecord.init(row:))
        else { return nil }
        try db.forEach(StoreStatements.activityChannels, [app, key]) { row in
            activity.channelIDs[try PushEnvironment(stored: row[0], column: "channels.environment")] = row[1]
        }
        return activity
    }

    private static func insert(_ db: Database, activity: ActivityRecord) throws {
        try db.run(
            StoreStatements.insertActivity, activityArguments(activity))
        for (environment, channelID) in activity.channelIDs {
            try db.run(
                StoreStatements.insertActivityChannel,
                [activity.bundleID, activity.key, environment.rawValue, channelID])
        }
    }

    /// Writes what a change can change: the content, and the lifecycle fields when it ends the key.
    /// An update leaves `key` and `state` out of its SET list on purpose: SQLite rewrites every
    /// index entry whose columns (or partial-index condition) an UPDATE assigns, changed or not.
    private static func updateChanged(_ db: Database, activity: ActivityRecord) throws {
        let content: StatementArguments = [
            activity.contentState?.serializedString, activity.staleDate?.seconds, activity.relevanceScore, activity.lastTimestamp,
        ]
        if activity.state == .active {
            try db.run(
                "UPDATE activities SET content_state = ?, stale_date = ?, relevance_score = ?, last_timestamp = ? WHERE bundle_id = ? AND key = ?",
                content + [activity.bundleID, activity.key])
        } else {
            try db.run(
                """
                UPDATE activities SET content_state = ?, stale_date = ?, relevance_score = ?, last_timestamp = ?,
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

    private static func activityArguments(_ activity: ActivityRecord) -> StatementArguments {
        [
            activity.key, activity.attributesType, activity.attributes?.serializedString, activity.state.rawValue,
            activity.contentState?.serializedString, activity.staleDate?.seconds, activity.relevanceScore, activity.startedAt.seconds,
            activity.endedAt?.seconds, activity.endReason?.rawValue, activity.dismissalDate?.seconds, activity.lastTimestamp, activity.bundleID,
        ]
    }

    private static func pushToStartTokens(
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
    private static func enqueue(
        _ db: Database, payloads: [[UInt8]], deliveries: [NewDelivery], fanOut: (push: NewPush, count: Int)? = nil, at: Date,
        handOver: HandOver?
    ) throws -> [DeliveryRecord] {
        guard !deliveries.isEmpty || fanOut != nil else { return [] }
        var payloadIDs: [Int64] = []
        let insertPayload = try db.cachedStatement(sql: "INSERT INTO payloads (body) VALUES (?)")
        for payload in payloads {
            try insertPayload.execute(arguments: [Data(payload)])
            payloadIDs.append(db.lastInsertedRowID)
        }
        let now = at.seconds
        try db.carryOut(.accepted(deliveries: deliveries, fanOut: fanOut?.push), at: at)
        let entry = OutboxRules.entry(count: deliveries.count + (fanOut?.count ?? 0), handOver: handOver, at: at)
        let (status, due) = (entry.status.rawValue, entry.due.seconds)
        // Ids only grow (AUTOINCREMENT) and this transaction is the only writer: what it inserts
        // is every row above the highest id now.
        let handedOver = entry.status != .queued
        let lastIDBefore = handedOver ? try db.fetchOne("SELECT COALESCE(MAX(id), 0) FROM deliveries") { $0[0] as Int64 } ?? 0 : 0
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO deliveries (\(StoreStatements.newDeliveryColumns)) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?)
                """)
        for delivery in deliveries {
            let (kind, deviceID, token, channelID) = delivery.target.columns
            let push = delivery.push
            try insert.execute(arguments: [
                push.key, push.event.rawValue, kind, deviceID, token, channelID, payloadIDs[push.payloadIndex], push.priority.rawValue,
                push.priorityReason,
                push.expiration, push.timestamp, push.requestID, status, due, now, delivery.environment.rawValue, push.bundleID,
            ])
        }
        if let push = fanOut?.push {
            try db.run(
                StoreStatements.fanOut,
                [
                    push.event.rawValue, payloadIDs[push.payloadIndex], push.priority.rawValue, push.priorityReason, push.expiration,
                    push.timestamp, push.requestID, status, due, now, push.bundleID, push.key,
                ])
        }
        guard handedOver else { return [] }
        let payloadsByID = Dictionary(uniqueKeysWithValues: zip(payloadIDs, payloads))
        return try db.fetchAll(
            "SELECT \(DeliveryRecord.columns) FROM deliveries WHERE id > ? ORDER BY id", [lastIDBefore], as: DeliveryRow.init(row:)
        ).map { row in
            var record = row.record
            record.payload = payloadsByID[row.payloadID] ?? []
            return record
        }
    }

    private static func record(_ db: Database, context: WriteContext, response: StoredResponse, at: Date) throws {
        if let claim = context.idempotency {
            do {
                try db.run(
                    StoreStatements.insertIdempotencyKey,
                    [claim.apiKeyID, claim.key, claim.requestHash, response.status, Data(response.body), at.seconds])
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                throw StoreError(.idempotencyKeyTaken, "idempotency key \"\(claim.key)\" was used by a request at the same time")
            }
        }
        if let scheduleID = context.scheduleID {
            try db.run(
                StoreStatements.scheduleDone,
                [String(decoding: response.body, as: UTF8.self), scheduleID])
            guard db.changesCount > 0 else {
                throw StoreError(.scheduleNotPending, "schedule \(scheduleID) is no longer pending")
            }
        }
    }
}

// MARK: Statements and rows

extension Database {
    /// Carries out what the outbox's rules decide after `trigger`.
    fileprivate func carryOut(_ trigger: OutboxTrigger, at now: Date) throws {
        for decision in OutboxRules.decisions(after: trigger, at: now) {
            let statement =
                switch decision {
                case .move(let move): OutboxStatements.move(move)
                case .killToken(let token): OutboxStatements.kill(token)
                }
            try run(statement.text, statement.sqliteArguments)
        }
    }

    /// Carries out the moves the rules decide after `trigger`, and gives the ids of the deliveries
    /// moved. Their statements name ids, so each is compiled here, not kept in the cache.
    fileprivate func carryOutMoves(_ trigger: OutboxTrigger, at now: Date) throws -> Set<Int64> {
        var moved = Set<Int64>()
        for case .move(let move) in OutboxRules.decisions(after: trigger, at: now) {
            let statement = OutboxStatements.move(move, returningIDs: true)
            moved.formUnion(try Int64.fetchAll(self, sql: statement.text, arguments: statement.sqliteArguments))
        }
        return moved
    }

    /// Runs `sql` from the statement cache: compiled once per connection, not on every call.
    fileprivate func run(_ sql: String, _ arguments: StatementArguments = []) throws {
        try cachedStatement(sql: sql).execute(arguments: arguments)
    }

    /// Calls `body` with each row of `sql`, read in place (valid during the call only).
    fileprivate func forEach(_ sql: String, _ arguments: StatementArguments = [], _ body: (Row) throws -> Void) throws {
        let rows = try Row.fetchCursor(cachedStatement(sql: sql), arguments: arguments)
        while let row = try rows.next() { try body(row) }
    }

    fileprivate func fetchAll<Value>(_ sql: String, _ arguments: StatementArguments = [], as decode: (Row) throws -> Value) throws -> [Value] {
        var values: [Value] = []
        try forEach(sql, arguments) { values.append(try decode($0)) }
        return values
    }

    /// The first row's value; the statement still runs to its end (an UPDATE … RETURNING does
    /// its work on the first step, but is reset for reuse only once finished).
    fileprivate func fetchOne<Value>(_ sql: String, _ arguments: StatementArguments = [], as decode: (Row) throws -> Value) throws -> Value? {
        var value: Value?
        try forEach(sql, arguments) { row in if value == nil { value = try decode(row) } }
        return value
    }
}

extension Date {
    fileprivate var seconds: Double { timeIntervalSince1970 }
}

extension SQLStatement {
    fileprivate var sqliteArguments: StatementArguments {
        StatementArguments(
            arguments.map { argument -> (any DatabaseValueConvertible)? in
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
    fileprivate static func withPayloads(_ db: Database, _ rows: [DeliveryRow]) throws -> [DeliveryRecord] {
        var payloads: [Int64: [UInt8]] = [:]
        return try rows.map { row in
            var record = row.record
            if let payload = payloads[row.payloadID] {
                record.payload = payload
            } else {
                let payload = try db.fetchOne("SELECT body FROM payloads WHERE id = ?", [row.payloadID]) { try $0.bytes(0) } ?? []
                payloads[row.payloadID] = payload
                record.payload = payload
            }
            return record
        }
    }
}

extension Array {
    /// Consecutive slices, each of the largest of `sizes` (largest first, ending with 1) that fits.
    fileprivate func batched(_ sizes: [Int]) -> [ArraySlice<Element>] {
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
