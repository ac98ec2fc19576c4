import Foundation
import LiveRelayStore
import LiveRelayTesting
import Testing

@testable import LiveRelay

/// A key's rate across instances sharing a database, each taking its requests a few at a time.
@Suite(.enabled(if: TestPostgres.isAvailable || TestPostgres.isCI, Comment(rawValue: TestPostgres.skipNote)))
struct RequestLimiterTests {
    private let start = Date(timeIntervalSince1970: 1_800_000_000)

    /// 40 requests at once and 200 a second: each instance takes 4 at a time (a tenth of the
    /// burst), and the two together let through the burst and not one request more.
    @Test func instancesTakingAheadLetThroughTheRateAndNoMore() async throws {
        try await TestPostgres.twoInstances { one, two async throws in
            #expect(TokenBucket(rate: 200, burst: 40).reservation == 4)
            let first = RequestLimiter(rate: 200, burst: 40, store: one)
            let second = RequestLimiter(rate: 200, burst: 40, store: two)
            func allowed(_ limiter: RequestLimiter, _ requests: Int, at now: Date) async throws -> Int {
                var allowed = 0
                for _ in 0..<requests where try await limiter.take("key-1", at: now) == nil { allowed += 1 }
                return allowed
            }
            // The first instance holds 3 of its 4; the second gets the other 36.
            #expect(try await allowed(first, 1, at: start) == 1)
            #expect(try await allowed(second, 50, at: start) == 36)
            #expect(try await allowed(first, 10, at: start) == 3)
            // 62.5 ms refill 12.5; the second instance takes 4, spends 3 here and keeps 1.
            let later = start + 0.0625
            #expect(try await allowed(second, 3, at: later) == 3)
            #expect(try await allowed(first, 20, at: later) == 8)
            #expect(try await allowed(second, 20, at: later) == 1)
            // What an instance took ahead and did not spend in a second is gone, not added to
            // a bucket refilled since.
            #expect(try await allowed(first, 1, at: start + 0.5) == 1)
            #expect(try await allowed(second, 100, at: start + 10) == 40)
            #expect(try await allowed(first, 10, at: start + 10) == 0)
        }
    }

    /// A device's reports (one a second, 30 at once) are taken one at a time: the shared bucket
    /// is exact for them.
    @Test func slowBucketsAreTakenOneAtATime() {
        #expect(TokenBucket(rate: 1, burst: 30).reservation == 1)
        #expect(TokenBucket(rate: 500, burst: 1000).reservation == 25)
        #expect(TokenBucket(rate: 500, burst: 20).reservation == 2)
    }
}
