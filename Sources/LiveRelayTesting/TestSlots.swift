import Foundation
import Synchronization

/// How many of the tests that run servers, stores and child processes run at once. `swift test`
/// starts every test of the suite together (six hundred on two cores): each test's wall time was
/// then the whole suite's, and a deadline measured the machine's speed, not a hang. A test takes a
/// slot before its deadline starts (`withDeadline`, the store suites' `withStore`), so that its
/// time is its own and a few others', whatever the machine.
///
/// Four a core: enough to keep the cores busy while tests wait on loopback and child processes,
/// few enough that each gets a share. (On two cores, the whole suite bounded at eight ran in 88 s
/// and 76 s of CPU; unbounded, 98–131 s and 116 s: tests starved one another.)
package enum TestSlots {
    package static let width = max(4, 4 * ProcessInfo.processInfo.activeProcessorCount)

    /// Whether this task holds a slot already: what it runs inside takes none of its own (a
    /// deadline inside a deadline would otherwise wait for itself when every slot is held).
    @TaskLocal static var held = false

    private static let slots = Slots(width)

    /// Runs `body` holding a slot, waiting for one first (a wait that ends if the task is cancelled).
    package static func holding<Value: Sendable>(_ body: () async throws -> Value) async throws -> Value {
        if held { return try await body() }
        try await slots.acquire()
        defer { slots.release() }
        return try await $held.withValue(true) { try await body() }
    }

    /// A counting semaphore whose waiters are resumed in the order they came.
    private final class Slots: Sendable {
        private struct State {
            var free: Int
            var waiting: [(id: UInt64, continuation: CheckedContinuation<Void, any Error>)] = []
            var nextID: UInt64 = 0
        }

        private let state: Mutex<State>

        init(_ count: Int) { state = Mutex(State(free: count)) }

        func acquire() async throws {
            let id = state.withLock { state in
                state.nextID += 1
                return state.nextID
            }
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    let resumeNow: Bool? = state.withLock { state in
                        if Task.isCancelled { return false }
                        if state.free > 0 {
                            state.free -= 1
                            return true
                        }
                        state.waiting.append((id, continuation))
                        return nil
                    }
                    switch resumeNow {
                    case true?: continuation.resume()
                    case false?: continuation.resume(throwing: CancellationError())
                    case nil: break
                    }
                }
            } onCancel: {
                let cancelled = state.withLock { state in
                    state.waiting.firstIndex { $0.id == id }.map { state.waiting.remove(at: $0).continuation }
                }
                cancelled?.resume(throwing: CancellationError())
            }
        }

        func release() {
            let next = state.withLock { state in
                if state.waiting.isEmpty {
                    state.free += 1
                    return nil as CheckedContinuation<Void, any Error>?
                }
                return state.waiting.removeFirst().continuation
            }
            next?.resume()
        }
    }
}
