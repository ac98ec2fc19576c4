import Foundation
import LiveRelayStore
import Synchronization

/// Per-key token buckets: in memory, or, on a store several instances share, in the store, so
/// that a key's rate holds across them.
package final class RequestLimiter: Sendable {
    private let bucket: TokenBucket
    private let shared: (any InstanceSharedStore)?
    private let buckets = Mutex<[String: (tokens: Double, at: Date)]>([:])

    init(rate: Double, burst: Double, store: any RelayStore) {
        bucket = TokenBucket(rate: rate, burst: burst)
        shared = store as? any InstanceSharedStore
    }

    /// Takes one request; nil when allowed, else the whole seconds to wait.
    package func take(_ key: String, at now: Date) async throws -> Int? {
        if let shared { return try await shared.takeRequest(key, from: bucket, at: now) }
        return buckets.withLock { buckets in
            var held = buckets[key] ?? (bucket.burst, now)
            held.tokens = bucket.refilled(held.tokens, since: held.at, at: now)
            held.at = now
            defer { buckets[key] = held }
            guard held.tokens >= 1 else { return bucket.wait(holding: held.tokens) }
            held.tokens -= 1
            return nil
        }
    }
}

extension RelayService {
    /// Buckets of `rate` requests a second per key, `burst` at most at once, kept where this
    /// server's instances all see them.
    package func requestLimiter(rate: Double, burst: Double) -> RequestLimiter {
        RequestLimiter(rate: rate, burst: burst, store: store)
    }

    /// Whether other instances share the store: what they change, this one does not hear of.
    package var isShared: Bool { store is any InstanceSharedStore }

    /// Sizes of what the store holds.
    package func counts() async throws -> StoreCounts { try await store.counts() }
}
