import Synchronization

/// Wakes the dispatcher when something was queued, without polling the store in a busy loop.
final class OutboxSignal: Sendable {
    private let state = Mutex<(pending: Bool, waiter: CheckedContinuation<Void, Never>?)>((false, nil))
    private let workQueued = Atomic<Bool>(true)

    /// Deliveries were queued, or a retry may have come due: the dispatcher should claim.
    func queued() {
        workQueued.store(true, ordering: .relaxed)
        signal()
    }

    /// Whether `queued()` was called since the last time `takeQueued()` asked.
    func takeQueued() -> Bool {
        workQueued.exchange(false, ordering: .relaxed)
    }

    func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state.waiter = nil }
            if state.waiter == nil { state.pending = true }
            return state.waiter
        }
        waiter?.resume()
    }

    /// Returns when signalled (or already signalled since the last wait), or after `limit`; then
    /// as if `queued()` had been called when `thenClaim`, since a retry may have come due.
    func wait(upTo limit: Duration, thenClaim: Bool = true) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                await withCheckedContinuation { continuation in
                    let resumeNow = self.state.withLock { state -> Bool in
                        if state.pending {
                            state.pending = false
                            return true
                        }
                        state.waiter?.resume()
                        state.waiter = continuation
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                // Cancelled, the waiter above must still be resumed, or the group never ends.
                if thenClaim, !Task.isCancelled { self.queued() } else { self.signal() }
            }
            await group.next()
            group.cancelAll()
        }
    }
}
