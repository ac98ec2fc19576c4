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
        let url = try TestPostgres.freshDatabase()
        let store = try PostgresStore(url: url)
        try await store.migrate()
        await store.close()
        try TestPostgres.psql(
            url,
            """
            INSERT INTO payloads (body) VALUES ('\\x7b7d');
            INSERT INTO deliveries (key, event, target, device_id, token, payload_id, priority, priority_reason, timestamp,
                request_id, status, attempts, next_attempt_at, created_at, environment, bundle_id)
            SELECT 'match', 'update', 'activity', 'device-' || i, 'token-' || i, (SELECT MIN(id) FROM payloads), 5, 'auto', 1,
                'request', 'sent', 1, 0, 0, 'sandbox', 'app' FROM generate_series(1, 3000) AS i;
            ANALYZE deliveries;
            UPDATE deliveries SET status = 'sending', next_attempt_at = 100 WHERE id % 3 <> 0
            """)
        let now = Date(timeIntervalSince1970: 50)
        let abandoned = OutboxRules.decisions(after: .abandoned(ids: [1, 2], leasedUntil: now), at: now).compactMap { decision in
            if case .move(let move) = decision { OutboxStatements.move(move) } else { nil }
        }
        try #require(!abandoned.isEmpty)
        let statements: [(name: String, sql: String, arguments: String)] = [
            ("record sent", PreparedStatements.RecordSent.sql, "50, '{1,2}', '{200,200}', '{\"\",\"\"}', '{\(OutboxStatements.sourceStatuses(.sent).joined(separator: ","))}'"),
            Self.run("a retry", OutboxStatements.answer(id: 2, .retry(at: now, status: 429, reason: "TooManyRequests"), at: now)),
            Self.run("a failure", OutboxStatements.answer(id: 2, .failed(status: 410, reason: "Unregistered", tokenIsDead: true), at: now)),
        ] + abandoned.map { Self.run("abandoned claims", $0) }
        for (index, statement) in statements.enumerated() {
            let plan = try TestPostgres.psqlOutput(
                url,
                """
                SET plan_cache_mode = force_generic_plan;
                PREPARE statement_\(index) AS \(statement.sql);
                EXPLAIN EXECUTE statement_\(index)(\(statement.arguments))
                """)
            #expect(plan.contains("deliveries_pkey") && !plan.contains("deliveries_due"), "\(statement.name): \(plan)")
        }
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
