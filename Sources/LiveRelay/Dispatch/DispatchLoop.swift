/// The dispatcher's loop as a value: events in, actions out. `Dispatcher` performs what it says
/// (claim a batch, record outcomes, wait, finish) and reports back what happened; every decision of
/// when to claim, when to record, how to ride out a failing store and when to stop is made here, so
/// it is tested without I/O (`DispatchLoopTests`).
struct DispatchLoop {
    struct Limits: Sendable, Hashable {
        /// Deliveries per claim; outcomes are recorded at once when half a batch piles up.
        var batchSize: Int
        /// How long an outcome may wait to be recorded with others.
        var recordingDelay: Duration
        /// Failed recordings in a row after which a stopping dispatcher gives up on its outcomes:
        /// those pushes were sent, and their leases make them due again.
        var recordingAttemptsWhileStopping = 5
        /// The longest the loop sleeps without being woken.
        var longestWait = Duration.seconds(1)

        /// Claim again when fewer than this are queued for the workers: as many as may be in
        /// flight, and half a batch more, so that workers never wait for a claim.
        func lowWater(inFlight: Int) -> Int {
            inFlight + batchSize / 2
        }
    }

    /// What the loop sees of its send queue and of the world each time round.
    struct Snapshot: Sendable, Hashable {
        var queued: Int
        var sending: Int
        var unrecorded: Int
        /// How many may be in flight at once now (`InFlightSizing`).
        var inFlightLimit: Int
        var now: ContinuousClock.Instant
        /// Shutting down (or cancelled): no more claims; finish once what is in flight is recorded.
        var stopping: Bool
    }

    /// What to do this time round.
    struct Step: Sendable, Hashable {
        /// Take the outcomes waiting and record them.
        var record = false
        /// Claim a batch of due deliveries.
        var claim = false
        /// Nothing is left to do: return.
        var finish = false
        /// Idle with a working store that may hold a retry the loop does not know of: ask it when
        /// the next one is due before waiting (`learned(nextDue:)`).
        var askNextDue = false
    }

    /// What a failing claim or recording means for the loop.
    struct Failure: Sendable, Hashable {
        /// To log, when the store's state changed.
        var change: StoreBackoff.Change?
        /// For a recording: whether its outcomes are kept for the next one (else dropped at shutdown).
        var keepOutcomes: Bool
    }

    let limits: Limits
    /// Tests and benchmarks: finish as soon as nothing is due now and nothing is in flight.
    let stopWhenIdle: Bool
    private(set) var claiming = false
    private(set) var recording = false
    /// Claiming again is worth a transaction only when the last claim was full or more was queued
    /// since; a finished push alone does not make anything due.
    private var claimAgain = true
    private var oldestUnrecorded: ContinuousClock.Instant?
    /// What the loop knows of the store's next retry. Only a recorded retry makes a push due
    /// later (a queued or given-back one is due at once and wakes the loop), so the store is asked
    /// again only after one, or once the retry it named is due: not each time the loop goes idle,
    /// which on PostgreSQL was a round trip per single-key update.
    private enum NextDue: Hashable {
        /// Never asked, or a retry was recorded since.
        case unknown
        /// Nothing is due later.
        case none
        case at(ContinuousClock.Instant)
    }
    private var nextDue = NextDue.unknown
    /// While the store fails, claims and recordings wait out the back-off (a full disk once made the
    /// loop retry about 90 times a second, logging each).
    private(set) var backoff = StoreBackoff()
    private var storePausedUntil: ContinuousClock.Instant

    init(limits: Limits, stopWhenIdle: Bool, now: ContinuousClock.Instant) {
        self.limits = limits
        self.stopWhenIdle = stopWhenIdle
        self.storePausedUntil = now
    }

    // MARK: Events

    /// A claim returned `count` deliveries (now in the send queue).
    mutating func claimed(count: Int) -> StoreBackoff.Change? {
        claiming = false
        claimAgain = count == limits.batchSize
        return backoff.succeeded()
    }

    /// Outcomes were recorded; `retries`: some of them are to be sent again later.
    mutating func recorded(retries: Bool = false) -> StoreBackoff.Change? {
        recording = false
        if retries { nextDue = .unknown }
        return backoff.succeeded()
    }

    /// The store said at `now` when its next retry is due (nil: none is). True when one is due
    /// already: claim at once.
    mutating func learned(nextDue: ContinuousClock.Instant?, at now: ContinuousClock.Instant) -> Bool {
        self.nextDue = nextDue.map(NextDue.at) ?? .none
        return nextDue.map { $0 <= now } ?? false
    }

    /// A claim (`whileRecording` false) or a recording failed at `now`.
    mutating func storeFailed(whileRecording: Bool, stopping: Bool, at now: ContinuousClock.Instant) -> Failure {
        let (wait, change) = backoff.failed()
        storePausedUntil = now + wait
        guard whileRecording else {
            claiming = false
            return Failure(change: change, keepOutcomes: false)
        }
        recording = false
        let givingUp = stopping && backoff.failuresInARow >= limits.recordingAttemptsWhileStopping
        return Failure(change: change, keepOutcomes: !givingUp)
    }

    // MARK: Decisions

    /// What to do now. `queuedSinceLastClaim` says whether more was queued since it was last asked;
    /// it is asked only when nothing else stops a claim, so that no such news is lost.
    mutating func next(_ snapshot: Snapshot, queuedSinceLastClaim: () -> Bool) -> Step {
        var step = Step()
        let storeAvailable = snapshot.now >= storePausedUntil
        if snapshot.unrecorded > 0, oldestUnrecorded == nil { oldestUnrecorded = snapshot.now }
        let quiet = snapshot.queued == 0 && snapshot.sending == 0
        let recordingDue = oldestUnrecorded.map { snapshot.now - $0 >= limits.recordingDelay } ?? false
        if !recording, storeAvailable, snapshot.unrecorded > 0,
            snapshot.unrecorded >= limits.batchSize / 2 || recordingDue || snapshot.stopping || (stopWhenIdle && quiet)
        {
            recording = true
            oldestUnrecorded = nil
            step.record = true
        }
        if !claiming, !snapshot.stopping, storeAvailable, snapshot.queued < limits.lowWater(inFlight: snapshot.inFlightLimit),
            claimAgain || queuedSinceLastClaim()
        {
            claiming = true
            step.claim = true
        }
        let idle = quiet && !claiming && !recording && snapshot.unrecorded == 0
        step.finish = idle && (snapshot.stopping || stopWhenIdle)
        let nextDueKnown =
            switch nextDue {
            case .unknown: false
            case .none: true
            case .at(let due): due > snapshot.now
            }
        step.askNextDue = idle && !step.finish && !backoff.isFailing && !nextDueKnown
        return step
    }

    /// How long to wait for news before going round again, and whether to claim when the wait runs
    /// out (a retry may have come due) rather than only record.
    func wait(at now: ContinuousClock.Instant) -> (duration: Duration, thenClaim: Bool) {
        var wait = limits.longestWait
        // A retry due already was claimed when learned, or is asked for again once idle; waking
        // for it again and again while busy would spin.
        if case .at(let due) = nextDue, due > now { wait = min(wait, due - now) }
        let pause = storePausedUntil - now
        if pause > .zero { wait = min(wait, pause) }
        if let oldestUnrecorded, !recording {
            let recordingDue = max(.milliseconds(1), oldestUnrecorded + limits.recordingDelay - now, pause)
            if recordingDue < wait { return (recordingDue, false) }
        }
        return (wait, true)
    }
}
