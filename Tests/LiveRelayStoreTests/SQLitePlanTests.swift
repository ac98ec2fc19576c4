import Foundation
import GRDB
import LiveRelayTesting
import Testing

@testable import LiveRelayStore

/// How SQLite runs the store's statements, read from `EXPLAIN QUERY PLAN`. It plans by the indexes
/// alone (the store never runs ANALYZE), so a plan does not depend on what the tables hold.
@Suite struct SQLitePlanTests {
    /// Every page of pushes the API and the dashboard ask for reads the newest rows of an index
    /// and stops at the page's end: none reads a whole history to sort it.
    @Test func eachPageOfPushesIsReadNewestFirstWithoutSorting() async throws {
        let store = try await SQLiteStore.open(path: TestFiles.path("plans", pathExtension: "sqlite"))
        _ = try await store.migrate()
        for (name, query) in DeliveryPageForms.all {
            let statement = StoreStatements.deliveries(query)
            let plan = try await store.pool.read { db in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + statement.text, arguments: statement.sqliteArguments)
                    .map { $0["detail"] as String? ?? "" }.joined(separator: "\n")
            }
            #expect(!plan.contains("TEMP B-TREE"), "\(name): \(plan)")
            if DeliveryPageForms.readsByKey(query) {
                #expect(plan.contains("deliveries_by_key_newest"), "\(name): \(plan)")
            } else {
                #expect(!plan.contains("INDEX"), "\(name): \(plan)")
            }
        }
    }
}

/// The pages of pushes the API and the dashboard ask for: by app, key, status, reason and
/// `before`, alone and together.
enum DeliveryPageForms {
    static let all: [(name: String, query: DeliveryQuery)] = [
        ("every push", DeliveryQuery(limit: 1_000)),
        ("an app's", DeliveryQuery(bundleID: "app", limit: 1_000)),
        ("an app's, the next page", DeliveryQuery(bundleID: "app", before: 5_000, limit: 1_000)),
        ("an app's failures", DeliveryQuery(bundleID: "app", status: .failed, reason: "BadDeviceToken", limit: 100)),
        ("a key's", DeliveryQuery(bundleID: "app", key: "match", limit: 1_000)),
        ("a key's, the next page", DeliveryQuery(bundleID: "app", key: "match", before: 5_000, limit: 50)),
        ("a key's queued", DeliveryQuery(bundleID: "app", key: "order-7", status: .queued, limit: 50)),
        ("a key's in every app", DeliveryQuery(key: "order-7", limit: 50)),
    ]

    /// An app's key is read by `deliveries_by_key_newest`; the rest, newest first by the primary
    /// key (a key in every app is asked only by a key that serves every app).
    static func readsByKey(_ query: DeliveryQuery) -> Bool { query.bundleID != nil && query.key != nil }
}
