import Foundation
import GRDB
import GRDBSQLite
import LiveActivityKit
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
            } else if let status = query.status, DeliveryStatus.endedUnsent.contains(status) {
                #expect(plan.contains("deliveries_unsent (status=?)"), "\(name): \(plan)")
            } else {
                #expect(!plan.contains("INDEX"), "\(name): \(plan)")
            }
        }
    }

    /// What the server reads without a request's key, at its start, at each scrape of `/metrics`
    /// and each time the dashboard's overview is drawn again (at every change, while a browser
    /// shows it), reads indexes of the pushes it wants, never the whole history.
    @Test func theStartTheMetricsAndTheOverviewReadNoWholeHistory() async throws {
        let store = try await SQLiteStore.open(path: TestFiles.path("unkeyed-plans", pathExtension: "sqlite"))
        _ = try await store.migrate()
        var statements = OutboxRules.decisions(after: .restarted(alone: true), at: t0).map { OutboxStatements.statement($0, at: t0) }
        statements.append(SQLStatement(text: StoreStatements.waitingAndUnsentCounts, arguments: []))
        statements.append(SQLStatement(text: StoreStatements.pendingDeliveryCount, arguments: []))
        statements.append(StoreStatements.deliveries(DeliveryQuery(status: .failed, limit: 500)))
        for statement in statements {
            let plan = try await HistoryOrderTests.plan(statement, in: store)
            #expect(!plan.split(separator: "\n").contains("SCAN deliveries"), "\(statement.text): \(plan)")
            #expect(plan.contains("INDEX"), "\(statement.text): \(plan)")
        }
    }
}

extension SQLitePlanTests {
    /// A device's report says its app's version: the version is written to that device's tokens,
    /// found by the device, not by reading every token of the app.
    @Test func aReportsAppVersionIsWrittenToItsDevicesTokensOnly() async throws {
        let store = try await SQLiteStore.open(path: TestFiles.path("version-plans", pathExtension: "sqlite"))
        _ = try await store.migrate()
        let plans = try await store.pool.read { db in
            try StoreStatements.updateDeviceAppVersion(namingIndex: true).map { statement in
                try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + statement, arguments: ["1.0", "app", "iphone-1", "1.0"])
                    .map { $0["detail"] as String? ?? "" }.joined(separator: "\n")
            }
        }
        #expect(plans[0].contains("(bundle_id=? AND device_id=?)"), "\(plans[0])")
        #expect(plans[1].contains("activity_tokens_by_device (device_id=? AND bundle_id=?)"), "\(plans[1])")
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
        ("the pushes passed over", DeliveryQuery(status: .superseded, limit: 100)),
        ("a key's skipped", DeliveryQuery(bundleID: "app", key: "match", status: .skipped, limit: 50)),
        ("a key's", DeliveryQuery(bundleID: "app", key: "match", limit: 1_000)),
        ("a key's, the next page", DeliveryQuery(bundleID: "app", key: "match", before: 5_000, limit: 50)),
        ("a key's queued", DeliveryQuery(bundleID: "app", key: "order-7", status: .queued, limit: 50)),
        ("a key's in every app", DeliveryQuery(key: "order-7", limit: 50)),
    ]

    /// An app's key is read by `deliveries_by_key_newest`; the rest, newest first by the primary
    /// key (a key in every app is asked only by a key that serves every app).
    static func readsByKey(_ query: DeliveryQuery) -> Bool { query.bundleID != nil && query.key != nil }
}

/// A fan-out writes a push to each of a key's devices: an index that ordered the key's whole
/// history by device took each new row into a page of its own, every page of the history written
/// again at each fan-out (issue 59). What needs a device's pushes under a key reads them another way.
@Suite struct HistoryOrderTests {
    static func plan(_ statement: SQLStatement, in store: SQLiteStore) async throws -> String {
        try await store.pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + statement.text, arguments: statement.sqliteArguments)
                .map { $0["detail"] as String? ?? "" }.joined(separator: "\n")
        }
    }

    /// Every index of the whole history orders a key's pushes by something a fan-out's rows share
    /// and that only grows (their time, their `timestamp`, their id). An index by device may hold
    /// only rows that leave it (queued ones) or that a fan-out never writes (starts).
    @Test func noIndexOfTheWholeHistoryOrdersAKeysPushesByDevice() async throws {
        let store = try await SQLiteStore.open(path: TestFiles.path("history-order", pathExtension: "sqlite"))
        _ = try await store.migrate()
        let indexes = try await store.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'deliveries' AND sql IS NOT NULL")
                .map { (name: $0["name"] as String, sql: $0["sql"] as String) }
        }
        #expect(indexes.count >= 8, "\(indexes)")
        for index in indexes {
            let columns = index.sql.split(separator: "(")[1].split(separator: ")")[0].split(separator: ",").map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard columns.starts(with: ["bundle_id", "key"]), columns.count > 2, !["id", "created_at"].contains(columns[2]) else { continue }
            let partial = index.sql.components(separatedBy: " WHERE ").dropFirst().first ?? ""
            #expect(
                ["status = 'queued'", "event = 'start'"].contains(partial), "\(index.name) orders a key's history by \(columns[2]): \(index.sql)")
        }
    }

    /// A late report reads whether its device was sent the key's latest change, and its
    /// priority-10 pushes moment by moment, by seeks to the device: not the key's history.
    @Test func aLateReportSeeksItsDevice() async throws {
        let store = try await SQLiteStore.open(path: TestFiles.path("late-report-plan", pathExtension: "sqlite"))
        _ = try await store.migrate()
        let plan = try await Self.plan(
            StoreStatements.catchUpReads(app: "app", key: "match", deviceID: "iphone-1", latest: 1_800_000_000, since: t0), in: store)
        #expect(plan.contains("deliveries_by_timestamp (bundle_id=? AND timestamp=? AND key=? AND device_id=?)"), "\(plan)")
        #expect(plan.contains("deliveries_priority10 (bundle_id=? AND key=? AND created_at=? AND device_id=?)"), "\(plan)")
        #expect(!plan.contains("SCAN deliveries"), "\(plan)")
        let reloads = try await store.pool.read { db in
            try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + StoreStatements.recentReloads, arguments: ["app", "widgets", 1_800_000_000])
                .map { $0["detail"] as String? ?? "" }.joined(separator: "\n")
        }
        #expect(reloads.contains("deliveries_reloads (bundle_id=? AND target=? AND created_at>?)"), "a day's reloads, not all: \(reloads)")
    }

    /// What a change reads and writes of its key's pushes goes by the indexes that hold only
    /// those: its starts (the devices still awaited), its queued pushes (passed over by the
    /// change), its priority-10 pushes of the hour. SQLite plans without statistics: an index of
    /// the whole history that began with the app and the key would tie with these, and was taken
    /// (the awaited devices counted over a key's 3 million pushes: 0.7 s a fan-out).
    @Test func aChangeReadsItsKeyByTheIndexesThatHoldOnlyWhatItWants() async throws {
        let store = try await SQLiteStore.open(path: TestFiles.path("change-plans", pathExtension: "sqlite"))
        _ = try await store.migrate()
        let statements: [(name: String, statement: SQLStatement, index: String)] = [
            (
                "the awaited devices", SQLStatement(text: StoreStatements.awaitingDevices, arguments: [.text("app"), .text("match")]),
                "deliveries_starts_by_device"
            ),
            (
                "the queued pushes passed over", OutboxStatements.move(OutboxRules.supersedingKey(app: "app", key: "match", at: t0)),
                "deliveries_queued_by_target"
            ),
            (
                "the budget", SQLStatement(text: StoreStatements.priority10Counts, arguments: [.text("app"), .text("match"), .seconds(t0)]),
                "deliveries_priority10"
            ),
        ]
        for (name, statement, index) in statements {
            let plan = try await Self.plan(statement, in: store)
            #expect(plan.contains(index) && !plan.contains("deliveries_by_timestamp"), "\(name): \(plan)")
        }
    }
}

/// SQLite compiles a statement again, at its next run, when the value of an argument it compared
/// with a partial index's condition changes: the plan was chosen for that value. An index of
/// reloads `WHERE key = ''` made every statement naming `key = ?` on the pushes compile again at
/// each change of another key, three a request (issue 59).
@Suite struct StatementReuseTests {
    /// How many times the writer's cached statements were compiled again (`sqlite3_stmt_status`).
    static func recompiled(_ store: SQLiteStore) async throws -> Int32 {
        try await store.pool.write { db in
            var total: Int32 = 0
            var statement = sqlite3_next_stmt(db.sqliteConnection, nil)
            while let current = statement {
                total += sqlite3_stmt_status(current, SQLITE_STMTSTATUS_REPREPARE, 0)
                statement = sqlite3_next_stmt(db.sqliteConnection, current)
            }
            return total
        }
    }

    /// Registrations, changes, outcomes and reloads, each for another key, device and time.
    @Test func noStatementOfARequestsPathIsCompiledAgainForItsArguments() async throws {
        let store = try await SQLiteStore.open(path: TestFiles.path("statement-reuse", pathExtension: "sqlite"))
        _ = try await store.migrate()
        for (index, key) in ["order-1", "order-2", "order-3", "order-4"].enumerated() {
            let at = t0 + Double(index) * 10
            try await store.saveActivityToken(activityToken(key, "iphone-\(index)", at: at), attributesType: deliveryType)
            try await store.change(key, body: "update", at: at + 1, countingBudget: index % 2 == 0)
            let claimed = try await store.claimDeliveries(dueBy: at + 1, limit: 10, leaseUntil: at + 60)
            try await store.recordOutcomes(claimed.map { ($0.id, .sent(status: 200, apnsID: "apns-\(key)")) }, at: at + 2)
            try await store.change(key, event: .end, body: "end", at: at + 3)
            _ = try await store.deliveries(DeliveryQuery(bundleID: testApp, key: key, status: .sent, limit: 10))
            // A reload of the device's widgets, its day's reloads counted (`deliveries_reloads`).
            let device = "iphone-\(index)"
            try await store.saveSurfaceTokens(
                app: testApp, deviceID: device, type: .widgets,
                [
                    SurfaceTokenRecord(
                        bundleID: testApp, deviceID: device, pushType: .widgets, token: "w\(index)", environment: .sandbox, updatedAt: at)
                ])
            try await store.reloadWidgets(.devices([device]), at: at + 4, since: at - 86_400)
        }
        #expect(try await Self.recompiled(store) == 0)
    }
}
