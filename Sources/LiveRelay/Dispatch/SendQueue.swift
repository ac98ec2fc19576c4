import LiveRelayStore
import Synchronization

/// The claimed deliveries waiting for a worker, and the outcomes waiting to be recorded. It hands
/// out no more deliveries at once than `InFlightSizing` allows, which learns from each push that
/// finishes. Workers wake the dispatcher's loop only when it has something to do: the queue ran
/// low, outcomes piled up (or the first came), or, for a loop that stops once idle, every worker
/// fell idle. A serving loop learns that from the recording that follows the first outcome: woken
/// as each lone push finished, it went round once a push (`Documentation/benchmarks.md`, "Where a
/// request goes").
final class SendQueue: Sendable {
    typealias Outcome = (id: Int64, outcome: DeliveryOutcome)

    private struct State {
        var sizing: InFlightSizing
        var queue: [DeliveryRecord] = []
        var head = 0
        var sending = 0
        var outcomes: [Outcome] = []
        /// Claimed pushes given up unsent (`DispatchPolicy.maySend`), to give back to the store.
        var abandoned: [DeliveryRecord] = []
        /// Claimed pushes no worker took before the dispatcher stopped, to give back at once: a
        /// fan-out larger than what is in flight left hundreds of them claimed, and the dispatcher
        /// waiting for them until the service group gave up on it and the process trapped.
        var released: [DeliveryRecord] = []
        var idleWorkers: [CheckedContinuation<Handed?, Never>] = []
        var stopped = false
        var queued: Int { queue.count - head }

        /// The next queued delivery, handed out.
        mutating func take() -> Handed {
            head += 1
            sending += 1
            return (queue[head - 1], sizing.sent(among: sending))
        }

        /// Hands queued deliveries to idle workers while the limit allows.
        mutating func handOut() -> [(CheckedContinuation<Handed?, Never>, Handed)] {
            var handedOut: [(CheckedContinuation<Handed?, Never>, Handed)] = []
            while !idleWorkers.isEmpty, head < queue.count, sending < sizing.limit {
                handedOut.append((idleWorkers.removeLast(), take()))
            }
            return handedOut
        }
    }

    private let state: Mutex<State>
    private let wake: OutboxSignal
    private let limits: DispatchLoop.Limits
    private let wakeWhenIdle: Bool

    init(wake: OutboxSignal, limits: DispatchLoop.Limits, sizing: InFlightSizing, wakeWhenIdle: Bool) {
        self.wake = wake
        self.limits = limits
        self.wakeWhenIdle = wakeWhenIdle
        self.state = Mutex(State(sizing: sizing))
    }

    /// A delivery handed to a worker, and how it is sent (`InFlightSizing.sent`).
    typealias Handed = (delivery: DeliveryRecord, sending: InFlightSizing.Sending)

    /// The next delivery to send; nil once stopped.
    func next() async -> Handed? {
        await withCheckedContinuation { continuation in
            // Resumed here with a delivery or nil, or later by `add`, `finished` or `stop`, never twice.
            let (answer, wakeLoop) = state.withLock { state -> (Handed??, Bool) in
                if state.stopped { return (.some(nil), false) }
                guard state.head < state.queue.count, state.sending < state.sizing.limit else {
                    state.idleWorkers.append(continuation)
                    return (nil, wakeWhenIdle && state.sending == 0)
                }
                return (state.take(), state.queued == limits.lowWater(inFlight: state.sizing.limit))
            }
            if wakeLoop { wake.signal() }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// A worker sent a delivery, `sending` as `next` said, and it finished at `now`; `roundTrip`:
    /// how long APNs took to answer, if it did.
    func finished(
        _ id: Int64, _ outcome: DeliveryOutcome, _ sending: InFlightSizing.Sending, roundTrip: Duration?, at now: ContinuousClock.Instant
    ) {
        let (wakeLoop, handedOut) = state.withLock { state in
            state.sending -= 1
            state.outcomes.append((id, outcome))
            let before = state.sizing.limit
            state.sizing.finished(sending, roundTrip: roundTrip, at: now)
            let wakeLoop =
                state.outcomes.count == 1 || state.outcomes.count == limits.batchSize / 2
                || (wakeWhenIdle && state.sending == 0 && state.queued == 0) || state.sizing.limit > before
            return (wakeLoop, state.sizing.limit > before ? state.handOut() : [])
        }
        for (worker, delivery) in handedOut { worker.resume(returning: delivery) }
        if wakeLoop { wake.signal() }
    }

    /// A worker gives up a delivery it took without sending it.
    func abandon(_ delivery: DeliveryRecord, _ sending: InFlightSizing.Sending) {
        let wakeLoop = state.withLock { state in
            state.sending -= 1
            state.sizing.unsent(sending)
            state.abandoned.append(delivery)
            return state.abandoned.count == 1 || (wakeWhenIdle && state.sending == 0 && state.queued == 0)
        }
        if wakeLoop { wake.signal() }
    }

    func add(_ batch: [DeliveryRecord]) {
        let handedOut = state.withLock { state -> [(CheckedContinuation<Handed?, Never>, Handed)] in
            // A claim that ends after the stop is given back with the rest.
            if state.stopped {
                state.released += batch
                return []
            }
            state.queue.removeFirst(state.head)
            state.head = 0
            state.queue += batch
            return state.handOut()
        }
        for (worker, delivery) in handedOut { worker.resume(returning: delivery) }
    }

    /// Workers stop taking deliveries; those waiting for one end, and what no worker took is
    /// released, to give back to the store.
    func stop() {
        let idle = state.withLock { state in
            state.stopped = true
            state.released += state.queue[state.head...]
            state.queue.removeAll()
            state.head = 0
            defer { state.idleWorkers.removeAll() }
            return state.idleWorkers
        }
        for worker in idle { worker.resume(returning: nil) }
    }

    /// `unrecorded`: outcomes, and abandoned and released deliveries, all for the store to hear of;
    /// `inFlightLimit`: how many may be sending at once now, from `shortestRoundTrip` and the rate.
    func counts() -> (queued: Int, sending: Int, unrecorded: Int, inFlightLimit: Int, shortestRoundTrip: Duration?) {
        state.withLock {
            ($0.queued, $0.sending, $0.outcomes.count + $0.abandoned.count + $0.released.count, $0.sizing.limit, $0.sizing.shortestRoundTrip)
        }
    }

    func takeOutcomes() -> (outcomes: [Outcome], abandoned: [DeliveryRecord], released: [DeliveryRecord]) {
        state.withLock { state in
            defer {
                state.outcomes.removeAll(keepingCapacity: true)
                state.abandoned.removeAll()
                state.released.removeAll()
            }
            return (state.outcomes, state.abandoned, state.released)
        }
    }

    /// Outcomes a recording failed to store, kept for the next.
    func putBack(_ outcomes: [Outcome]) {
        state.withLock { $0.outcomes.insert(contentsOf: outcomes, at: 0) }
    }
}
