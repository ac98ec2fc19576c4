import APNs
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import ServiceLifecycle
import Synchronization

/// Sends what the outbox holds: keeps up to `concurrency` pushes in flight, claiming due
/// deliveries as slots free up, so that one slow or hung push never holds back the others; records
/// outcomes in batches as they come. Retryable failures come back later with exponential backoff;
/// `410`, `BadDeviceToken` and `DeviceTokenNotForTopic` kill the token; the rest are dead letters.
/// The APNs client itself refreshes the provider token on `ExpiredProviderToken`.
public final class Dispatcher: Service {
    private let relay: RelayService
    private let apns: APNsClient
    private var policy: DispatchPolicy { relay.configuration.dispatch }
    private var logger: Logger { relay.logger }

    public init(relay: RelayService, apns: APNsClient) {
        self.relay = relay
        self.apns = apns
    }

    public func run() async throws {
        // No claim survives a restart: what was in flight when the process died is due again.
        // A store that fails now is waited for, as the loop waits for it later.
        var backoff = StoreBackoff()
        while true {
            do {
                try await relay.store.releaseClaims(at: relay.now())
                logger.log(backoff.succeeded(), who: "the dispatcher")
                break
            } catch {
                let (wait, change) = backoff.failed()
                logger.log(change, who: "the dispatcher", error: error)
                relay.metrics.count("liverelay_store_failures_total", ["loop": "dispatcher"])
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
                if Task.isShuttingDownGracefully || Task.isCancelled { return }
            }
        }
        try await pump(stopWhenIdle: false)
    }

    /// Sends until nothing is due now and nothing is in flight (tests, benchmarks).
    public func drain() async throws {
        try await pump(stopWhenIdle: true)
    }

    /// The send loop. `concurrency` workers take claimed deliveries from a local queue and send
    /// them (on the connection's event loop when the client has one connection); this loop only
    /// refills the queue (claiming a batch whenever it runs low) and records outcomes in batches,
    /// each in a side task, so the workers never wait on the database and a large fan-out costs
    /// few transactions. Outcomes wait up to `recordingDelay` to be recorded
    /// together unless a batch is full or nothing else is left to do. On graceful shutdown it stops
    /// claiming and lets the pushes in flight finish, so that their outcomes are recorded; claimed
    /// pushes not started yet wait for their lease to run out (or the next start).
    private func pump(stopWhenIdle: Bool) async throws {
        let inbox = DispatchInbox()
        let work = SendQueue(wake: relay.outboxSignal)
        let lowWater = policy.concurrency + policy.batchSize / 2
        if !stopWhenIdle {
            let room = policy.concurrency
            relay.handOver.open(.init(hasRoom: { work.counts().queued < room }, take: { work.add($0) }))
        }
        try await withThrowingDiscardingTaskGroup { group in
            // The workers run on the push connection's event loop: a push is written and its answer
            // read there, with no hop between threads (that hop cost more than our HTTP/2 framing).
            for _ in 0..<policy.concurrency {
                group.addTask(executorPreference: apns.pushExecutor) {
                    while let delivery = await work.next(lowWater: lowWater) {
                        work.finished(delivery.id, await self.send(delivery), recordAt: self.policy.batchSize / 2)
                    }
                }
            }
            defer {
                relay.handOver.close()
                work.stop()
            }
            var claiming = false, recording = false
            // Claiming again is worth a transaction only when the last claim was full or more was
            // queued since; a finished push alone does not make anything due.
            var claimAgain = true
            var oldestUnrecorded: ContinuousClock.Instant?
            // While the store fails, claims and recordings wait out the back-off (a full disk once
            // made this loop retry about 90 times a second, logging each).
            var backoff = StoreBackoff()
            var storePausedUntil = ContinuousClock.now
            while true {
                let stopping = Task.isShuttingDownGracefully || Task.isCancelled
                if stopping {
                    relay.handOver.close()
                    work.stop()
                }
                for event in inbox.takeAll() {
                    switch event {
                    case .claimed(let batch):
                        claiming = false
                        claimAgain = batch.count == policy.batchSize
                        work.add(batch)
                        logger.log(backoff.succeeded(), who: "the dispatcher")
                    case .recorded:
                        recording = false
                        logger.log(backoff.succeeded(), who: "the dispatcher")
                    case .failed(let error, let unrecorded):
                        let (wait, change) = backoff.failed()
                        storePausedUntil = .now + wait
                        logger.log(change, who: "the dispatcher", error: error)
                        relay.metrics.count("liverelay_store_failures_total", ["loop": "dispatcher"])
                        if let unrecorded {
                            recording = false
                            // Shutting down, a store that keeps failing cannot hold the process:
                            // these pushes were sent, and their leases make them due again.
                            if stopping, backoff.failuresInARow >= Self.recordingAttemptsWhileStopping {
                                logger.error("outcomes not recorded at shutdown; their pushes will be sent again", metadata: ["count": "\(unrecorded.count)"])
                            } else {
                                work.putBack(unrecorded)
                            }
                        } else {
                            claiming = false
                        }
                    }
                }
                let storeAvailable = ContinuousClock.now >= storePausedUntil
                let state = work.counts()
                if state.unrecorded > 0, oldestUnrecorded == nil { oldestUnrecorded = .now }
                let quiet = state.queued == 0 && state.sending == 0
                let recordingDue = oldestUnrecorded.map { .now - $0 >= policy.recordingDelay } ?? false
                if !recording, storeAvailable, state.unrecorded > 0,
                   state.unrecorded >= policy.batchSize / 2 || recordingDue || stopping || (stopWhenIdle && quiet)
                {
                    recording = true
                    oldestUnrecorded = nil
                    let batch = work.takeOutcomes()
                    group.addTask {
                        do {
                            try await self.relay.store.recordOutcomes(batch, at: self.relay.now())
                            inbox.put(.recorded)
                        } catch {
                            inbox.put(.failed(error, unrecorded: batch))
                        }
                        self.relay.outboxSignal.signal()
                    }
                }
                if !claiming, !stopping, storeAvailable, state.queued < lowWater, claimAgain || relay.outboxSignal.takeQueued() {
                    claiming = true
                    group.addTask {
                        do {
                            let now = self.relay.now()
                            let batch = try await self.relay.store.claimDeliveries(
                                dueBy: now, limit: self.policy.batchSize, leaseUntil: now + self.policy.lease)
                            inbox.put(.claimed(batch))
                        } catch {
                            inbox.put(.failed(error, unrecorded: nil))
                        }
                        self.relay.outboxSignal.signal()
                    }
                }
                let idle = quiet && !claiming && !recording && state.unrecorded == 0
                if idle, stopping || stopWhenIdle { return }
                // Nothing to do until a batch is claimed or recorded, the queue runs low, outcomes
                // pile up, more is queued, or a retry comes due.
                var wait = Duration.seconds(1)
                if idle, !backoff.isFailing, let next = try? await relay.store.nextDueDate() {
                    wait = min(wait, .milliseconds(max(1, min(1000, next.timeIntervalSince(relay.now()) * 1000))))
                }
                let pause = storePausedUntil - .now
                if pause > .zero { wait = min(wait, pause) }
                // Woken by its time, the loop claims (a retry may be due), unless that time was
                // only for recording outcomes.
                var claimAfterWait = true
                if let oldestUnrecorded, !recording {
                    let recordingDue = max(.milliseconds(1), oldestUnrecorded + policy.recordingDelay - .now, pause)
                    if recordingDue < wait { (wait, claimAfterWait) = (recordingDue, false) }
                }
                await relay.outboxSignal.wait(upTo: wait, thenClaim: claimAfterWait)
            }
        }
    }

    /// Failed recordings in a row after which a stopping dispatcher gives up on its outcomes.
    static let recordingAttemptsWhileStopping = 5

    private func send(_ delivery: DeliveryRecord) async -> DeliveryOutcome {
        let request: APNsRequest
        switch delivery.target {
        case .pushToStartToken(_, let hex), .activityToken(_, let hex):
            guard let token = try? DeviceToken(hex) else {
                return .failed(status: nil, reason: APNsReason.badDeviceToken.rawValue, tokenIsDead: true)
            }
            let options = PushOptions(
                priority: APNsPriority(rawValue: delivery.priority) ?? .immediate,
                expiration: delivery.expiration.flatMap { try? APNsExpiration(unixSeconds: $0) })
            request = .liveActivity(encoded: delivery.payload, to: token, topic: relay.configuration.bundleID, options: options)
        case .channel(let channelID):
            let options = BroadcastOptions(
                priority: APNsPriority(rawValue: delivery.priority) ?? .immediate,
                expiration: delivery.expiration.flatMap { try? APNsExpiration(unixSeconds: $0) } ?? .immediately)
            request = .broadcast(encoded: delivery.payload, channelID: channelID, bundleID: relay.configuration.bundleID, options: options)
        }
        let outcome: DeliveryOutcome
        do {
            let answer = try await apns.execute(request, timeout: policy.requestTimeout)
            if (200..<300).contains(answer.status) {
                outcome = .sent(status: answer.status, apnsID: answer.header("apns-id") ?? answer.header("apns-request-id"))
            } else {
                outcome = classify(APNsError(answer), attempts: delivery.attempts + 1)
            }
        } catch {
            outcome = retryOrGiveUp(status: nil, reason: "no answer: \(error)", attempts: delivery.attempts + 1)
        }
        record(outcome, delivery)
        return outcome
    }

    private func classify(_ error: APNsError, attempts: Int) -> DeliveryOutcome {
        let reason = error.reason.rawValue
        if error.status == 410 || error.reason == .badDeviceToken || error.reason == .deviceTokenNotForTopic
            || error.reason == .expiredToken || error.reason == .unregistered
        {
            return .failed(status: error.status, reason: reason, tokenIsDead: true)
        }
        switch error.advice {
        case .retryWithBackoff, .retryAfterDelay, .refreshTokenAndRetry:
            return retryOrGiveUp(status: error.status, reason: reason, attempts: attempts)
        case .dropToken:
            return .failed(status: error.status, reason: reason, tokenIsDead: true)
        case .fixRequest:
            return .failed(status: error.status, reason: reason, tokenIsDead: false)
        }
    }

    private func retryOrGiveUp(status: Int?, reason: String, attempts: Int) -> DeliveryOutcome {
        guard attempts < policy.maximumAttempts else {
            return .failed(status: status, reason: "\(reason) (gave up after \(attempts) attempts)", tokenIsDead: false)
        }
        return .retry(at: relay.now() + policy.backoff(afterAttempts: attempts), status: status, reason: reason)
    }

    private func record(_ outcome: DeliveryOutcome, _ delivery: DeliveryRecord) {
        let result: String
        switch outcome {
        case .sent: result = "sent"
        case .retry(_, let status, let reason):
            result = "retry"
            logger.info("push will be retried", metadata: Self.metadata(delivery, status, reason))
        case .failed(let status, let reason, let dead):
            result = dead ? "token_dead" : "failed"
            logger.warning("push failed", metadata: Self.metadata(delivery, status, reason))
        }
        relay.metrics.count("liverelay_pushes_total", ["event": delivery.event, "result": result])
    }

    private static func metadata(_ delivery: DeliveryRecord, _ status: Int?, _ reason: String) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "activity.key": "\(delivery.key)", "delivery": "\(delivery.id)", "apns.status": "\(status.map(String.init) ?? "-")",
            "apns.reason": "\(reason)",
        ]
        switch delivery.target {
        case .activityToken(_, let token), .pushToStartToken(_, let token): metadata["token"] = "\(DeviceToken.shortened(token))"
        case .channel(let id): metadata["channel"] = "\(id)"
        }
        return metadata
    }
}

/// The running dispatcher's door for the pushes an accepting request claimed itself (see
/// `HandOver`): a small request is sent at once, without a transaction to claim it.
final class DispatchHandOver: Sendable {
    struct Door: Sendable {
        /// Whether the dispatcher can take more now; when it is behind, requests queue their
        /// pushes instead, where newer ones can still supersede them.
        var hasRoom: @Sendable () -> Bool
        var take: @Sendable ([DeliveryRecord]) -> Void
    }

    private let door = Mutex<Door?>(nil)

    func open(_ door: Door) {
        self.door.withLock { $0 = door }
    }

    func close() {
        door.withLock { $0 = nil }
    }

    /// The hand-over for a request accepted at `now`, if a dispatcher runs with room.
    func offer(at now: Date, policy: DispatchPolicy) -> HandOver? {
        guard policy.handOverLimit > 0, let door = door.withLock({ $0 }), door.hasRoom() else { return nil }
        return HandOver(leaseUntil: now + policy.lease, limit: policy.handOverLimit)
    }

    /// Gives claimed pushes to the dispatcher. One that stopped meanwhile leaves them to their
    /// lease: they are due again when it runs out, or at the next start.
    func give(_ claimed: [DeliveryRecord]) {
        door.withLock { $0 }?.take(claimed)
    }
}

/// What the dispatcher's side tasks report to its loop.
private final class DispatchInbox: Sendable {
    enum Event: Sendable {
        case claimed([DeliveryRecord])
        case recorded
        /// A claim (`unrecorded` nil) or a recording failed; unrecorded outcomes are kept for the next one.
        case failed(any Error, unrecorded: [(id: Int64, outcome: DeliveryOutcome)]?)
    }

    private let events = Mutex<[Event]>([])

    func put(_ event: Event) {
        events.withLock { $0.append(event) }
    }

    func takeAll() -> [Event] {
        events.withLock { events in
            defer { events.removeAll(keepingCapacity: true) }
            return events
        }
    }
}

/// The claimed deliveries waiting for a worker, and the outcomes waiting to be recorded. Workers
/// wake the dispatcher's loop only when it has something to do: the queue ran low, outcomes piled
/// up (or the first came), or every worker fell idle.
private final class SendQueue: Sendable {
    typealias Outcome = (id: Int64, outcome: DeliveryOutcome)

    private struct State {
        var queue: [DeliveryRecord] = []
        var head = 0
        var sending = 0
        var outcomes: [Outcome] = []
        var idleWorkers: [CheckedContinuation<DeliveryRecord?, Never>] = []
        var stopped = false
        var queued: Int { queue.count - head }
    }

    private let state = Mutex(State())
    private let wake: OutboxSignal

    init(wake: OutboxSignal) {
        self.wake = wake
    }

    /// The next delivery to send, or nil once stopped.
    func next(lowWater: Int) async -> DeliveryRecord? {
        await withCheckedContinuation { continuation in
            // Resumed here with a delivery or nil, or later by `add` or `stop`, never twice.
            let (answer, wakeLoop) = state.withLock { state -> (DeliveryRecord??, Bool) in
                if state.stopped { return (.some(nil), false) }
                guard state.head < state.queue.count else {
                    state.idleWorkers.append(continuation)
                    return (nil, state.sending == 0)
                }
                let delivery = state.queue[state.head]
                state.head += 1
                state.sending += 1
                return (delivery, state.queued == lowWater)
            }
            if wakeLoop { wake.signal() }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    func finished(_ id: Int64, _ outcome: DeliveryOutcome, recordAt: Int) {
        let wakeLoop = state.withLock { state in
            state.sending -= 1
            state.outcomes.append((id, outcome))
            return state.outcomes.count == 1 || state.outcomes.count == recordAt || (state.sending == 0 && state.queued == 0)
        }
        if wakeLoop { wake.signal() }
    }

    func add(_ batch: [DeliveryRecord]) {
        let handedOut = state.withLock { state -> [(CheckedContinuation<DeliveryRecord?, Never>, DeliveryRecord)] in
            state.queue.removeFirst(state.head)
            state.head = 0
            state.queue += batch
            var handedOut: [(CheckedContinuation<DeliveryRecord?, Never>, DeliveryRecord)] = []
            while !state.idleWorkers.isEmpty, state.head < state.queue.count {
                handedOut.append((state.idleWorkers.removeLast(), state.queue[state.head]))
                state.head += 1
                state.sending += 1
            }
            return handedOut
        }
        for (worker, delivery) in handedOut { worker.resume(returning: delivery) }
    }

    /// Workers stop taking deliveries; those waiting for one end.
    func stop() {
        let idle = state.withLock { state in
            state.stopped = true
            defer { state.idleWorkers.removeAll() }
            return state.idleWorkers
        }
        for worker in idle { worker.resume(returning: nil) }
    }

    func counts() -> (queued: Int, sending: Int, unrecorded: Int) {
        state.withLock { ($0.queued, $0.sending, $0.outcomes.count) }
    }

    func takeOutcomes() -> [Outcome] {
        state.withLock { state in
            defer { state.outcomes.removeAll(keepingCapacity: true) }
            return state.outcomes
        }
    }

    /// Outcomes a recording failed to store, kept for the next.
    func putBack(_ outcomes: [Outcome]) {
        state.withLock { $0.outcomes.insert(contentsOf: outcomes, at: 0) }
    }
}

/// Runs what time does on its own (schedules, expiry, channel cleanup) once a second.
public struct RelayTicker: Service {
    let relay: RelayService
    let interval: Duration

    public init(relay: RelayService, interval: Duration = .seconds(1)) {
        self.relay = relay
        self.interval = interval
    }

    public func run() async throws {
        var backoff = StoreBackoff(initial: interval, maximum: .seconds(30))
        while !Task.isShuttingDownGracefully {
            var wait = interval
            do {
                try await relay.tick()
                relay.logger.log(backoff.succeeded(), who: "the ticker")
            } catch {
                let failed = backoff.failed()
                wait = failed.wait
                relay.logger.log(failed.change, who: "the ticker", error: error)
                relay.metrics.count("liverelay_store_failures_total", ["loop": "ticker"])
            }
            let pause = wait
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: pause) }
        }
    }
}

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
