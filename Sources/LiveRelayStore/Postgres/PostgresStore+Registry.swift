import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// What apps and the operator register (`RegistryStore`).
extension PostgresStore {
    // MARK: Apps

    package func saveApps(_ apps: [AppRecord]) async throws {
        try await transaction { db in
            for app in apps {
                try await db.run(
                    StoreStatements.saveApp, AppRecord.table.arguments(app))
            }
        }
    }

    package func apps() async throws -> [AppRecord] {
        try await rows("SELECT \(AppRecord.columns) FROM apps ORDER BY bundle_id").map(AppRecord.init(row:))
    }

    package func adoptUnnamedData(bundleID: String) async throws -> Bool {
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

    // MARK: API keys

    package func insertAPIKey(_ key: APIKeyRecord) async throws {
        try await run(
            StoreStatements.insertAPIKey, APIKeyRecord.table.arguments(key))
    }

    package func apiKey(secretHash: Data) async throws -> APIKeyRecord? {
        try await rows(
            "SELECT \(APIKeyRecord.columns) FROM api_keys WHERE secret_hash = ?", [.bytes(Array(secretHash))]
        ).first.map(APIKeyRecord.init(row:))
    }

    package func apiKeys() async throws -> [APIKeyRecord] {
        try await rows("SELECT \(APIKeyRecord.columns) FROM api_keys ORDER BY created_at, id")
            .map(APIKeyRecord.init(row:))
    }

    package func revokeAPIKey(id: String, at: Date) async throws -> APIKeyRevocation {
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

    package func savePushToStartToken(_ token: PushToStartTokenRecord) async throws {
        try await transaction { db in
            try await db.run(StoreStatements.forgetTokenOfOtherDevices, [.text(token.bundleID), .text(token.token), .text(token.deviceID)])
            try await db.run(
                StoreStatements.savePushToStartToken, PushToStartTokenRecord.table.arguments(token))
            if let version = token.appVersion { try await Self.updateAppVersion(db, version, app: token.bundleID, deviceID: token.deviceID) }
        }
    }

    /// `StoreStatements.updateDeviceAppVersion`.
    private static func updateAppVersion(_ db: PostgresConnection, _ version: String, app: String, deviceID: String) async throws {
        for statement in StoreStatements.updateDeviceAppVersion(namingIndex: false) {
            try await db.run(statement, [.text(version), .text(app), .text(deviceID), .text(version)])
        }
    }

    package func saveSurfaceTokens(app: String, deviceID: String, type: ReloadPushType, _ tokens: [SurfaceTokenRecord]) async throws {
        try await transaction { db in
            try await db.run(StoreStatements.deleteSurfaceTokens, [.text(app), .text(deviceID), .text(type.rawValue)])
            for token in tokens {
                try await db.run(StoreStatements.forgetSurfaceTokenOfOtherDevices, [.text(app), .text(token.token), .text(deviceID)])
                try await db.run(StoreStatements.insertSurfaceToken, SurfaceTokenRecord.table.arguments(token))
            }
        }
    }

    package func surfaceTokens(deviceID: String) async throws -> [SurfaceTokenRecord] {
        try await rows(StoreStatements.surfaceTokensOfDevice, [.text(deviceID)]).map(SurfaceTokenRecord.init(row:))
    }

    package func withdrawPushToStartTokens(app: String, deviceID: String) async throws -> Int {
        try await transaction { db in try await db.changed(StoreStatements.withdrawPushToStartTokens, [.text(app), .text(deviceID)]) }
    }

    /// Registers many tokens into a store that has none of them yet, 10,000 to a statement: what
    /// the registration routes would write one by one, for seeding a benchmark's million tokens
    /// (a transaction each takes most of an hour). A key gets its activity from its first token,
    /// registered as `saveActivityToken` does; its other tokens join it as they are.
    package func importTokens(activityTokens: [ActivityTokenRecord], attributesType: String, pushToStart: [PushToStartTokenRecord]) async throws {
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
        // Registered one by one, the tables would have been analyzed as they grew: planned on the
        // statistics of empty tables, a key's read took 4.4 ms of PostgreSQL's CPU until
        // autovacuum came by, and the first run on the seeded database reached 341 requests/s.
        try await run("ANALYZE activities, activity_tokens, push_to_start_tokens")
    }

    /// Inserts `rows` 10,000 to a statement: `bind` gives a chunk's columns as the arrays `sql` unnests.
    private func insertInChunks<Row>(_ rows: [Row], _ sql: String, _ bind: (ArraySlice<Row>, inout PostgresBindings) -> Void) async throws {
        for start in stride(from: 0, to: rows.count, by: 10_000) {
            var binds = PostgresBindings()
            bind(rows[start..<min(rows.count, start + 10_000)], &binds)
            statements.add()
            try await client.withConnection { db in
                _ = try await db.query(PostgresQuery(unsafeSQL: sql, binds: binds), logger: Self.quiet).collect()
            }
        }
    }

    package func saveActivityToken(_ token: ActivityTokenRecord, attributesType: String, catchUp: CatchUp?) async throws -> SavedActivityToken {
        try await transaction { db in
            let device: [SQLArgument] = [.text(token.bundleID), .text(token.key), .text(token.deviceID)]
            // The key, created active when the app started the activity itself.
            let created = ActivityRecord(
                bundleID: token.bundleID, key: token.key, attributesType: attributesType, startedAt: token.registeredAt, lastTimestamp: 0)
            try await db.run(
                StoreStatements.insertActivity + " ON CONFLICT (bundle_id, key) DO NOTHING",
                ActivityRecord.table.arguments(created))
            guard let activity = try await Self.activity(db, app: token.bundleID, key: token.key, locked: true) else {
                throw StoreError(.keyEnded, "activity key \"\(token.key)\" is gone")
            }
            if activity.state == .ended, try await db.rows(StoreStatements.deviceKnownToKey, device + device + device).first?.bool(0) != true {
                throw StoreError(.keyEnded, "activity key \"\(activity.key)\" has ended, and its start was not sent to this device")
            }
            // A new row version: a change of the key planned without this token, and not yet
            // written, is then planned again with it (`KeyChange`), or this transaction sees it.
            try await db.run(
                "UPDATE activities SET last_timestamp = last_timestamp WHERE bundle_id = ? AND key = ?", [.text(token.bundleID), .text(token.key)])
            let before = try await db.rows(StoreStatements.tokenState, device).first?.text(0)
            try await db.run(
                StoreStatements.saveActivityToken, ActivityTokenRecord.table.arguments(token.live))
            if let version = token.appVersion { try await Self.updateAppVersion(db, version, app: token.bundleID, deviceID: token.deviceID) }
            try await db.carryOut(.activityReported(token.report(isNew: before != ActivityTokenState.live.rawValue)), at: token.registeredAt)
            var saved = SavedActivityToken(activity: activity)
            if let catchUp {
                let row = try await db.rows(
                    StoreStatements.catchUpReads(
                        app: token.bundleID, key: token.key, deviceID: token.deviceID, latest: activity.lastTimestamp,
                        since: catchUp.budgetWindowStart)
                ).first
                let snapshot = CatchUpSnapshot(
                    activity: activity, token: token, sentLatest: row?.bool(0) ?? false, priority10Used: row?.int(1) ?? 0)
                if let planned = catchUp.plan(snapshot) {
                    saved.claimed = try await Self.enqueue(
                        db, payloads: [planned.payload], deliveries: [planned.delivery], at: token.registeredAt, context: catchUp.context)
                    saved.caughtUp = planned.delivery
                }
            }
            // A device caught up with an end has nothing more to be sent.
            if activity.state == .ended { try await db.run(StoreStatements.endDeviceToken, device) }
            return saved
        }
    }

    package func deviceKnownToKey(app: String, key: String, deviceID: String) async throws -> Bool {
        let device: [SQLArgument] = [.text(app), .text(key), .text(deviceID)]
        return try await rows(StoreStatements.deviceKnownToKey, device + device + device).first?.bool(0) == true
    }

    @discardableResult
    package func saveChannelListener(_ listener: ChannelListenerRecord) async throws -> ActivityRecord {
        try await transaction { db in
            // Locked: an end of the key waits for the listener, or the listener sees the end.
            guard let activity = try await Self.activity(db, app: listener.bundleID, key: listener.key, locked: true), activity.state != .ended
            else {
                throw StoreError(.keyEnded, "activity key \"\(listener.key)\" has ended")
            }
            let before = try await db.rows(
                StoreStatements.listenerState, [.text(listener.bundleID), .text(listener.key), .text(listener.deviceID)]
            ).first?.text(0)
            try await db.run(
                StoreStatements.saveChannelListener, ChannelListenerRecord.table.arguments(listener.live))
            try await db.carryOut(.activityReported(listener.report(isNew: before != ActivityTokenState.live.rawValue)), at: listener.registeredAt)
            return activity
        }
    }

    package func channelListeners(app: String, key: String) async throws -> [ChannelListenerRecord] {
        try await rows(StoreStatements.channelListeners, [.text(app), .text(key)]).map(ChannelListenerRecord.init(row:))
    }

    package func events(_ query: EventQuery) async throws -> [EventRecord] {
        try await transaction { db in
            // Number what has committed, in the order it was written, under a lock so that two
            // readers never number at once: an event uncommitted now gets a later number than
            // every one read now, and none is skipped. A key's events were written holding the
            // key, so they are numbered in their order.
            try await numberEvents(db)
            return try await db.rows(StoreStatements.events(query)).map(EventRecord.init(row:))
        }
    }

    /// Numbers the events committed so far, holding the numbering lock to the transaction's end.
    func numberEvents(_ db: PostgresConnection) async throws {
        try await db.run("SELECT pg_advisory_xact_lock(\(Self.eventNumbering))")
        try await db.run(
            """
            WITH top AS (SELECT COALESCE(MAX(seq), 0) AS seq FROM events),
                unnumbered AS (SELECT row_id, ROW_NUMBER() OVER (ORDER BY row_id) AS n FROM events WHERE seq IS NULL)
            UPDATE events SET seq = top.seq + unnumbered.n FROM top, unnumbered WHERE events.row_id = unnumbered.row_id
            """)
    }

    /// The advisory lock held while events are numbered.
    static let eventNumbering: Int64 = 0x4C52_4556  // "LREV"

    package func recordUnconfirmedStarts(sentAfter: Date, sentBefore: Date, at now: Date) async throws -> Int {
        try await transaction { db in
            let events = try await db.rows(StoreStatements.unconfirmedStarts, [.seconds(sentAfter), .seconds(sentBefore)]).map { row in
                try StoreStatements.unconfirmedStart(row, window: now.timeIntervalSince(sentBefore))
            }
            for event in events { try await db.rows(OutboxStatements.record(event, at: now)) }
            return events.count
        }
    }

    package func endActivityOnDevice(
        app: String, key: String, deviceID: String, state: ActivityTokenState, cause: String?, at: Date
    ) async throws -> Bool {
        try await transaction { db in
            let device: [SQLArgument] = [.text(app), .text(key), .text(deviceID)]
            let live = try await db.rows(StoreStatements.liveOnDevice, device + device).first?.integer(0) ?? 0
            var changed = 0
            for statement in StoreStatements.endOnDevice {
                changed += try await db.changed(
                    statement, [.text(state.rawValue), .text(ActivityTokenRecord.reportedReason(cause)), .text(app), .text(key), .text(deviceID)])
            }
            guard changed > 0 else { return false }
            try await db.carryOut(
                .activityEndedOnDevice(app: app, key: key, deviceID: deviceID, state: state, cause: cause, wasLive: live > 0), at: at)
            return true
        }
    }

    // MARK: Keys and tokens

    package func activities(_ query: ActivityQuery) async throws -> [ActivityRecord] {
        let statement = StoreStatements.activities(query)
        return try await rows(statement.text, statement.arguments).map(ActivityRecord.listed(row:))
    }

    package func activity(app: String, key: String) async throws -> ActivityRecord? {
        try await connection { db in try await Self.activity(db, app: app, key: key, locked: false) }
    }

    package func apps(holdingKey key: String, among apps: [String]) async throws -> [String] {
        guard !apps.isEmpty else { return [] }
        let statement = StoreStatements.apps(holdingKey: key, among: apps)
        return try await rows(statement.text, statement.arguments).map { $0.string(0) }
    }

    package func activityTokens(app: String, key: String) async throws -> [ActivityTokenRecord] {
        try await rows(StoreStatements.activityTokensWithLastResult, [.text(app), .text(key)]).map(ActivityTokenRecord.withLastDelivery(row:))
    }

    package func pushToStartTokens(deviceID: String) async throws -> [PushToStartTokenRecord] {
        try await rows(
            "SELECT \(PushToStartTokenRecord.columns) FROM push_to_start_tokens WHERE device_id = ? ORDER BY bundle_id, attributes_type",
            [.text(deviceID)]
        ).map(PushToStartTokenRecord.init(row:))
    }

    package func expireActivities(startedBefore: Date, at: Date, channelDeleteAfter: Date) async throws -> [String] {
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

    package func restartActivities(app: String, startedBefore: Date, at: Date) async throws -> Int {
        try await transaction { db in
            try await db.run(StoreStatements.restartTokens, [.text(app), .seconds(startedBefore)])
            return try await db.rows(
                StoreStatements.restartActivities + " RETURNING key", [.seconds(at), .text(app), .seconds(startedBefore)]
            ).count
        }
    }

    package func counts() async throws -> StoreCounts {
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

    // MARK: Contracts

    package func saveContract(_ contract: ContractRecord) async throws {
        try await run(
            StoreStatements.saveContract, ContractRecord.table.arguments(contract))
    }

    package func contracts() async throws -> [ContractRecord] {
        try await rows("SELECT \(ContractRecord.columns) FROM contracts ORDER BY bundle_id, attributes_type, app_version")
            .map(ContractRecord.init(row:))
    }

    package func deleteContract(app: String, attributesType: String, appVersion: String) async throws -> Bool {
        try await transaction { db in
            try await db.changed(StoreStatements.deleteContract, [.text(app), .text(attributesType), .text(appVersion)]) > 0
        }
    }

    // MARK: Channels

    package func saveChannel(_ channel: ChannelRecord) async throws {
        try await run(
            StoreStatements.saveChannel, ChannelRecord.table.arguments(channel))
    }

    package func channels() async throws -> [ChannelRecord] {
        try await rows("SELECT \(ChannelRecord.columns) FROM channels ORDER BY created_at, channel_id")
            .map(ChannelRecord.init(row:))
    }

    package func channel(id: String) async throws -> ChannelRecord? {
        try await rows("SELECT \(ChannelRecord.columns) FROM channels WHERE channel_id = ?", [.text(id)])
            .first.map(ChannelRecord.init(row:))
    }

    package func channelsToDelete(at: Date) async throws -> [ChannelRecord] {
        try await rows(
            "SELECT \(ChannelRecord.columns) FROM channels WHERE deleted_at IS NULL AND delete_after <= ? ORDER BY delete_after",
            [.seconds(at)]
        ).map(ChannelRecord.init(row:))
    }

    package func markChannelDeleted(id: String, at: Date) async throws {
        try await transaction { db in
            for statement in StoreStatements.channelDeleted(id: id, at: at) { try await db.rows(statement) }
        }
    }
}
