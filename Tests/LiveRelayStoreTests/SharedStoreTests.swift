import Foundation
import LiveRelayStore
import LiveRelayTesting
import Testing

/// What a store several instances share keeps for all of them (PostgreSQL; in CI its absence
/// fails these tests, elsewhere they are reported skipped).
@Suite(.enabled(if: TestPostgres.isAvailable || TestPostgres.isCI, Comment(rawValue: TestPostgres.skipNote)))
struct SharedStoreTests {
    /// A key's request rate holds across instances: what one takes, the other cannot.
    @Test func aKeysRateHoldsAcrossInstances() async throws {
        let url = try TestPostgres.freshDatabase()
        let (one, two) = (try PostgresStore(url: url), try PostgresStore(url: url))
        try await one.migrate()
        let bucket = TokenBucket(rate: 2, burst: 3)
        #expect(try await one.takeRequest("key-1", from: bucket, at: t0) == nil)
        #expect(try await two.takeRequest("key-1", from: bucket, at: t0) == nil)
        #expect(try await one.takeRequest("key-1", from: bucket, at: t0) == nil)
        #expect(try await two.takeRequest("key-1", from: bucket, at: t0) == 1)
        #expect(try await one.takeRequest("key-1", from: bucket, at: t0) == 1)
        // Another key has its own bucket; half a second refills one request.
        #expect(try await two.takeRequest("key-2", from: bucket, at: t0) == nil)
        #expect(try await two.takeRequest("key-1", from: bucket, at: t0 + 0.5) == nil)
        #expect(try await one.takeRequest("key-1", from: bucket, at: t0 + 0.5) == 1)
        // Refilled to the burst, no more.
        for _ in 0..<3 { #expect(try await one.takeRequest("key-1", from: bucket, at: t0 + 100) == nil) }
        #expect(try await two.takeRequest("key-1", from: bucket, at: t0 + 100) == 1)
        await one.close()
        await two.close()
    }
}
