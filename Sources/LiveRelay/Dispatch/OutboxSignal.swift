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
                        // Cancelled (the timer ended the wait, or the wait itself was cancelled):
                        // do not wait for a signal that need not come.
                        if state.pending || Task.isCancelled {
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
                do {
                    try await Task.sleep(for: limit)
                    if thenClaim { self.queued() } else { self.signal() }
                } catch {
                    // Cancelled: a signal ended the wait, or the wait was cancelled. Only a waiter
                    // still registered is woken: a signal left pending here would end the next
                    // wait at once, and each such wait would leave one for the next (the
                    // dispatcher then spun at full CPU and never reached its timed claim).
                    self.state.withLock { state in
                        defer { state.waiter = nil }
                        return state.waiter
                    }?.resume()
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Whether a signal waits for the next `wait` (tests).
    var isPending: Bool { state.withLock { $0.pending } }

    /// Whether a `wait` is waiting (tests).
    var hasWaiter: Bool { state.withLock { $0.waiter != nil } }
}
