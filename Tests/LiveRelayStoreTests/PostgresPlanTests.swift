import Foundation
import LiveRelayTesting
import Testing

@testable import LiveRelayStore

/// How PostgreSQL runs the store's statements, read from its plans (in CI its absence fails these
/// tests, elsewhere they are reported skipped).
@Suite(.enabled(if: TestPostgres.isAvailable || TestPostgres.isCI, Comment(rawValue: TestPostgres.skipNote)))
struct PostgresPlanTests {
    /// What the statistics said while nothing was in flight, and 2,000 pushes claimed since: the
    /// state of every fan-out, until autovacuum analyzes again. With the statuses written in its
    /// text, recording sent pushes read the whole of `deliveries_due` for each batch.
    @Test func deliveriesLookedUpByIDAreFoundByPrimaryKeyWhileTheStatisticsSayNothingIsInFlight() async throws {
        let url = try await Self.migratedDatabase(
            holding: """
                \(Self.pushes(1...3_000, priority: 5, status: "sent"))
                ANALYZE deliveries;
                UPDATE deliveries SET status = 'sending', next_attempt_at = 100 WHERE id % 3 <> 0
                """)
        let now = Date(timeIntervalSince1970: 50)
        let abandoned = OutboxRules.decisions(after: .abandoned(ids: [1, 2], leasedUntil: now), at: now).compactMap { decision in
            if case .move(let move) = decision { OutboxStatements.move(move) } else { nil }
        }
        try #require(!abandoned.isEmpty)
        let statements: [(name: String, sql: String, arguments: String)] =
            [
                (
                    "record sent", PreparedStatements.RecordSent.sql,
                    "50, '{1,2}', '{200,200}', '{\"\",\"\"}', '{\(OutboxStatements.sourceStatuses(.sent).joined(separator: ","))}'"
                ),
                Self.run("a retry", OutboxStatements.answer(id: 2, .retry(at: now, status: 429, reason: "TooManyRequests"), at: now)),
                Self.run("a failure", OutboxStatements.answer(id: 2, .failed(status: 410, reason: "Unregistered", tokenIsDead: true), at: now)),
            ] + abandoned.map { Self.run("abandoned claims", $0) }
        for (index, statement) in statements.enumerated() {
            let plan = try await TestPostgres.psqlOutput(
                url,
                """
                SET plan_cache_mode = force_generic_plan;
                PREPARE statement_\(index) AS \(statement.sql);
                EXPLAIN EXECUTE statement_\(index)(\(statement.arguments))
                """)
            #expect(plan.contains("deliveries_pkey") && !plan.contains("deliveries_due"), "\(statement.name): \(plan)")
        }
    }

    /// The state `bench server` left: three fan-outs of 100,000 to one key, analyzed by autovacuum
    /// then, and since then a thousand keys of a couple of pushes each. A single-key change reads
    /// its key's priority-10 pushes of the last hour; with the plan made once for every key, the
    /// statistics (one key holds every push) had PostgreSQL read the whole of `deliveries` for
    /// each, 0.2 to 2 s, and single-key updates fell to ten a second.
    @Test func aKeysPriority10CountReadsItsOwnPushesAfterALargeFanOut() async throws {
        let url = try await Self.migratedDatabase(
            holding: """
                INSERT INTO activities (bundle_id, key, attributes_type, state, started_at, last_timestamp)
                SELECT 'app', 'order-' || i, 'DeliveryAttributes', 'active', 0, 0 FROM generate_series(1, 1000) AS i;
                INSERT INTO activity_tokens (bundle_id, key, device_id, token, frequent_pushes, registered_at, state, environment)
                SELECT 'app', CASE WHEN i <= 100000 THEN 'match' ELSE 'order-' || (i - 100000) END, 'device-' || i, 'token', false, 0, 'live',
                    'sandbox'
                FROM generate_series(1, 101000) AS i;
                \(Self.pushes(1...300_000, status: "sent", createdAt: "i / 100"))
                ANALYZE;
                \(Self.pushes(1...2_000, key: "'order-' || (i % 1000 + 1)", status: "sent", createdAt: "i / 100"))
                """)
        let plan = try await TestPostgres.psqlOutput(
            url,
            """
            SET plan_cache_mode = force_generic_plan;
            PREPARE snapshot AS \(PreparedStatements.ChangeSnapshotRead.sql);
            EXPLAIN EXECUTE snapshot(true, 'app', 'order-7', 0, 'app', 'order-7')
            """)
        // Found by their indexes, and expected to be few.
        for table in ["deliveries", "activity_tokens"] {
            let scan = try #require(plan.split(separator: "\n").first { $0.contains(" on \(table) ") }, "\(plan)")
            #expect(scan.contains("Index Scan using"), "\(plan)")
            let rows = scan.components(separatedBy: "rows=").last?.prefix { $0.isNumber }
            #expect(Int(rows ?? "") ?? .max < 1_000, "\(scan)")
        }
        #expect(plan.contains("deliveries_priority10"), "\(plan)")
    }

    /// A connection plans the snapshot read once, at its first change: in `bench server`, at the
    /// first fan-out's, while `deliveries` was still empty. Until autovacuum analyzed the table
    /// (up to a minute later, or never with autovacuum busy or off), that plan read all of
    /// `deliveries` for every single-key change after the fan-outs: PostgreSQL's CPU a request
    /// doubled (1.1 ms) and p99 rose from 6 ms to 60–130 ms in half the runs. The store analyzes
    /// the table's keys after a write larger than its statistics know of.
    @Test func aChangePlannedBeforeANewDatabasesFirstFanOutReadsOnlyItsKeyAfterIt() async throws {
        let url = try await Self.migratedDatabase(
            holding: """
                INSERT INTO activities (bundle_id, key, attributes_type, state, started_at, last_timestamp)
                SELECT 'app', CASE WHEN i = 0 THEN 'match' ELSE 'order-' || i END, 'DeliveryAttributes', 'active', 0, 0
                FROM generate_series(0, 1000) AS i;
                INSERT INTO activity_tokens (bundle_id, key, device_id, token, frequent_pushes, registered_at, state, environment)
                SELECT 'app', CASE WHEN i <= 20000 THEN 'match' ELSE 'order-' || (i - 20000) END, 'device-' || i, 'token', false, 0, 'live',
                    'sandbox'
                FROM generate_series(1, 21000) AS i;
                ANALYZE;
                -- What is analyzed here is what the store analyzed.
                ALTER TABLE deliveries SET (autovacuum_enabled = false);
                """)
        // One connection: the single-key changes after the fan-out run the plans made before it.
        let store = try PostgresStore(url: url, maximumConnections: 1)
        let now = Date(timeIntervalSince1970: 1_000)
        try await store.running {
            try await store.change("order-7", body: "before", at: now, app: "app")
            try await store.change("match", body: "fan-out", at: now + 1, countingBudget: false, app: "app")
            try await store.change("order-8", body: "after", at: now + 2, app: "app")
            try await store.change("order-9", body: "after", at: now + 3, app: "app")
        }
        // A backend's counters reach the statistics when its connection ends.
        try await withDeadline(.seconds(30)) {
            try await eventually(every: .milliseconds(50)) { try await Self.deliveriesStatistics(url).inserted >= 20_003 }
        }
        // The fan-out's own reads saw at most the one push before it.
        let read = try await Self.deliveriesStatistics(url)
        #expect(read.sequentiallyRead < 100, "a change after the fan-out read the whole table: \(read)")
    }

    /// Tokens registered after the statistics were taken (a new database, or a day of reports
    /// before autovacuum analyzes): a change's plan still reads its key's tokens by the key. An
    /// index of live tokens by app and app version was taken instead, as the statistics made
    /// every index look small, and each single-key change read every live token of the app: in
    /// `bench server` on PostgreSQL, 7.6 to 18 ms of PostgreSQL's CPU a request, p50 20 to 55 s.
    @Test func aChangeReadsItsKeysTokensByTheKeyWhenTheStatisticsPredateThem() async throws {
        let url = try await Self.migratedDatabase(
            holding: """
                ANALYZE;
                INSERT INTO activities (bundle_id, key, attributes_type, state, started_at, last_timestamp)
                SELECT 'app', CASE WHEN i = 0 THEN 'match' ELSE 'order-' || i END, 'DeliveryAttributes', 'active', 0, 0
                FROM generate_series(0, 1000) AS i;
                INSERT INTO activity_tokens (bundle_id, key, device_id, token, frequent_pushes, registered_at, state, environment, app_version)
                SELECT 'app', CASE WHEN i <= 100000 THEN 'match' ELSE 'order-' || (i - 100000) END, 'device-' || i, 'token', false, 0, 'live',
                    'sandbox', '1.0'
                FROM generate_series(1, 101000) AS i;
                """)
        let plan = try await TestPostgres.psqlOutput(
            url,
            """
            SET plan_cache_mode = force_generic_plan;
            PREPARE snapshot AS \(PreparedStatements.ChangeSnapshotRead.sql);
            EXPLAIN EXECUTE snapshot(true, 'app', 'order-7', 0, 'app', 'order-7')
            """)
        let tokens = try #require(
            plan.split(separator: "\n").first { $0.contains(" on activity_tokens ") && !$0.contains("activity_tokens t ") }, "\(plan)")
        #expect(tokens.contains("activity_tokens_pkey"), "\(plan)")
    }

    /// The same state: a page of pushes, with no filter, by app or by key, is read from the newest
    /// end of an index. Planned once for every filter (`? IS NULL OR …`), each page read the whole
    /// history and sorted it: 140 ms for 1,000 of 311,000 pushes, and more with every push sent.
    @Test func aPageOfPushesReadsOnlyItsPageAfterALargeFanOut() async throws {
        let url = try await Self.migratedDatabase(
            holding: """
                \(Self.pushes(1...300_000, status: "sent", createdAt: "i / 100"))
                \(Self.pushes(300_001...302_000, key: "'order-' || (i % 1000 + 1)", status: "sent", createdAt: "i / 100"))
                ANALYZE;
                """)
        for (index, form) in DeliveryPageForms.all.enumerated() where form.query.status == nil {
            let plan = try await TestPostgres.psqlOutput(
                url,
                """
                SET plan_cache_mode = force_generic_plan;
                PREPARE page_\(index) AS \(StoreStatements.deliveries(form.query).numbered);
                EXPLAIN EXECUTE page_\(index)(\(StoreStatements.deliveries(form.query).arguments.map(Self.literal).joined(separator: ", ")))
                """)
            #expect(!plan.contains("Seq Scan") && !plan.contains("Sort"), "\(form.name): \(plan)")
            #expect(
                plan.contains(
                    DeliveryPageForms.readsByKey(form.query) ? "Backward using deliveries_by_key_newest" : "Index Scan Backward using deliveries_pkey"
                ), "\(form.name): \(plan)")
        }
    }

    /// A fan-out queued after a connection planned the claim on an empty `deliveries` (a new
    /// database's first fan-out): the plan made once ran the claim's locking sub-select again for
    /// every row of the table, each run taking the next due pushes, so that one claim of 1,000
    /// took all 10,000 in 15 s (with two instances, minutes: past the leases of what each held,
    /// so pushes were sent twice). A claim takes at most its limit. And it finds them by index:
    /// prepared on the empty table, the claim then read the whole table for each batch (0.6–1 s a
    /// claim of 1,000 among 100,000 queued: a new database's first fan-out of 100,000 took 40–54 s).
    @Test func aClaimTakesAtMostItsLimitWhateverTheStatisticsSay() async throws {
        let url = try await TestPostgres.freshDatabase()
        // One connection, whose plan of the claim is made at its first claim, on an empty table.
        let store = try PostgresStore(url: url, maximumConnections: 1)
        try await store.running {
            try await store.migrate()
            let now = Date(timeIntervalSince1970: 50)
            #expect(try await store.claimDeliveries(dueBy: now, limit: 1_000, leaseUntil: now + 30).isEmpty)
            try await TestPostgres.psql(
                url,
                """
                INSERT INTO payloads (body) VALUES ('\\x7b7d');
                \(Self.pushes(1...10_000, status: "queued"))
                """)
            let claimed = try await store.claimDeliveries(dueBy: now, limit: 1_000, leaseUntil: now + 30)
            #expect(claimed.count == 1_000)
            // A backend's counters reach the statistics when its connection ends; read before
            // anything else scans the table.
        }
        try await withDeadline(.seconds(30)) {
            try await eventually(every: .milliseconds(50)) { try await Self.deliveriesStatistics(url).updated >= 1_000 }
        }
        let read = try await Self.deliveriesStatistics(url)
        #expect(read.updated == 1_000 && read.sequentiallyRead < 10_000, "the claim read the whole table: \(read)")
        #expect(
            try await TestPostgres.psqlOutput(url, "SELECT status, COUNT(*) FROM deliveries GROUP BY status ORDER BY status")
                == "queued|9000\nsending|1000\n")
    }

    /// `/v1/health` asks how many pushes wait, without a key: with a long history and a few
    /// pushes waiting, the count reads the index of claimable pushes, not the history, whatever
    /// the statistics say. Analyzed while a fan-out waited (autovacuum's choice of moment), they
    /// said half the table waits, and the count read all of it: 54–57 ms in `bench server`, and
    /// more with every push in the history.
    @Test func thePendingCountReadsOnlyWhatWaitsWhateverTheStatisticsSay() async throws {
        let url = try await Self.migratedDatabase(
            holding: """
                \(Self.pushes(1...50_000, status: "queued"))
                ANALYZE deliveries;
                ALTER TABLE deliveries SET (autovacuum_enabled = false);
                UPDATE deliveries SET status = 'sent' WHERE id > 10;
                """)
        let before = try await Self.deliveriesStatistics(url)
        // One connection, whose counters reach the statistics when it ends: both counts' scans,
        // by index or not, are counted then.
        let store = try PostgresStore(url: url, maximumConnections: 1)
        let counts = try await store.running { [try await store.pendingDeliveryCount(), try await store.pendingDeliveryCount()] }
        #expect(counts == [10, 10])
        try await withDeadline(.seconds(30)) {
            try await eventually(every: .milliseconds(50)) { try await Self.deliveriesStatistics(url).scans >= before.scans + 2 }
        }
        let read = try await Self.deliveriesStatistics(url).sequentiallyRead - before.sequentiallyRead
        #expect(read < 1_000, "the pending count read the history: \(read) rows")
    }

    /// A long history of pushes sent, and a few waiting or unsent: what the server reads without
    /// a key (at its start, at each scrape of `/metrics`, each time the dashboard's overview is
    /// drawn again) reads the indexes of those, not the history (`SQLitePlanTests` the same).
    @Test func theStartTheMetricsAndTheOverviewReadNoWholeHistory() async throws {
        let url = try await Self.migratedDatabase(
            holding: """
                \(Self.pushes(1...300_000, status: "sent"))
                \(Self.pushes(300_001...300_010, status: "failed"))
                \(Self.pushes(300_011...300_020, status: "sending"))
                ANALYZE deliveries;
                """)
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        var statements = OutboxRules.decisions(after: .restarted(alone: true), at: at).map {
            Self.run("start", OutboxStatements.statement($0, at: at))
        }
        statements.append(Self.run("counts", SQLStatement(text: StoreStatements.waitingAndUnsentCounts, arguments: [])))
        statements.append(Self.run("failures", StoreStatements.deliveries(DeliveryQuery(status: .failed, limit: 500))))
        for (index, statement) in statements.enumerated() {
            let plan = try await TestPostgres.psqlOutput(
                url,
                """
                SET plan_cache_mode = force_generic_plan;
                PREPARE s_\(index) AS \(statement.sql);
                EXPLAIN EXECUTE s_\(index)\(statement.arguments.isEmpty ? "" : "(\(statement.arguments))")
                """)
            // Not the whole table, nor the primary key's index of it filtered: an index of theirs.
            #expect(!plan.contains("Seq Scan on deliveries") && !plan.contains("deliveries_pkey"), "\(statement.name): \(plan)")
            #expect(plan.contains("using deliveries_"), "\(statement.name): \(plan)")
        }
    }

    /// What PostgreSQL's statistics counted of `deliveries`: rows inserted, updated, and read by
    /// sequential scans, and scans of any kind. This schema's table: the tests share a database,
    /// each in a schema of its own.
    private static func deliveriesStatistics(_ url: String) async throws -> (inserted: Int, updated: Int, sequentiallyRead: Int, scans: Int) {
        let row = try await TestPostgres.psqlOutput(
            url,
            """
            SELECT n_tup_ins, n_tup_upd, seq_tup_read, seq_scan + COALESCE(idx_scan, 0) FROM pg_stat_user_tables
            WHERE relid = 'deliveries'::regclass
            """)
        let values = row.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|").compactMap { Int($0) }
        guard values.count == 4 else { return (0, 0, 0, 0) }
        return (values[0], values[1], values[2], values[3])
    }

    /// A new database, migrated, holding one payload and what `sql` then inserts.
    /// A key of 300,000 pushes in three fan-outs: a device that reports late is read by seeks to
    /// it (was it sent the latest change; its priority-10 pushes moment by moment), whatever the
    /// statistics say, never by the key's history (issue 59).
    @Test func aLateReportSeeksItsDeviceInALongHistory() async throws {
        let url = try await Self.migratedDatabase(
            holding: """
                \(Self.pushes(1...300_000, status: "sent", createdAt: "i / 100000"))
                ANALYZE deliveries;
                """)
        let reads = Self.run(
            "late report",
            StoreStatements.catchUpReads(app: "app", key: "match", deviceID: "device-7", latest: 1, since: Date(timeIntervalSince1970: 0)))
        let plan = try await TestPostgres.psqlOutput(
            url,
            """
            SET plan_cache_mode = force_generic_plan;
            PREPARE reads AS \(reads.sql);
            EXPLAIN EXECUTE reads(\(reads.arguments))
            """)
        #expect(plan.contains("deliveries_by_timestamp") && plan.contains("deliveries_priority10"), "\(plan)")
        #expect(!plan.contains("Seq Scan on deliveries") && !plan.contains("Bitmap"), "\(plan)")
    }

    private static func migratedDatabase(holding sql: String) async throws -> String {
        let url = try await TestPostgres.freshDatabase()
        let store = try PostgresStore(url: url)
        _ = try await store.running {
            try await store.migrate()
        }
        try await TestPostgres.psql(url, "INSERT INTO payloads (body) VALUES ('\\x7b7d');\n" + sql)
        return url
    }

    /// Inserts pushes numbered `range` (`i`) as updates of one payload, the values given as SQL
    /// expressions of `i`; the first payload must exist.
    private static func pushes(
        _ range: ClosedRange<Int>, key: String = "'match'", priority: Int = 10, status: String, createdAt: String = "0"
    ) -> String {
        """
        INSERT INTO deliveries (key, event, target, device_id, token, payload_id, priority, priority_reason, timestamp,
            request_id, status, attempts, next_attempt_at, created_at, environment, bundle_id)
        SELECT \(key), 'update', 'activity', 'device-' || i, 'token-' || i, (SELECT MIN(id) FROM payloads), \(priority), 'auto', 1,
            'request', '\(status)', \(status == "queued" ? 0 : 1), 0, \(createdAt), 'sandbox', 'app'
        FROM generate_series(\(range.lowerBound), \(range.upperBound)) AS i;
        """
    }

    /// `statement` as PostgreSQL runs it, and its arguments as literals for `EXECUTE`.
    private static func run(_ name: String, _ statement: SQLStatement) -> (name: String, sql: String, arguments: String) {
        (name, statement.numbered, statement.arguments.map(literal).joined(separator: ", "))
    }

    private static func literal(_ argument: SQLArgument) -> String {
        switch argument {
        case .text(let text): text.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" } ?? "NULL"
        case .real(let value): value.map { String($0) } ?? "NULL"
        case .integer(let value): value.map { String($0) } ?? "NULL"
        case .bool(let value): value ? "true" : "false"
        case .bytes(let bytes): "'\\x" + bytes.map { String(format: "%02x", $0) }.joined() + "'"
        }
    }
}
