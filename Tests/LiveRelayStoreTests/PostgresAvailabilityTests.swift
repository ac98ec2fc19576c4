import LiveRelayTesting
import Testing

/// The PostgreSQL store is tested wherever a server can be found or started. In CI it must be:
/// its absence fails here (and in every PostgreSQL case of the contract suite). Elsewhere this
/// test is reported skipped, with why, instead of the PostgreSQL cases passing unseen.
@Suite struct PostgresAvailabilityTests {
    @Test(.enabled(if: TestPostgres.isAvailable || TestPostgres.isCI, Comment(rawValue: TestPostgres.skipNote)))
    func thePostgresStoreIsTested() async throws {
        switch TestPostgres.availability {
        case .success(let url):
            // The server answers.
            try await TestPostgres.psql(url, "SELECT 1")
        case .failure(let reason):
            Issue.record("PostgreSQL is required in CI (install Debian's postgresql, or set LIVERELAY_TEST_POSTGRES): \(reason)")
        }
    }
}
