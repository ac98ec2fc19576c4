import Foundation
import LiveRelayStore
import LiveRelayTesting
import Synchronization
import Testing

@testable import LiveRelay

/// What the service keeps of the store between requests: read once, kept for the refresh
/// interval, read anew after a change here, and refreshed by one caller at a time.
@Suite struct StoreCacheTests {
    /// Counts reads, and holds one back while `held` until released.
    final class Reads: Sendable {
        private let state = Mutex<(count: Int, held: CheckedContinuation<Void, Never>?, holding: Bool)>((0, nil, false))
        var count: Int { state.withLock { $0.count } }

        func read() async -> Int {
            let (count, hold) = state.withLock { state in
                state.count += 1
                return (state.count, state.holding)
            }
            if hold { await withCheckedContinuation { continuation in state.withLock { $0.held = continuation } } }
            return count
        }

        func hold() { state.withLock { $0.holding = true } }
        var isHolding: Bool { state.withLock { $0.held != nil } }
        func release() {
            state.withLock { state in
                state.holding = false
                state.held?.resume()
                state.held = nil
            }
        }
    }

    final class Clock: Sendable {
        private let instant = Mutex(ContinuousClock.now)
        var now: ContinuousClock.Instant { instant.withLock { $0 } }
        func advance(by duration: Duration) { instant.withLock { $0 += duration } }
    }

    func store() async throws -> SQLiteStore {
        try await SQLiteStore.open(path: TestFiles.path("cache", pathExtension: "sqlite"))
    }

    @Test func aValueIsReadOnceAndAgainAfterAChangeOrTheInterval() async throws {
        let (reads, clock, store) = (Reads(), Clock(), try await store())
        let cache = StoreCache(now: { clock.now }) { _ in await reads.read() }
        #expect(try await cache.value(from: store) == 1)
        #expect(try await cache.value(from: store) == 1)
        cache.invalidate()
        #expect(try await cache.value(from: store) == 2)
        clock.advance(by: StoreCache<Int>.refreshInterval - .milliseconds(1))
        #expect(try await cache.value(from: store) == 2)
        clock.advance(by: .milliseconds(1))
        #expect(try await cache.value(from: store) == 3)
    }

    @Test func whileOneCallerRefreshesAnOldValueTheOthersGoOnWithIt() async throws {
        let (reads, clock, store) = (Reads(), Clock(), try await store())
        let cache = StoreCache(now: { clock.now }) { _ in await reads.read() }
        #expect(try await cache.value(from: store) == 1)
        clock.advance(by: StoreCache<Int>.refreshInterval)
        reads.hold()
        let refresher = Task { try await cache.value(from: store) }
        try await withDeadline { while !reads.isHolding { await Task.yield() } }
        // Hundreds of pushes look their app up meanwhile: none waits, none reads.
        let seen = try await withDeadline(.seconds(10)) {
            var seen: [Int] = []
            for _ in 0..<100 { seen.append(try await cache.value(from: store)) }
            return seen
        }
        #expect(seen == Array(repeating: 1, count: 100))
        #expect(reads.count == 2)
        reads.release()
        #expect(try await refresher.value == 2)
        #expect(try await cache.value(from: store) == 2)
    }
}
