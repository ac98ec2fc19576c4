import Foundation
import GRDB
import LiveActivityKit

/// The embedded store: one SQLite file in WAL mode through GRDB, prepared statements reused.
/// Committed transactions survive the process being killed (`synchronous=NORMAL` in WAL mode
/// loses at most the last transactions on power loss, never on a crash of the process).
public final class SQLiteStore: RelayStore {
    private let pool: DatabasePool
    public let path: String

    /// Opens (creating) the database at `path`. Call `migrate()` before use.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(10)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        self.path = path
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

    // MARK: API keys

    public func insertAPIKey(_ key: APIKeyRecord) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO api_keys (id, name, scope, secret_hash, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [key.id, key.name, key.scope.rawValue, key.secretHash, key.createdAt.seconds, key.revokedAt?.seconds])
        }
    }

    public func apiKey(secretHash: Data) async throws -> APIKeyRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM api_keys WHERE secret_hash = ?", arguments: [secretHash]).map(APIKeyRecord.init(row:))
        }
    }

    public func apiKeys() async throws -> [APIKeyRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM api_keys ORDER BY created_at, id").map(APIKeyRecord.init(row:))
        }
    }

    public func revokeAPIKey(id: String, at: Date) async throws -> Bool {
        try await pool.write { db in
            try db.execute(sql: "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", arguments: [at.seconds, id])
            return db.changesCount > 0
        }
    }

    // MARK: Registrations

    public func savePushToStartToken(_ token: PushToStartTokenRecord) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO push_to_start_tokens
                        (device_id, attributes_type, user_id, token, frequent_pushes, environment, updated_at, dead_reason)
                    VALUES (?, ?, ?, ?, ?, ?, ?, NULL)
                    ON CONFLICT (device_id, attributes_type) DO UPDATE SET
                        user_id = excluded.user_id, token = excluded.token, frequent_pushes = excluded.frequent_pushes,
                        environment = excluded.environment, updated_at = excluded.updated_at, dead_reason = NULL
                    """,
                arguments: [
                    token.deviceID, token.attributesType, token.userID, token.token, token.frequentPushesEnabled,
                    token.environment, token.updatedAt.seconds,
                ])
        }
    }

    public func saveActivityToken(_ token: ActivityTokenRecord, attributesType: String) async throws -> ActivityRecord {
        try await pool.write { db in
            var activity = try Self.activity(db, key: token.key)
            if let existing = activity, existing.state == .ended {
                throw StoreError(.keyEnded, "activity key \"\(existing.key)\" has ended")
            }
            if activity == nil {
                let created = ActivityRecord(
                    key: token.key, attributesType: attributesType, startedAt: token.registeredAt, lastTimestamp: 0)
                try Self.insert(db, activity: created)
                activity = created
            }
            try db.execute(
                sql: """
                    INSERT INTO activity_tokens
                        (key, device_id, activity_id, token, frequent_pushes, registered_at, state, state_reason)
                    VALUES (?, ?, ?, ?, ?, ?, 'live', NULL)
                    ON CONFLICT (key, device_id) DO UPDATE SET
                        activity_id = excluded.activity_id, token = excluded.token, frequent_pushes = excluded.frequent_pushes,
                        registered_at = excluded.registered_at, state = 'live', state_reason = NULL,
                        last_status = NULL, last_reason = NULL, last_delivery_at = NULL
                    """,
                arguments: [
                    token.key, token.deviceID, token.activityID, token.token, token.frequentPushesEnabled,
                    token.registeredAt.seconds,
                ])
            return activity!
        }
    }

    public func endActivityToken(key: String, deviceID: String, state: ActivityTokenState, at: Date) async throws -> Bool {
        try await pool.write { db in
            try db.execute(
                sql: "UPDATE activity_tokens SET state = ?, state_reason = 'reported by the device' WHERE key = ? AND device_id = ?",
                arguments: [state.rawValue, key, deviceID])
            guard db.changesCount > 0 else { return false }
            // Nothing more to send to an activity that is over on the device. A push already in
            // flight keeps its claim, so that its outcome is still recorded.
            try db.execute(
                sql: """
                    UPDATE deliveries SET status = 'skipped', finished_at = ?, apns_reason = ?
                    WHERE status = 'queued' AND key = ? AND device_id = ? AND target = 'activity'
                    """,
                arguments: [at.seconds, "activity \(state.rawValue) on the device", key, deviceID])
            return true
        }
    }

    // MARK: Accepting requests

    public func idempotentResponse(apiKeyID: String, key: String) async throws -> IdempotentResponse? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT request_hash, status, body FROM idempotency_keys WHERE api_key_id = ? AND key = ?",
                arguments: [apiKeyID, key]
            ).map { row in
                IdempotentResponse(requestHash: row["request_hash"], response: StoredResponse(status: row["status"], body: [UInt8](row["body"] as Data)))
            }
        }
    }

    public func acceptStart(
        key: String, attributesType: String, audience: Audience, context: WriteContext,
        plan: @Sendable ([PushToStartTokenRecord]) throws -> StartPlan
    ) async throws -> StoredResponse {
        try await pool.write { db in
            if try Self.activity(db, key: key) != nil {
                throw StoreError(.keyExists, "activity key \"\(key)\" already exists")
            }
            let tokens = try Self.pushToStartTokens(db, attributesType: attributesType, audience: audience)
            let planned = try plan(tokens)
            try Self.insert(db, activity: planned.activity)
            try Self.enqueue(db, payloads: planned.payloads, deliveries: planned.deliveries, at: planned.acceptedAt)
            try Self.record(db, context: context, response: planned.response, at: planned.acceptedAt)
            return planned.response
        }
    }

    public func acceptChange(
        key: String, budgetWindowStart: Date, context: WriteContext, plan: @Sendable (ChangeSnapshot) throws -> ChangePlan
    ) async throws -> StoredResponse {
        try await pool.write { db in
            let activity = try Self.activity(db, key: key)
            var tokens: [ActivityTokenRecord] = []
            var counts: [String: Int] = [:]
            if activity != nil {
                tokens = try Row.fetchAll(
                    db, sql: "SELECT * FROM activity_tokens WHERE key = ? AND state = 'live' ORDER BY device_id", arguments: [key]
                ).map(ActivityTokenRecord.init(row:))
                for row in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT COALESCE(device_id, '') AS device_id, COUNT(*) AS n FROM deliveries
                        WHERE key = ? AND target != 'push-to-start' AND priority = 10 AND created_at >= ?
                            AND status IN ('queued', 'sending', 'sent')
                        GROUP BY device_id
                        """,
                    arguments: [key, budgetWindowStart.seconds])
                {
                    counts[row["device_id"]] = row["n"]
                }
            }
            let channel = try activity?.channelID.flatMap {
                try Row.fetchOne(db, sql: "SELECT * FROM channels WHERE channel_id = ?", arguments: [$0]).map(ChannelRecord.init(row:))
            }
            let planned = try plan(ChangeSnapshot(activity: activity, liveTokens: tokens, priority10Counts: counts, channel: channel))
            try Self.update(db, activity: planned.activity)
            if planned.activity.state == .ended {
                try db.execute(
                    sql: "UPDATE activity_tokens SET state = 'ended', state_reason = 'key ended' WHERE key = ? AND state = 'live'",
                    arguments: [key])
                if let channelID = planned.activity.channelID, let deleteAfter = planned.channelDeleteAfter {
                    try db.execute(
                        sql: "UPDATE channels SET delete_after = ? WHERE channel_id = ? AND deleted_at IS NULL",
                        arguments: [deleteAfter.seconds, channelID])
                }
            }
            try Self.enqueue(db, payloads: planned.payloads, deliveries: planned.deliveries, at: planned.acceptedAt)
            try Self.record(db, context: context, response: planned.response, at: planned.acceptedAt)
            return planned.response
        }
    }

    // MARK: Schedules

    public func insertSchedule(_ schedule: ScheduleRecord, context: WriteContext, response: StoredResponse) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO schedules (id, key, action, request, due_at, state, result, created_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    schedule.id, schedule.key, schedule.action, schedule.request.serializedString, schedule.dueAt.seconds,
                    schedule.state.rawValue, schedule.result, schedule.createdAt.seconds,
                ])
            try Self.record(db, context: context, response: response, at: schedule.createdAt)
        }
    }

    public func schedule(id: String) async throws -> ScheduleRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM schedules WHERE id = ?", arguments: [id]).map(ScheduleRecord.init(row:))
        }
    }

    public func schedules(key: String?) async throws -> [ScheduleRecord] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM schedules WHERE ? IS NULL OR key = ? ORDER BY due_at, id", arguments: [key, key]
            ).map(ScheduleRecord.init(row:))
        }
    }

    public func cancelSchedule(id: String, at: Date) async throws -> ScheduleRecord? {
        try await pool.write { db in
            guard let schedule = try Row.fetchOne(db, sql: "SELECT * FROM schedules WHERE id = ?", arguments: [id]).map(ScheduleRecord.init(row:)) else {
                return nil
            }
            guard schedule.state == .pending else {
                throw StoreError(.scheduleNotPending, "schedule \(id) is \(schedule.state.rawValue), not pending")
            }
            try db.execute(sql: "UPDATE schedules SET state = 'cancelled' WHERE id = ?", arguments: [id])
            var cancelled = schedule
            cancelled.state = .cancelled
            return cancelled
        }
    }

    public func dueSchedules(at: Date, limit: Int) async throws -> [ScheduleRecord] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM schedules WHERE state = 'pending' AND due_at <= ? ORDER BY due_at, id LIMIT ?",
                arguments: [at.seconds, limit]
            ).map(ScheduleRecord.init(row:))
        }
    }

    public func failSchedule(id: String, reason: String) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE schedules SET state = 'failed', result = ? WHERE id = ? AND state = 'pending'", arguments: [reason, id])
        }
    }

    // MARK: The outbox

    private static let deliveryColumns = """
        d.id, d.key, d.event, d.target, d.device_id, d.token, d.channel_id, p.body AS payload, d.priority, d.priority_reason,
        d.expiration, d.timestamp, d.request_id, d.status, d.attempts, d.next_attempt_at, d.created_at, d.finished_at,
        d.apns_status, d.apns_reason, d.apns_id
        """

    public func claimDeliveries(dueBy now: Date, limit: Int, leaseUntil: Date) async throws -> [DeliveryRecord] {
        try await pool.write { db in
            let claimed = try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.deliveryColumns) FROM deliveries d JOIN payloads p ON p.id = d.payload_id
                    WHERE d.status IN ('queued', 'sending') AND d.next_attempt_at <= ?
                    ORDER BY d.next_attempt_at, d.id LIMIT ?
                    """,
                arguments: [now.seconds, limit]
            ).map(DeliveryRecord.init(row:))
            let claim = try db.cachedStatement(sql: "UPDATE deliveries SET status = 'sending', next_attempt_at = ? WHERE id = ?")
            for delivery in claimed {
                try claim.execute(arguments: [leaseUntil.seconds, delivery.id])
            }
            return claimed.map {
                var delivery = $0
                delivery.status = .sending
                delivery.nextAttemptAt = leaseUntil
                return delivery
            }
        }
    }

    public func releaseClaims(at: Date) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE deliveries SET status = 'queued', next_attempt_at = ? WHERE status = 'sending'", arguments: [at.seconds])
        }
    }

    public func recordOutcomes(_ outcomes: [(id: Int64, outcome: DeliveryOutcome)], at: Date) async throws {
        guard !outcomes.isEmpty else { return }
        try await pool.write { db in
            let now = at.seconds
            let sent = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET status = 'sent', attempts = attempts + 1, finished_at = ?, apns_status = ?, apns_id = ?,
                        apns_reason = NULL
                    WHERE id = ? AND status = 'sending'
                    """)
            let retry = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET status = 'queued', attempts = attempts + 1, next_attempt_at = ?, apns_status = ?,
                        apns_reason = ?
                    WHERE id = ? AND status = 'sending'
                    """)
            let failed = try db.cachedStatement(
                sql: """
                    UPDATE deliveries SET status = 'failed', attempts = attempts + 1, finished_at = ?, apns_status = ?, apns_reason = ?
                    WHERE id = ? AND status = 'sending'
                    """)
            let target = try db.cachedStatement(sql: "SELECT key, target, device_id, token FROM deliveries WHERE id = ?")
            let activityResult = try db.cachedStatement(
                sql: """
                    UPDATE activity_tokens SET last_status = ?, last_reason = ?, last_delivery_at = ?
                    WHERE key = ? AND device_id = ? AND token = ?
                    """)
            for (id, outcome) in outcomes {
                let status: Int?
                let reason: String?
                var tokenIsDead = false
                switch outcome {
                case .sent(let code, let apnsID):
                    try sent.execute(arguments: [now, code, apnsID, id])
                    (status, reason) = (code, nil)
                case .retry(let next, let code, let why):
                    try retry.execute(arguments: [next.seconds, code, why, id])
                    (status, reason) = (code, why)
                case .failed(let code, let why, let dead):
                    try failed.execute(arguments: [now, code, why, id])
                    (status, reason, tokenIsDead) = (code, why, dead)
                }
                guard db.changesCount > 0, let row = try Row.fetchOne(target, arguments: [id]) else { continue }
                let key: String = row["key"]
                let kind: String = row["target"]
                let deviceID: String? = row["device_id"]
                let token: String? = row["token"]
                guard let deviceID, let token else { continue }
                if kind == "activity" {
                    try activityResult.execute(arguments: [status, reason, now, key, deviceID, token])
                }
                guard tokenIsDead else { continue }
                if kind == "activity" {
                    try db.execute(
                        sql: "UPDATE activity_tokens SET state = 'dead', state_reason = ? WHERE key = ? AND device_id = ? AND token = ?",
                        arguments: [reason, key, deviceID, token])
                } else {
                    try db.execute(
                        sql: "UPDATE push_to_start_tokens SET dead_reason = ? WHERE device_id = ? AND token = ?",
                        arguments: [reason, deviceID, token])
                }
                try db.execute(
                    sql: """
                        UPDATE deliveries SET status = 'skipped', finished_at = ?, apns_reason = ?
                        WHERE token = ? AND status = 'queued'
                        """,
                    arguments: [now, "token dead: \(reason ?? "refused")", token])
            }
        }
    }

    public func nextDueDate() async throws -> Date? {
        try await pool.read { db in
            try Double.fetchOne(db, sql: "SELECT MIN(next_attempt_at) FROM deliveries WHERE status IN ('queued', 'sending')")
                .map(Date.init(timeIntervalSince1970:))
        }
    }

    public func deliveries(_ query: DeliveryQuery) async throws -> [DeliveryRecord] {
        try await pool.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.deliveryColumns) FROM deliveries d JOIN payloads p ON p.id = d.payload_id
                    WHERE (? IS NULL OR d.key = ?) AND (? IS NULL OR d.status = ?) AND (? IS NULL OR d.id < ?)
                    ORDER BY d.id DESC LIMIT ?
                    """,
                arguments: [
                    query.key, query.key, query.status?.rawValue, query.status?.rawValue, query.before, query.before, query.limit,
                ]
            ).map(DeliveryRecord.init(row:))
        }
    }

    public func deliveryCounts() async throws -> [DeliveryStatus: Int] {
        try await pool.read { db in
            var counts: [DeliveryStatus: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT status, COUNT(*) AS n FROM deliveries GROUP BY status") {
                if let status = DeliveryStatus(rawValue: row["status"]) { counts[status] = row["n"] }
            }
            return counts
        }
    }

    // MARK: Keys and tokens

    public func activity(key: String) async throws -> ActivityRecord? {
        try await pool.read { db in try Self.activity(db, key: key) }
    }

    public func activityTokens(key: String) async throws -> [ActivityTokenRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM activity_tokens WHERE key = ? ORDER BY device_id", arguments: [key])
                .map(ActivityTokenRecord.init(row:))
        }
    }

    public func pushToStartTokens(deviceID: String) async throws -> [PushToStartTokenRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM push_to_start_tokens WHERE device_id = ? ORDER BY attributes_type", arguments: [deviceID])
                .map(PushToStartTokenRecord.init(row:))
        }
    }

    public func expireActivities(startedBefore: Date, at: Date, channelDeleteAfter: Date) async throws -> [String] {
        try await pool.write { db in
            let keys = try String.fetchAll(
                db, sql: "SELECT key FROM activities WHERE state = 'active' AND started_at < ? ORDER BY key", arguments: [startedBefore.seconds])
            for key in keys {
                try db.execute(
                    sql: "UPDATE activities SET state = 'ended', ended_at = ?, end_reason = 'expired' WHERE key = ?", arguments: [at.seconds, key])
                try db.execute(
                    sql: "UPDATE activity_tokens SET state = 'ended', state_reason = 'expired' WHERE key = ? AND state = 'live'", arguments: [key])
                try db.execute(
                    sql: """
                        UPDATE deliveries SET status = 'skipped', finished_at = ?, apns_reason = 'activity expired'
                        WHERE key = ? AND status = 'queued'
                        """,
                    arguments: [at.seconds, key])
                try db.execute(
                    sql: """
                        UPDATE channels SET delete_after = ?
                        WHERE channel_id = (SELECT channel_id FROM activities WHERE key = ?) AND deleted_at IS NULL
                        """,
                    arguments: [channelDeleteAfter.seconds, key])
            }
            return keys
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

    // MARK: Channels

    public func saveChannel(_ channel: ChannelRecord) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT INTO channels (channel_id, key, storage_policy, created_at, delete_after, deleted_at) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT (channel_id) DO UPDATE SET key = excluded.key, delete_after = excluded.delete_after,
                        deleted_at = excluded.deleted_at
                    """,
                arguments: [
                    channel.channelID, channel.key, channel.storagePolicy, channel.createdAt.seconds, channel.deleteAfter?.seconds,
                    channel.deletedAt?.seconds,
                ])
        }
    }

    public func channels() async throws -> [ChannelRecord] {
        try await pool.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM channels ORDER BY created_at, channel_id").map(ChannelRecord.init(row:))
        }
    }

    public func channel(id: String) async throws -> ChannelRecord? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM channels WHERE channel_id = ?", arguments: [id]).map(ChannelRecord.init(row:))
        }
    }

    public func channelsToDelete(at: Date) async throws -> [ChannelRecord] {
        try await pool.read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM channels WHERE deleted_at IS NULL AND delete_after <= ? ORDER BY delete_after", arguments: [at.seconds]
            ).map(ChannelRecord.init(row:))
        }
    }

    public func markChannelDeleted(id: String, at: Date) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE channels SET deleted_at = ? WHERE channel_id = ?", arguments: [at.seconds, id])
        }
    }
}

// MARK: Statements shared by the transactions

extension SQLiteStore {
    private static func activity(_ db: Database, key: String) throws -> ActivityRecord? {
        try Row.fetchOne(db, sql: "SELECT * FROM activities WHERE key = ?", arguments: [key]).map(ActivityRecord.init(row:))
    }

    private static func insert(_ db: Database, activity: ActivityRecord) throws {
        try db.execute(
            sql: """
                INSERT INTO activities (key, attributes_type, attributes, state, channel_id, content_state, stale_date,
                    relevance_score, started_at, ended_at, end_reason, dismissal_date, last_timestamp)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: activityArguments(activity))
    }

    private static func update(_ db: Database, activity: ActivityRecord) throws {
        var arguments = activityArguments(activity)
        _ = arguments.append(contentsOf: [activity.key])
        try db.execute(
            sql: """
                UPDATE activities SET key = ?, attributes_type = ?, attributes = ?, state = ?, channel_id = ?, content_state = ?,
                    stale_date = ?, relevance_score = ?, started_at = ?, ended_at = ?, end_reason = ?, dismissal_date = ?,
                    last_timestamp = ?
                WHERE key = ?
                """,
            arguments: arguments)
    }

    private static func activityArguments(_ activity: ActivityRecord) -> StatementArguments {
        [
            activity.key, activity.attributesType, activity.attributes?.serializedString, activity.state.rawValue, activity.channelID,
            activity.contentState?.serializedString, activity.staleDate?.seconds, activity.relevanceScore, activity.startedAt.seconds,
            activity.endedAt?.seconds, activity.endReason, activity.dismissalDate?.seconds, activity.lastTimestamp,
        ]
    }

    private static func pushToStartTokens(_ db: Database, attributesType: String, audience: Audience) throws -> [PushToStartTokenRecord] {
        let base = "SELECT * FROM push_to_start_tokens WHERE attributes_type = ? AND dead_reason IS NULL"
        let rows: [Row]
        switch audience {
        case .everyone:
            rows = try Row.fetchAll(db, sql: base + " ORDER BY device_id", arguments: [attributesType])
        case .devices(let ids), .users(let ids):
            guard !ids.isEmpty else { return [] }
            let column = if case .devices = audience { "device_id" } else { "user_id" }
            let marks = Array(repeating: "?", count: ids.count).joined(separator: ", ")
            var arguments: StatementArguments = [attributesType]
            _ = arguments.append(contentsOf: StatementArguments(ids))
            rows = try Row.fetchAll(db, sql: base + " AND \(column) IN (\(marks)) ORDER BY device_id", arguments: arguments)
        }
        return rows.map(PushToStartTokenRecord.init(row:))
    }

    /// Inserts the payloads once and a delivery per push; a push to a token supersedes the ones
    /// queued for it before.
    private static func enqueue(_ db: Database, payloads: [[UInt8]], deliveries: [NewDelivery], at: Date) throws {
        guard !deliveries.isEmpty else { return }
        var payloadIDs: [Int64] = []
        let insertPayload = try db.cachedStatement(sql: "INSERT INTO payloads (body) VALUES (?)")
        for payload in payloads {
            try insertPayload.execute(arguments: [Data(payload)])
            payloadIDs.append(db.lastInsertedRowID)
        }
        let supersede = try db.cachedStatement(
            sql: """
                UPDATE deliveries SET status = 'superseded', finished_at = ?
                WHERE token = ? AND status = 'queued' AND event IN ('update', 'end') AND target = 'activity'
                """)
        let supersedeBroadcast = try db.cachedStatement(
            sql: "UPDATE deliveries SET status = 'superseded', finished_at = ? WHERE channel_id = ? AND status = 'queued'")
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO deliveries (key, event, target, device_id, token, channel_id, payload_id, priority, priority_reason,
                    expiration, timestamp, request_id, status, attempts, next_attempt_at, created_at)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?, ?)
                """)
        let now = at.seconds
        for delivery in deliveries {
            let (kind, deviceID, token, channelID) = delivery.target.columns
            if delivery.event != "start" {
                if let token { try supersede.execute(arguments: [now, token]) }
                if let channelID { try supersedeBroadcast.execute(arguments: [now, channelID]) }
            }
            try insert.execute(arguments: [
                delivery.key, delivery.event, kind, deviceID, token, channelID, payloadIDs[delivery.payloadIndex], delivery.priority,
                delivery.priorityReason, delivery.expiration, delivery.timestamp, delivery.requestID, now, now,
            ])
        }
    }

    private static func record(_ db: Database, context: WriteContext, response: StoredResponse, at: Date) throws {
        if let claim = context.idempotency {
            do {
                try db.execute(
                    sql: "INSERT INTO idempotency_keys (api_key_id, key, request_hash, status, body, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                    arguments: [claim.apiKeyID, claim.key, claim.requestHash, response.status, Data(response.body), at.seconds])
            } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
                throw StoreError(.idempotencyKeyTaken, "idempotency key \"\(claim.key)\" was used by a request at the same time")
            }
        }
        if let scheduleID = context.scheduleID {
            try db.execute(
                sql: "UPDATE schedules SET state = 'done', result = ? WHERE id = ? AND state = 'pending'",
                arguments: [String(decoding: response.body, as: UTF8.self), scheduleID])
            guard db.changesCount > 0 else {
                throw StoreError(.scheduleNotPending, "schedule \(scheduleID) is no longer pending")
            }
        }
    }
}

// MARK: Rows

extension Date {
    fileprivate var seconds: Double { timeIntervalSince1970 }
}

extension Row {
    fileprivate func date(_ column: String) -> Date? {
        (self[column] as Double?).map(Date.init(timeIntervalSince1970:))
    }

    fileprivate func json(_ column: String) -> JSONValue? {
        (self[column] as String?).flatMap { try? JSONValue(parsing: $0) }
    }
}

extension DeliveryTarget {
    /// `target`, `device_id`, `token`, `channel_id`.
    fileprivate var columns: (String, String?, String?, String?) {
        switch self {
        case .pushToStartToken(let deviceID, let token): ("push-to-start", deviceID, token, nil)
        case .activityToken(let deviceID, let token): ("activity", deviceID, token, nil)
        case .channel(let id): ("channel", nil, nil, id)
        }
    }

    fileprivate init(row: Row) {
        let kind: String = row["target"]
        switch kind {
        case "channel": self = .channel(row["channel_id"])
        case "push-to-start": self = .pushToStartToken(deviceID: row["device_id"], token: row["token"])
        default: self = .activityToken(deviceID: row["device_id"], token: row["token"])
        }
    }
}

extension APIKeyRecord {
    fileprivate init(row: Row) {
        self.init(
            id: row["id"], name: row["name"], scope: APIKeyScope(rawValue: row["scope"]) ?? .client, secretHash: row["secret_hash"],
            createdAt: row.date("created_at")!, revokedAt: row.date("revoked_at"))
    }
}

extension PushToStartTokenRecord {
    fileprivate init(row: Row) {
        self.init(
            deviceID: row["device_id"], attributesType: row["attributes_type"], userID: row["user_id"], token: row["token"],
            frequentPushesEnabled: row["frequent_pushes"], environment: row["environment"], updatedAt: row.date("updated_at")!,
            deadReason: row["dead_reason"])
    }
}

extension ActivityRecord {
    fileprivate init(row: Row) {
        self.init(
            key: row["key"], attributesType: row["attributes_type"], attributes: row.json("attributes"),
            state: ActivityKeyState(rawValue: row["state"]) ?? .ended, channelID: row["channel_id"], contentState: row.json("content_state"),
            staleDate: row.date("stale_date"), relevanceScore: row["relevance_score"], startedAt: row.date("started_at")!,
            endedAt: row.date("ended_at"), endReason: row["end_reason"], dismissalDate: row.date("dismissal_date"),
            lastTimestamp: row["last_timestamp"])
    }
}

extension ActivityTokenRecord {
    fileprivate init(row: Row) {
        self.init(
            key: row["key"], deviceID: row["device_id"], activityID: row["activity_id"], token: row["token"],
            frequentPushesEnabled: row["frequent_pushes"], registeredAt: row.date("registered_at")!,
            state: ActivityTokenState(rawValue: row["state"]) ?? .dead, stateReason: row["state_reason"], lastStatus: row["last_status"],
            lastReason: row["last_reason"], lastDeliveryAt: row.date("last_delivery_at"))
    }
}

extension DeliveryRecord {
    fileprivate init(row: Row) {
        self.init(
            id: row["id"], key: row["key"], event: row["event"], target: DeliveryTarget(row: row), payload: [UInt8](row["payload"] as Data),
            priority: row["priority"], priorityReason: row["priority_reason"], expiration: row["expiration"], timestamp: row["timestamp"],
            requestID: row["request_id"], status: DeliveryStatus(rawValue: row["status"]) ?? .failed, attempts: row["attempts"],
            nextAttemptAt: row.date("next_attempt_at")!, createdAt: row.date("created_at")!, finishedAt: row.date("finished_at"),
            apnsStatus: row["apns_status"], apnsReason: row["apns_reason"], apnsID: row["apns_id"])
    }
}

extension ChannelRecord {
    fileprivate init(row: Row) {
        self.init(
            channelID: row["channel_id"], key: row["key"], storagePolicy: row["storage_policy"], createdAt: row.date("created_at")!,
            deleteAfter: row.date("delete_after"), deletedAt: row.date("deleted_at"))
    }
}

extension ScheduleRecord {
    fileprivate init(row: Row) {
        self.init(
            id: row["id"], key: row["key"], action: row["action"], request: row.json("request") ?? .null, dueAt: row.date("due_at")!,
            state: State(rawValue: row["state"]) ?? .failed, result: row["result"], createdAt: row.date("created_at")!)
    }
}
