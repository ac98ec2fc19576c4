import LiveRelayStore
import Synchronization

/// Something the service reads from the store on many requests and rarely changes (the apps and
/// their credentials, the contracts): read when first needed and again once `refreshInterval`
/// has passed, so that a change made through another process sharing the store applies within it.
/// A change made here invalidates it, so the next request reads it anew. Once read, a value only
/// grown old is refreshed by one caller while the others go on with it (the dispatcher looks its
/// app up for every push, hundreds at once).
final class StoreCache<Value: Sendable>: Sendable {
    static var refreshInterval: Duration { .seconds(5) }

    private struct State {
        var value: Value?
        var readAt: ContinuousClock.Instant?
        /// Counts invalidations, so that a read begun before one is never kept.
        var generation = 0
        /// Whether a caller is reading an old value anew.
        var refreshing = false
    }

    private let state = Mutex(State())
    private let read: @Sendable (any RelayStore) async throws -> Value
    private let now: @Sendable () -> ContinuousClock.Instant

    init(now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }, read: @escaping @Sendable (any RelayStore) async throws -> Value) {
        self.now = now
        self.read = read
    }

    func value(from store: any RelayStore) async throws -> Value {
        let (kept, generation) = state.withLock { state -> (Value?, Int) in
            let fresh = state.readAt.map { now() - $0 < Self.refreshInterval } == true
            if fresh || (state.refreshing && state.readAt != nil) { return (state.value, state.generation) }
            state.refreshing = true
            return (nil, state.generation)
        }
        if let kept { return kept }
        do {
            let value = try await read(store)
            state.withLock { state in
                state.refreshing = false
                guard state.generation == generation else { return }
                state.value = value
                state.readAt = now()
            }
            return value
        } catch {
            state.withLock { $0.refreshing = false }
            throw error
        }
    }

    /// After a write through this process: the next request reads what it wrote.
    func invalidate() {
        state.withLock { state in
            state.generation += 1
            state.readAt = nil
        }
    }
}
