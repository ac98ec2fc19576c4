import Foundation
import GRDB
import LiveActivityKit
import Testing

@testable import LiveRelayStore

/// A database written by an earlier release opens with everything in it, migrated by name.
@Suite struct MigrationTests {
    /// Writes the schema of the release before environments (migrations up to `0007-contracts`)
    /// and rows as that release wrote them: a server that sent to APNs production only.
    static func databaseOfTheReleaseBeforeEnvironments() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("liverelay-migration-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let path = directory.appendingPathComponent("relay.sqlite").path
        let queue = try DatabaseQueue(path: path)
        var migrator = DatabaseMigrator()
        for migration in SQLiteMigrations.all.prefix(while: { $0.name != "0008-environments" }) {
            migrator.registerMigration(migration.name) { db in
                for statement in migration.statements { try db.execute(sql: statement) }
            }
        }
        try migrator.migrate(queue)
        try queue.write { db in
            try db.execute(sql: """
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
        let store = try SQLiteStore(path: try Self.databaseOfTheReleaseBeforeEnvironments())
        #expect(try await store.migrate() == ["0008-environments"])
        let match = try #require(try await store.activity(key: "match-1"))
        #expect(match.channelIDs == [.production: "chan-1"])
        #expect(try await store.channel(id: "chan-1")?.environment == .production)
        #expect(try await store.activityTokens(key: "order-1").map(\.environment) == [.production])
        #expect(try await store.pushToStartTokens(deviceID: "phone-1").map(\.environment) == [.production])
        let queued = try await store.claimDeliveries(dueBy: Date(timeIntervalSince1970: 1_800_000_001), limit: 10, leaseUntil: .distantFuture)
        #expect(queued.map(\.environment) == [.production])
        #expect(queued.map(\.payload) == [Array("{}".utf8)])
        #expect(try await store.migrate() == [])
    }

    @Test func aDatabaseWithNoPushToStartTokenMigratesIntoSandboxTheOldDefault() async throws {
        let path = try Self.databaseOfTheReleaseBeforeEnvironments()
        try await DatabaseQueue(path: path).write { try $0.execute(sql: "DELETE FROM push_to_start_tokens") }
        let store = try SQLiteStore(path: path)
        _ = try await store.migrate()
        #expect(try await store.activityTokens(key: "order-1").map(\.environment) == [.sandbox])
        #expect(try await store.activity(key: "match-1")?.channelIDs == [.sandbox: "chan-1"])
    }
}
