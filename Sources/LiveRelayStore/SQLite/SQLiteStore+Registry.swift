import Foundation
import GRDB
import LiveActivityKit
import Synchronization

/// What apps and the operator register (`RegistryStore`).
extension SQLiteStore {
    // MARK: Apps

    package func saveApps(_ apps: [AppRecord]) async throws {
        try await write { db in
            for app in apps {
                try db.run(
                    StoreStatements.saveApp, AppRecord.table.arguments(app).sqlite)
            }
        }
    }

    package func apps() async throws -> [AppRecord] {
        try await pool.read { db in
            try db.fetchAll("SELECT \(AppRecord.columns) FROM apps ORDER BY bundle_id", as: AppRecord.init(row:))
        }
    }

    package func adoptUnnamedData(bundleID: String) async throws -> Bool {
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

    // MARK: API keys

    package func insertAPIKey(_ key: APIKeyRecord) async throws {
        try await write { db in
            try db.run(
                StoreStatements.insertAPIKey, APIKeyRecord.table.arguments(key).sqlite)
        }
    }

    package func apiKey(secretHash: Data) async throws -> APIKeyRecord? {
        try await pool.read { db in
            try db.fetchOne("SELECT \(APIKeyRecord.columns) FROM api_keys WHERE secret_hash = ?", [secretHash], as: APIKeyRecord.init(row:))
        }
    }

    package func apiKeys() async throws -> [APIKeyRecord] {
        try await pool.read { db in
            try db.fetchAll("SELECT \(APIKeyRecord.columns) FROM api_keys ORDER BY created_at, id", as: APIKeyRecord.init(row:))
        }
    }

    package func revokeAPIKey(id: String, at: Date) async throws -> APIKeyRevocation {
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

    package func savePushToStartToken(_ token: PushToStartTokenRecord) async throws {
        try await write { db in
            try db.run(StoreStatements.forgetTokenOfOtherDevices, [token.bundleID, token.token, token.deviceID])
            try db.run(
                StoreStatements.savePushToStartToken, PushToStartTokenRecord.table.arguments(token).sqlite)
            if let version = token.appVersion { try Self.updateAppVersion(db, version, app: token.bundleID, deviceID: token.deviceID) }
        }
    }

    package func withdrawPushToStartTokens(app: String, deviceID: String) async throws -> Int {
        try await write { db in
            try db.run(StoreStatements.withdrawPushToStartTokens, [app, deviceID])
            return db.changesCount
        }
    }

    package func saveSurfaceTokens(app: String, deviceID: String, type: ReloadPushType, _ tokens: [SurfaceTokenRecord]) async throws {
        try await write { db in
            try db.run(StoreStatements.deleteSurfaceTokens, [app, deviceID, type.rawValue])
            for token in tokens {
                try db.run(StoreStatements.forgetSurfaceTokenOfOtherDevices, [app, token.token, deviceID])
                try db.run(StoreStatements.insertSurfaceToken, SurfaceTokenRecord.table.arguments(token).sqlite)
            }
        }
    }

    package func surfaceTokens(deviceID: String) async throws -> [SurfaceTokenRecord] {
        try await pool.read { db in try db.fetchAll(StoreStatements.surfaceTokensOfDevice, [deviceID], as: SurfaceTokenRecord.init(row:)) }
    }

    package func saveActivityToken(_ token: ActivityTokenRecord, attributesType: String, catchUp: CatchUp?) async throws -> SavedActivityToken {
        try await write { db in
            var activity = try Self.activity(db, app: token.bundleID, key: token.key)
            let device: StatementArguments = [token.bundleID, token.key, token.deviceID]
            if let existing = activity, existing.state == .ended,
                try db.fetchOne(StoreStatements.deviceKnownToKey, device + device + device, as: { $0[0] as Bool }) != true
            {
                throw StoreError(.keyEnded, "activity key \"\(existing.key)\" has ended, and its start was not sent to this device")
            }
            if activity == nil {
                let created = ActivityRecord(
                    bundleID: token.bundleID, key: token.key, attributesType: attributesType, startedAt: token.registeredAt, lastTimestamp: 0)
                try Self.insert(db, activity: created)
                activity = created
            }
            let before = try db.fetchOne(StoreStatements.tokenState, [token.bundleID, token.key, token.deviceID]) { $0[0] as String }
            try db.run(
                StoreStatements.saveActivityToken, ActivityTokenRecord.table.arguments(token.live).sqlite)
            if let version = token.appVersion { try Self.updateAppVersion(db, version, app: token.bundleID, deviceID: token.deviceID) }
            try db.carryOut(.activityReported(token.report(isNew: before != ActivityTokenState.live.rawValue)), at: token.registeredAt)
            var saved = SavedActivityToken(activity: activity!)
            if let catchUp {
                let reads = StoreStatements.catchUpReads(
                    app: token.bundleID, key: token.key, deviceID: token.deviceID, latest: activity!.lastTimestamp, since: catchUp.budgetWindowStart)
                let row = try Row.fetchOne(db, sql: reads.text, arguments: reads.sqliteArguments)
                let snapshot = CatchUpSnapshot(
                    activity: activity!, token: token, sentLatest: row?[0] as Bool? ?? false, priority10Used: row?[1] as Int? ?? 0)
                if let planned = catchUp.plan(snapshot) {
                    saved.claimed = try Self.enqueue(
                        db, payloads: [planned.payload], deliveries: [planned.delivery], at: token.registeredAt, context: catchUp.context)
                    saved.caughtUp = planned.delivery
                }
            }
            // A device caught up with an end has nothing more to be sent.
            if activity!.state == .ended { try db.run(StoreStatements.endDeviceToken, device) }
            return saved
        }
    }

    /// `StoreStatements.updateDeviceAppVersion`.
    private static func updateAppVersion(_ db: Database, _ version: String, app: String, deviceID: String) throws {
        for statement in StoreStatements.updateDeviceAppVersion(namingIndex: true) { try db.run(statement, [version, app, deviceID, version]) }
    }

    package func deviceKnownToKey(app: String, key: String, deviceID: String) async throws -> Bool {
        let device: StatementArguments = [app, key, deviceID]
        return try await pool.read { db in try db.fetchOne(StoreStatements.deviceKnownToKey, device + device + device, as: { $0[0] as Bool }) == true
        }
    }

    @discardableResult
    package func saveChannelListener(_ listener: ChannelListenerRecord) async throws -> ActivityRecord {
        try await write { db in
            guard let activity = try Self.activity(db, app: listener.bundleID, key: listener.key), activity.state != .ended else {
                throw StoreError(.keyEnded, "activity key \"\(listener.key)\" has ended")
            }
            let before = try db.fetchOne(StoreStatements.listenerState, [listener.bundleID, listener.key, listener.deviceID]) { $0[0] as String }
            try db.run(
                StoreStatements.saveChannelListener, ChannelListenerRecord.table.arguments(listener.live).sqlite)
            try db.carryOut(.activityReported(listener.report(isNew: before != ActivityTokenState.live.rawValue)), at: listener.registeredAt)
            return activity
        }
    }

    package func channelListeners(app: String, key: String) async throws -> [ChannelListenerRecord] {
        try await pool.read { db in try db.fetchAll(StoreStatements.channelListeners, [app, key], as: ChannelListenerRecord.init(row:)) }
    }

    package func events(_ query: EventQuery) async throws -> [EventRecord] {
        // One writer: the log's numbers are drawn in commit order.
        let statement = StoreStatements.events(query)
        return try await pool.read { db in try db.fetchAll(statement.text, statement.sqliteArguments, as: EventRecord.init(row:)) }
    }

    package func recordUnconfirmedStarts(sentAfter: Date, sentBefore: Date, at now: Date) async throws -> Int {
        try await write { db in
            let events = try db.fetchAll(StoreStatements.unconfirmedStarts, [sentAfter.seconds, sentBefore.seconds]) { row in
                try StoreStatements.unconfirmedStart(row, window: now.timeIntervalSince(sentBefore))
            }
            for event in events {
                let statement = OutboxStatements.record(event, at: now)
                try db.run(statement.text, statement.sqliteArguments)
            }
            return events.count
        }
    }

    package func endActivityOnDevice(
        app: String, key: String, deviceID: String, state: ActivityTokenState, cause: String?, at: Date
    ) async throws -> Bool {
        try await write { db in
            let live = try db.fetchOne(StoreStatements.liveOnDevice, [app, key, deviceID, app, key, deviceID]) { $0[0] as Int } ?? 0
            var changed = 0
            for statement in StoreStatements.endOnDevice {
                try db.run(statement, [state.rawValue, ActivityTokenRecord.reportedReason(cause), app, key, deviceID])
                changed += db.changesCount
            }
            guard changed > 0 else { return false }
            try db.carryOut(
                .activityEndedOnDevice(app: app, key: key, deviceID: deviceID, state: state, cause: cause, wasLive: live > 0), at: at)
            return true
        }
    }

    // MARK: Keys and tokens

    package func activities(_ query: ActivityQuery) async throws -> [ActivityRecord] {
        let statement = StoreStatements.activities(query)
        return try await pool.read { db in try db.fetchAll(statement.text, statement.sqliteArguments, as: ActivityRecord.listed(row:)) }
    }

    package func activity(app: String, key: String) async throws -> ActivityRecord? {
        try await pool.read { db in try Self.activity(db, app: app, key: key) }
    }

    package func apps(holdingKey key: String, among apps: [String]) async throws -> [String] {
        guard !apps.isEmpty else { return [] }
        let statement = StoreStatements.apps(holdingKey: key, among: apps)
        return try await pool.read { db in try String.fetchAll(db, sql: statement.text, arguments: statement.sqliteArguments) }
    }

    package func activityTokens(app: String, key: String) async throws -> [ActivityTokenRecord] {
        try await pool.read { db in
            try db.fetchAll(StoreStatements.activityTokensWithLastResult, [app, key], as: ActivityTokenRecord.withLastDelivery(row:))
        }
    }

    package func pushToStartTokens(deviceID: String) async throws -> [PushToStartTokenRecord] {
        try await pool.read { db in
            try db.fetchAll(
                "SELECT \(PushToStartTokenRecord.columns) FROM push_to_start_tokens WHERE device_id = ? ORDER BY bundle_id, attributes_type",
                [deviceID],
                as: PushToStartTokenRecord.init(row:))
        }
    }

    package func expireActivities(startedBefore: Date, at: Date, channelDeleteAfter: Date) async throws -> [String] {
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

    package func restartActivities(app: String, startedBefore: Date, at: Date) async throws -> Int {
        try await write { db in
            try db.run(StoreStatements.restartTokens, [app, startedBefore.seconds])
            try db.run(StoreStatements.restartActivities, [at.seconds, app, startedBefore.seconds])
            return db.changesCount
        }
    }

    package func counts() async throws -> StoreCounts {
        try await pool.read { db in
            StoreCounts(
                pushToStartTokens: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM push_to_start_tokens WHERE dead_reason IS NULL") ?? 0,
                liveActivityTokens: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM activity_tokens WHERE state = 'live'") ?? 0,
                activeKeys: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM activities WHERE state = 'active'") ?? 0,
                channels: try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM channels WHERE deleted_at IS NULL") ?? 0)
        }
    }

    // MARK: Contracts

    package func saveContract(_ contract: ContractRecord) async throws {
        try await write { db in
            try db.run(
                StoreStatements.saveContract, ContractRecord.table.arguments(contract).sqlite)
        }
    }

    package func contracts() async throws -> [ContractRecord] {
        try await pool.read { db in
            try db.fetchAll(
                "SELECT \(ContractRecord.columns) FROM contracts ORDER BY bundle_id, attributes_type, app_version", as: ContractRecord.init(row:))
        }
    }

    package func deleteContract(app: String, attributesType: String, appVersion: String) async throws -> Bool {
        try await write { db in
            try db.run(StoreStatements.deleteContract, [app, attributesType, appVersion])
            return db.changesCount > 0
        }
    }

    package func saveChannel(_ channel: ChannelRecord) async throws {
        try await write { db in
            try db.run(
                StoreStatements.saveChannel, ChannelRecord.table.arguments(channel).sqlite)
        }
    }

    package func channels() async throws -> [ChannelRecord] {
        try await pool.read { db in
            try db.fetchAll("SELECT \(ChannelRecord.columns) FROM channels ORDER BY created_at, channel_id", as: ChannelRecord.init(row:))
        }
    }

    package func channel(id: String) async throws -> ChannelRecord? {
        try await pool.read { db in
            try db.fetchOne("SELECT \(ChannelRecord.columns) FROM channels WHERE channel_id = ?", [id], as: ChannelRecord.init(row:))
        }
    }

    package func channelsToDelete(at: Date) async throws -> [ChannelRecord] {
        try await pool.read { db in
            try db.fetchAll(
                "SELECT \(ChannelRecord.columns) FROM channels WHERE deleted_at IS NULL AND delete_after <= ? ORDER BY delete_after",
                [at.seconds], as: ChannelRecord.init(row:))
        }
    }

    package func markChannelDeleted(id: String, at: Date) async throws {
        try await write { db in
            for statement in StoreStatements.channelDeleted(id: id, at: at) { try db.run(statement.text, statement.sqliteArguments) }
        }
    }
}
