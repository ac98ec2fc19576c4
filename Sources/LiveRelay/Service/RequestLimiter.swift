import Foundation
import LiveRelayStore
import Synchronization

/// Per-key token buckets: in memory, or, on a store several instances share, in the store, so
/// that a key's rate holds across them. There an instance takes a key's requests a few at a time
/// (`TokenBucket.reservation`) and spends them on its own for up to `TokenBucket.heldFor`: one
/// statement for a few requests, not one each.
package final class RequestLimiter: Sendable {
    private let bucket: TokenBucket
    private let shared: (any InstanceSharedStore)?
    private let buckets = Mutex<[String: (tokens: Double, at: Date)]>([:])
    /// Requests taken from the shared buckets ahead, by key, and when they are no longer spent.
    private let reserves = Mutex<[String: (requests: Int, until: Date)]>([:])

    init(rate: Double, burst: Double, store: any RelayStore) {
        bucket = TokenBucket(rate: rate, burst: burst)
        shared = store as? any InstanceSharedStore
    }

    /// Takes one request; nil when allowed, else the whole seconds to wait.
    package func take(_ key: String, at now: Date) async throws -> Int? {
        if let shared { return try await take(key, from: shared, at: now) }
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

    private func take(_ key: String, from shared: any InstanceSharedStore, at now: Date) async throws -> Int? {
        let reserved = reserves.withLock { reserves in
            guard let held = reserves[key] else { return false }
            guard held.requests > 0, now < held.until else {
                reserves[key] = nil
                return false
            }
            reserves[key] = held.requests > 1 ? (held.requests - 1, held.until) : nil
            return true
        }
        if reserved { return nil }
        switch try await shared.takeRequests(key, upTo: bucket.reservation, from: bucket, at: now) {
        case .wait(let seconds): return seconds
        case .taken(let requests):
            if requests > 1 {
                reserves.withLock { reserves in
                    let held = reserves[key].map(\.requests) ?? 0
                    reserves[key] = (held + requests - 1, now.addingTimeInterval(TokenBucket.heldFor))
                }
            }
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
