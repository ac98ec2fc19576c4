import Synchronization

/// Wakes the dispatcher when something was queued, without polling the store in a busy loop.
///
/// A wait ends at a signal or at its deadline. The deadlines are kept by one alarm, a task that
/// sleeps until the earliest and, woken for a wait that has since given way to a later one,
/// sleeps again: the dispatcher waits a few times a push, and a timer of its own each time (a
/// task group and a sleeping task) cost thread wake-ups: with the body reads' timers, a tenth of
/// the server's CPU at 1,000 updates a second (`Documentation/benchmarks.md`, "Where a request goes").
final class OutboxSignal: Sendable {
    private struct Waiter {
        let continuation: CheckedContinuation<Void, Never>
        let deadline: ContinuousClock.Instant
        /// Whether running out asks for a claim (`queued()`), since a retry may have come due.
        let thenClaim: Bool
    }

    private struct State {
        var pending = false
        var waiter: Waiter?
        /// When the alarm rings next; nil when no alarm task sleeps.
        var alarm: ContinuousClock.Instant?
    }

    private let state = Mutex(State())
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
        let waiter = state.withLock { state -> Waiter? in
            defer { state.waiter = nil }
            if state.waiter == nil { state.pending = true }
            return state.waiter
        }
        waiter?.continuation.resume()
    }

    /// Returns when signalled (or already signalled since the last wait), or after `limit`; then
    /// as if `queued()` had been called when `thenClaim`, since a retry may have come due.
    func wait(upTo limit: Duration, thenClaim: Bool = true) async {
        let deadline = ContinuousClock.now + limit
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let (resumeNow, earlier, armAlarm) = state.withLock { state -> (Bool, Waiter?, Bool) in
                    // Cancelled: do not wait for a signal that need not come.
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return (true, nil, false)
                    }
                    let earlier = state.waiter
                    state.waiter = Waiter(continuation: continuation, deadline: deadline, thenClaim: thenClaim)
                    // An alarm ringing by this deadline serves it; otherwise one is set for it.
                    if let alarm = state.alarm, alarm <= deadline { return (false, earlier, false) }
                    state.alarm = deadline
                    return (false, earlier, true)
                }
                earlier?.continuation.resume()
                if resumeNow { continuation.resume() }
                if armAlarm { Task { await self.ring(at: deadline) } }
            }
        } onCancel: {
            // Only a waiter still registered is woken: a signal left pending here would end the
            // next wait at once, and each such wait would leave one for the next (the
            // dispatcher then spun at full CPU and never reached its timed claim).
            state.withLock { state in
                defer { state.waiter = nil }
                return state.waiter
            }?.continuation.resume()
        }
    }

    /// The alarm: sleeps until `deadline`, then ends the wait whose deadline has come, or sleeps
    /// on until the waiter's when no earlier alarm is set for it.
    private func ring(at deadline: ContinuousClock.Instant) async {
        var deadline = deadline
        while true {
            try? await Task.sleep(until: deadline, clock: .continuous)
            let (due, next) = state.withLock { state -> (Waiter?, ContinuousClock.Instant?) in
                if state.alarm == deadline { state.alarm = nil }
                guard let waiter = state.waiter else { return (nil, nil) }
                if waiter.deadline <= .now {
                    state.waiter = nil
                    return (waiter, nil)
                }
                if let alarm = state.alarm, alarm <= waiter.deadline { return (nil, nil) }
                state.alarm = waiter.deadline
                return (nil, waiter.deadline)
            }
            if let due {
                if due.thenClaim { workQueued.store(true, ordering: .relaxed) }
                due.continuation.resume()
                return
            }
            guard let next else { return }
            deadline = next
        }
    }

    /// Whether a signal waits for the next `wait` (tests).
    var isPending: Bool { state.withLock { $0.pending } }

    /// Whether a `wait` is waiting (tests).
    var hasWaiter: Bool { state.withLock { $0.waiter != nil } }
}
