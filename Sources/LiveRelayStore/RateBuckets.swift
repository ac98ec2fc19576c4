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

    /// The requests an instance takes from a shared bucket at once and spends on its own: 50 ms of
    /// the rate, a tenth of the burst at most, one at least (a device's reports, at one a second,
    /// take one at a time): a statement on the shared bucket for each request was a round trip
    /// and 37 µs of PostgreSQL's time. What an instance holds and does not spend is lost to the
    /// others for `heldFor` at most, never added to the rate.
    package var reservation: Int {
        max(1, Int(min(rate / 20, burst / 10)))
    }

    /// How long an instance keeps requests it took ahead: longer, and a key quiet for a while
    /// could spend them on top of a bucket refilled since.
    package static let heldFor: TimeInterval = 1
}

/// What a shared bucket gives: requests taken (one or more), or the whole seconds to wait.
package enum BucketTake: Sendable, Hashable {
    case taken(Int)
    case wait(seconds: Int)
}

/// A store several instances share: what must hold across them that one process would keep in
/// memory lives in it.
package protocol InstanceSharedStore: RelayStore {
    /// Takes up to `count` requests from the bucket `key` for every instance at once: as many as
    /// it holds whole, or the wait when it holds none.
    func takeRequests(_ key: String, upTo count: Int, from bucket: TokenBucket, at now: Date) async throws -> BucketTake
}
