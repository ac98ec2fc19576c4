import Foundation

/// A token bucket: `rate` requests a second, `burst` at most at once. The arithmetic of every
/// limiter, in memory or in a shared store.
package struct TokenBucket: Sendable, Hashable {
    package var rate: Double
    package var burst: Double

    package init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = max(1, burst)
    }

    /// The tokens a bucket that held `tokens` at `last` holds at `now`.
    package func refilled(_ tokens: Double, since last: Date, at now: Date) -> Double {
        min(burst, tokens + max(0, now.timeIntervalSince(last)) * rate)
    }

    /// The whole seconds until a bucket holding `tokens` has one to give.
    package func wait(holding tokens: Double) -> Int {
        max(1, Int(((1 - tokens) / rate).rounded(.up)))
    }
}

/// A store several instances share: what must hold across them that one process would keep in
/// memory lives in it.
package protocol InstanceSharedStore: RelayStore {
    /// Takes one request from the bucket `key` for every instance at once; nil when allowed, else
    /// the whole seconds to wait.
    func takeRequest(_ key: String, from bucket: TokenBucket, at now: Date) async throws -> Int?
}
