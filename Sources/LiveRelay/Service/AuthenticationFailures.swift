import Foundation
import LiveRelayStore

/// Failed authentications (an API key unknown or revoked, on the API or the dashboard's sign-in)
/// by the address they came from: a source may fail `bucket.burst` times at once and then once a
/// second; beyond that it is refused before its attempt costs a lookup (a database query, on
/// PostgreSQL), until its bucket refills. The log hears of a source's failures at most once a
/// minute, with how many there were. A value: `RelayService` keeps one and carries out what it says.
struct AuthenticationFailures: Sendable {
    static let bucket = TokenBucket(rate: 1, burst: 20)
    static let logInterval: TimeInterval = 60
    /// Sources remembered at most; those whose bucket is full again are forgotten first.
    static let sourcesKept = 10_000

    struct Source: Sendable {
        var tokens: Double
        var at: Date
        /// Failures since the last log line, and when that was.
        var unlogged = 0
        var loggedAt: Date?
    }

    private(set) var sources: [String: Source] = [:]

    /// Before a lookup: nil when `source` may try, else the whole seconds until it may.
    func refusal(for source: String, at now: Date) -> Int? {
        guard let held = sources[source] else { return nil }
        let tokens = Self.bucket.refilled(held.tokens, since: held.at, at: now)
        return tokens >= 1 ? nil : Self.bucket.wait(holding: tokens)
    }

    /// After a failure from `source`: how many failures to log now (those since its last line),
    /// or nil while the last line is under a minute old.
    mutating func failed(_ source: String, at now: Date) -> Int? {
        if sources[source] == nil, sources.count >= Self.sourcesKept { forgetRefilled(at: now) }
        var held = sources[source] ?? Source(tokens: Self.bucket.burst, at: now)
        held.tokens = max(0, Self.bucket.refilled(held.tokens, since: held.at, at: now) - 1)
        held.at = now
        held.unlogged += 1
        defer { sources[source] = held }
        guard held.loggedAt.map({ now.timeIntervalSince($0) >= Self.logInterval }) ?? true else { return nil }
        defer {
            held.unlogged = 0
            held.loggedAt = now
        }
        return held.unlogged
    }

    /// Forgets the sources whose bucket has refilled; if none has, the one that failed longest ago.
    private mutating func forgetRefilled(at now: Date) {
        sources = sources.filter { Self.bucket.refilled($0.value.tokens, since: $0.value.at, at: now) < Self.bucket.burst }
        if sources.count >= Self.sourcesKept, let oldest = sources.min(by: { $0.value.at < $1.value.at })?.key {
            sources[oldest] = nil
        }
    }
}
