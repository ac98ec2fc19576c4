import Foundation
import GRDB
import LiveActivityKit
import LiveRelayTesting
import Testing

@testable import LiveRelayStore

/// A database written by an earlier release opens with everything in it, migrated by name.
@Suite struct MigrationTests {
    /// The one app the earlier release served.
    static let app = "com.example.delivery"

    /// Both engines apply the same named migrations in the same order, so that a name says the
    /// same schema on either and a database moves from one release to the next alike.
    @Test func bothEnginesHaveTheSameMigrationsInTheSameOrder() {
        #expect(SQLiteMigrations.all.map(\.name) == PostgresMigrations.all.map(\.name))
        #expect(Set(SQLiteMigrations.all.map(\.name)).count == SQLiteMigrations.all.count, "each name once")
    }

    /// A build before typed answers kept the HTTP answer itself under an idempotency key, and a
    /// done schedule's answer body as its result; the first release (`0027-first-release`) forgets
    /// the answer (a key lives a day), keeps the schedule done, and keeps new answers typed.
    @Test func answersKeptBeforeTypedAnswersAreForgottenByTheFirstRelease() async throws {
        let path = TestFiles.path("migration", pathExtension: "sqlite")
        let queue = try Self.migrated(path, upTo: "0014-typed-answers")
        let oldAnswer = #"{"key":"order-1","action":"start","requestID":"r1","timestamp":1800000000,"deliveries":1,"state":"active"}"#
        try await queue.write { db in
            try db.execute(
                sql: "INSERT INTO idempotency_keys VALUES ('key-1', 'retry-me', 'h1', 201, ?, 1800000000)", arguments: [Data(oldAnswer.utf8)])
            try db.execute(
                sql: """
                    INSERT INTO schedules (id, key, action, request, due_at, state, result, created_at, bundle_id)
                    VALUES ('sch_1', 'order-1', 'start', '{}', 1800000000, 'done', ?, 1799999000, ?)
                    """, arguments: [oldAnswer, Self.app])
        }
        try queue.close()
        let store = try await SQLiteStore.open(path: path)
        try await store.migrate()
        #expect(try await store.idempotentAnswer(apiKeyID: "key-1", key: "retry-me") == nil)
        #expect(try await store.schedule(id: "sch_1")?.state == .done)
        try await store.savePushToStartToken(
            PushToStartTokenRecord(
                bundleID: Self.app, deviceID: "phone-1", attributesType: "DeliveryAttributes", token: "aa11", frequentPushesEnabled: false,
                environment: .sandbox, updatedAt: Date(timeIntervalSince1970: 1_800_000_000)))
        let claim = IdempotencyClaim(apiKeyID: "key-1", key: "new", requestHash: "h2")
        let acceptance = Acceptance(key: "order-2", action: .start, requestID: "r2", timestamp: 1_800_000_100, deliveries: 0, state: .active)
        _ = try await store.acceptStart(
            app: Self.app, key: "order-2", attributesType: "DeliveryAttributes", audience: .everyone, context: WriteContext(idempotency: claim)
        ) { _ in
            let activity = ActivityRecord(
                bundleID: Self.app, key: "order-2", attributesType: "DeliveryAttributes", startedAt: Date(timeIntervalSince1970: 1_800_000_100),
                lastTimestamp: 1_800_000_100)
            return (
                StartPlan(
                    acceptedAt: Date(timeIntervalSince1970: 1_800_000_100), activity: activity, payloads: [], deliveries: [], acceptance: acceptance),
                ()
            )
        }
        #expect(try await store.idempotentAnswer(apiKeyID: "key-1", key: "new")?.answer == .accepted(acceptance))
    }

    /// The database at `path` with the named migrations before `first` applied, as the release
    /// that ended with them applied them (recorded the same way, so the store goes on from there).
    static func migrated(_ path: String, upTo first: String) throws -> DatabaseQueue {
        let queue = try DatabaseQueue(path: path)
        var migrator = DatabaseMigrator()
        for migration in SQLiteMigrations.all.prefix(while: { $0.name != first }) {
            migrator.registerMigration(migration.name) { db in
                for statement in migration.statements { try db.execute(sql: statement) }
            }
        }
        try migrator.migrate(queue)
        return queue
    }

    /// Writes the schema of the release before environments (migrations up to `0007-contracts`)
    /// and rows as that release wrote them: a server that sent to APNs production only.
    static func databaseOfTheReleaseBeforeEnvironments() throws -> String {
        let path = TestFiles.path("migration", pathExtension: "sqlite")
        let queue = try migrated(path, upTo: "0008-environments")
        try queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO push_to_start_tokens VALUES ('phone-1', 'MatchAttributes', NULL, 'aa11', 0, 'production', 1800000000, NULL);
                    INSERT INTO activities (key, attributes_type, state, channel_id, started_at, last_timestamp)
                        VALUES ('match-1', 'MatchAttributes', 'active', 'chan-1', 1800000000, 1800000000);
                    INSERT INTO activities (key, attributes_type, state, started_at, last_timestamp)
                        VALUES ('order-1', 'DeliveryAttributes', 'active', 1800000000, 1800000000);
                    INSERT INTO activity_tokens (key, device_id, token, frequent_pushes, registered_at, state)
                        VALUES ('order-1', 'phone-1', 'bb22', 0, 1800000000, 'live');
                    INSERT INTO channels (channel_id, key, storage_policy, created_at) VALUES ('chan-1', 'match-1', 1, 1800000000);
                    INSERT INTO payloads (id, body) VALUES (1, X'7B7D');
                    INSERT INTO deliveries (key, event, target, device_id, token, payload_id, priority, priority_reason, timestamp, request_id,
                            status, attempts, next_attempt_at, created_at)
                        VALUES ('order-1', 'update', 'activity', 'phone-1', 'bb22', 1, 10, 'requested', 1800000000, 'req-1',
                            'queued', 0, 1800000000, 1800000000);
                    """)
        }
        return path
    }

    @Test func theReleaseBeforeEnvironmentsMigratesIntoTheEnvironmentItSentTo() async throws {
        let store = try await SQLiteStore.open(path: try Self.databaseOfTheReleaseBeforeEnvironments())
        #expect(
            try await store.migrate() == [
                "0008-environments", "0009-apps", "0010-leases", "0011-rate-buckets", "0012-dashboard", "0013-key-statistics", "0014-typed-answers",
                "0015-reported-by", "0016-channel-listeners", "0017-events", "0018-webhooks", "0019-retention", "0020-trace-context",
                "0021-device-ios", "0022-deliveries-by-key-newest", "0023-latest-state", "0024-grants", "0025-token-once", "0026-app-versions",
                "0027-first-release", "0028-contract-environment", "0029-surface-tokens", "0030-history-without-device-order", "0031-token-indexes",
                "0032-reloads-by-event", "0033-unsent-pushes", "0034-rate-reservations",
            ])
        #expect(try await store.adoptUnnamedData(bundleID: Self.app))
        let match = try #require(try await store.activity(app: Self.app, key: "match-1"))
        #expect(match.channelIDs == [.production: "chan-1"])
        #expect(try await store.channel(id: "chan-1")?.environment == .production)
        #expect(try await store.activityTokens(app: Self.app, key: "order-1").map(\.environment) == [.production])
        #expect(try await store.pushToStartTokens(deviceID: "phone-1").map(\.environment) == [.production])
        let queued = try await store.claimDeliveries(dueBy: Date(timeIntervalSince1970: 1_800_000_001), limit: 10, leaseUntil: .distantFuture)
        #expect(queued.map(\.environment) == [.production])
        #expect(queued.map(\.payload) == [Array("{}".utf8)])
        #expect(try await store.migrate() == [])
    }

    @Test func aDatabaseWithNoPushToStartTokenMigratesIntoSandboxTheOldDefault() async throws {
        let path = try Self.databaseOfTheReleaseBeforeEnvironments()
        try await DatabaseQueue(path: path).write { try $0.execute(sql: "DELETE FROM push_to_start_tokens") }
        let store = try await SQLiteStore.open(path: path)
        _ = try await store.migrate()
        #expect(try await store.adoptUnnamedData(bundleID: Self.app))
        #expect(try await store.activityTokens(app: Self.app, key: "order-1").map(\.environment) == [.sandbox])
        #expect(try await store.activity(app: Self.app, key: "match-1")?.channelIDs == [.sandbox: "chan-1"])
    }
}

extension MigrationTests {
    /// What the release before apps kept: one app's data, and keys for it.
    static func databaseOfTheReleaseBeforeApps() async throws -> String {
        let path = try databaseOfTheReleaseBeforeEnvironments()
        // Up to 0008, as that release migrated; its rows as it wrote them.
        let queue = try migrated(path, upTo: "0009-apps")
        try await queue.write { db in
            try db.execute(
                sql: """
                    INSERT INTO api_keys VALUES ('key_server', 'server', 'server', X'01', 1800000000, NULL);
                    INSERT INTO api_keys VALUES ('key_client', 'client', 'client', X'02', 1800000000, NULL);
                    INSERT INTO schedules (id, key, action, request, due_at, state, created_at)
                        VALUES ('sch_1', 'order-1', 'end', '{}', 1900000000, 'pending', 1800000000);
                    """)
        }
        return path
    }

    @Test func theReleaseBeforeAppsMigratesIntoTheOneAppItServedOnceTheServerNamesIt() async throws {
        let store = try await SQLiteStore.open(path: try await Self.databaseOfTheReleaseBeforeApps())
        #expect(
            try await store.migrate() == [
                "0009-apps", "0010-leases", "0011-rate-buckets", "0012-dashboard", "0013-key-statistics", "0014-typed-answers", "0015-reported-by",
                "0016-channel-listeners", "0017-events", "0018-webhooks", "0019-retention", "0020-trace-context", "0021-device-ios",
                "0022-deliveries-by-key-newest", "0023-latest-state", "0024-grants", "0025-token-once", "0026-app-versions", "0027-first-release",
                "0028-contract-environment", "0029-surface-tokens", "0030-history-without-device-order", "0031-token-indexes",
                "0032-reloads-by-event", "0033-unsent-pushes", "0034-rate-reservations",
            ])
        // Kept under no app until the server names the one it served.
        #expect(try await store.activity(app: Self.app, key: "order-1") == nil)
        #expect(try await store.adoptUnnamedData(bundleID: Self.app))
        #expect(try await store.adoptUnnamedData(bundleID: "com.example.other") == false, "adopted once")

        let order = try #require(try await store.activity(app: Self.app, key: "order-1"))
        #expect(order.attributesType == "DeliveryAttributes")
        #expect(try await store.activity(app: Self.app, key: "match-1")?.channelIDs == [.production: "chan-1"])
        #expect(try await store.activityTokens(app: Self.app, key: "order-1").map(\.token) == ["bb22"])
        #expect(try await store.pushToStartTokens(deviceID: "phone-1").map(\.bundleID) == [Self.app])
        #expect(try await store.channel(id: "chan-1")?.bundleID == Self.app)
        #expect(try await store.schedules(app: Self.app, key: nil).map(\.id) == ["sch_1"])
        let keys = Dictionary(uniqueKeysWithValues: try await store.apiKeys().map { ($0.id, $0.bundleID) })
        let expected: [String: String?] = ["key_server": nil, "key_client": Self.app]
        #expect(keys == expected, "a server key serves every app; a client key its one")
        let queued = try await store.claimDeliveries(dueBy: Date(timeIntervalSince1970: 1_800_000_001), limit: 10, leaseUntil: .distantFuture)
        #expect(queued.map(\.bundleID) == [Self.app])
    }
}

/// Each record's columns are written once, in its `ColumnTable`: the table matches what the
/// migrations made, so a column added to one and not the other fails here, not at run time.
@Suite struct ColumnTableTests {
    /// Each record's table, and the columns of its database table it does not read (kept for the
    /// store's own statements), or reads from another table.
    static let tables: [(table: String, names: [String], notRead: Set<String>, elsewhere: Set<String>)] = [
        (AppRecord.table.table, AppRecord.table.columns.map(\.name), [], []),
        (APIKeyRecord.table.table, APIKeyRecord.table.columns.map(\.name), [], []),
        (DashboardSessionRecord.table.table, DashboardSessionRecord.table.columns.map(\.name), [], []),
        (PushToStartTokenRecord.table.table, PushToStartTokenRecord.table.columns.map(\.name), [], []),
        (ActivityRecord.table.table, ActivityRecord.table.columns.map(\.name), [], []),
        (ActivityTokenRecord.table.table, ActivityTokenRecord.table.columns.map(\.name), ["last_delivery_id"], []),
        (EventRecord.table.table, EventRecord.table.columns.map(\.name), [], []),
        (ChannelListenerRecord.table.table, ChannelListenerRecord.table.columns.map(\.name), [], []),
        (ChannelRecord.table.table, ChannelRecord.table.columns.map(\.name), [], []),
        (ContractRecord.table.table, ContractRecord.table.columns.map(\.name), [], []),
        (ScheduleRecord.table.table, ScheduleRecord.table.columns.map(\.name), [], []),
        (DeliveryRecord.table.table, DeliveryRecord.table.columns.map(\.name), ["attempted_at", "lease_until"], []),
        (WebhookEndpointRecord.table.table, WebhookEndpointRecord.table.columns.map(\.name), ["cursor"], []),
        (WebhookDeliveryRecord.table.table, WebhookDeliveryRecord.table.columns.map(\.name), ["event_seq", "lease_until"], ["type"]),
    ]

    @Test func everyRecordsTableIsItsDatabaseTable() async throws {
        let store = try await SQLiteStore.open(path: TestFiles.path("columns", pathExtension: "sqlite"))
        try await store.migrate()
        for entry in Self.tables {
            let inDatabase = Set(try await store.pool.read { db in try db.columns(in: entry.table).map(\.name) })
            let read = Set(entry.names).subtracting(entry.elsewhere)
            #expect(read.subtracting(inDatabase).isEmpty, "\(entry.table) has no \(read.subtracting(inDatabase).sorted())")
            #expect(
                inDatabase.subtracting(read).subtracting(entry.notRead).isEmpty,
                "\(entry.table)'s \(inDatabase.subtracting(read).subtracting(entry.notRead).sorted()) are in no record's table")
            #expect(Set(entry.names).count == entry.names.count, "\(entry.table) names a column twice")
        }
    }
}
