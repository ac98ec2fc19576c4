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
        try await TestPostgres.twoInstances { one, two async throws in
            let bucket = TokenBucket(rate: 2, burst: 3)
            func take(_ store: PostgresStore, _ key: String, upTo count: Int = 1, at now: Date) async throws -> BucketTake {
                try await store.takeRequests(key, upTo: count, from: bucket, at: now)
            }
            #expect(try await take(one, "key-1", at: t0) == .taken(1))
            #expect(try await take(two, "key-1", at: t0) == .taken(1))
            #expect(try await take(one, "key-1", at: t0) == .taken(1))
            #expect(try await take(two, "key-1", at: t0) == .wait(seconds: 1))
            #expect(try await take(one, "key-1", at: t0) == .wait(seconds: 1))
            // Another key has its own bucket; half a second refills one request.
            #expect(try await take(two, "key-2", at: t0) == .taken(1))
            #expect(try await take(two, "key-1", at: t0 + 0.5) == .taken(1))
            #expect(try await take(one, "key-1", at: t0 + 0.5) == .wait(seconds: 1))
            // Refilled to the burst, no more.
            for _ in 0..<3 { #expect(try await take(one, "key-1", at: t0 + 100) == .taken(1)) }
            #expect(try await take(two, "key-1", at: t0 + 100) == .wait(seconds: 1))
            // Several at once: as many whole requests as the bucket holds, up to those asked.
            #expect(try await take(one, "key-3", upTo: 2, at: t0) == .taken(2))
            #expect(try await take(two, "key-3", upTo: 2, at: t0) == .taken(1))
            #expect(try await take(one, "key-3", upTo: 2, at: t0) == .wait(seconds: 1))
            #expect(try await take(two, "key-3", upTo: 5, at: t0 + 1.25) == .taken(2))
            #expect(try await take(one, "key-4", upTo: 5, at: t0) == .taken(3))
        }
    }

    /// Imported tokens are what registering them one by one would have made: the key's activity,
    /// its live update tokens (a change reaches each), and push-to-start tokens to start with.
    @Test func importedTokensAreAsIfRegistered() async throws {
        let store = try PostgresStore(url: try await TestPostgres.freshDatabase())
        try await store.running {
            try await store.migrate()
            let devices = ["iphone-1", "iphone-2", "iphone-3"]
            try await store.importTokens(
                activityTokens: devices.map { activityToken("match", $0) }, attributesType: deliveryType,
                pushToStart: [pushToStart("ipad-1"), pushToStart("ipad-2", user: "u2")])
            let counts = try await store.counts()
            #expect((counts.liveActivityTokens, counts.pushToStartTokens, counts.activeKeys) == (3, 2, 1))
            #expect(try await store.activity(app: testApp, key: "match")?.attributesType == deliveryType)
            #expect(try await store.pushToStartTokens(deviceID: "ipad-2") == [pushToStart("ipad-2", user: "u2")])
            try await store.change("match", body: "u1", at: t0 + 1)
            let claimed = try await store.claimDeliveries(dueBy: t0 + 1, limit: 10, leaseUntil: t0 + 61)
            #expect(claimed.map(\.target.name).sorted() == devices)
        }
    }
}
