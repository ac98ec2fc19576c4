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
        try await relay.store.releaseClaims(at: relay.now())
        try await pump(stopWhenIdle: false)
    }

    /// Sends until nothing is due now and nothing is in flight (tests, benchmarks).
    public func drain() async throws {
        try await pump(stopWhenIdle: true)
    }

    /// The send loop. Claims due deliveries a batch at a time into a local queue, keeps up to
    /// `concurrency` of them in flight, and records outcomes a batch at a time (at once when there
    /// is nothing else to do). Claiming and recording run beside the sends, never in their way, so
    /// a large fan-out keeps APNs busy and costs few transactions. Sleeps until a push finishes, a
    /// request queues more, or the next retry is due. On graceful shutdown it stops claiming and
    /// lets the pushes in flight finish, so that their outcomes are recorded; claimed pushes not
    /// started yet wait for their lease to run out (or the next start).
    private func pump(stopWhenIdle: Bool) async throws {
        let inbox = DispatchInbox()
        try await withThrowingDiscardingTaskGroup { group in
            var queue: [DeliveryRecord] = []
            var nextInQueue = 0
            var inFlight = 0
            var outcomes: [(id: Int64, outcome: DeliveryOutcome)] = []
            var claiming = false, recording = false
            // Claiming again is worth a transaction only when the last claim was full or more was
            // queued since; a finished push alone does not make anything due.
            var claimAgain = true
            while true {
                let stopping = Task.isShuttingDownGracefully || Task.isCancelled
                var progressed = false
                for event in inbox.takeAll() {
                    progressed = true
                    switch event {
                    case .finished(let id, let outcome):
                        inFlight -= 1
                        outcomes.append((id, outcome))
                    case .claimed(let batch):
                        claiming = false
                        queue.removeFirst(nextInQueue)
                        nextInQueue = 0
                        queue += batch
                        claimAgain = batch.count == policy.batchSize
                    case .recorded:
                        recording = false
                    case .failed(let error, let unrecorded):
                        logger.error("dispatch failed", metadata: ["error": "\(error)"])
                        if let unrecorded {
                            recording = false
                            outcomes += unrecorded
                        } else {
                            claiming = false
                        }
                    }
                }
                while !stopping, inFlight < policy.concurrency, nextInQueue < queue.count {
                    let delivery = queue[nextInQueue]
                    nextInQueue += 1
                    inFlight += 1
                    progressed = true
                    group.addTask {
                        inbox.put(.finished(delivery.id, await self.send(delivery)))
                        self.relay.outboxSignal.signal()
                    }
                }
                let waiting = queue.count - nextInQueue
                if !recording, !outcomes.isEmpty, outcomes.count >= policy.batchSize / 2 || waiting == 0 || stopping {
                    recording = true
                    let batch = outcomes
                    outcomes.removeAll(keepingCapacity: true)
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
                if !claiming, !stopping, waiting < policy.concurrency, claimAgain || relay.outboxSignal.takeQueued() {
                    claiming = true
                    progressed = true
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
                if progressed { continue }
                let idle = inFlight == 0 && !claiming && !recording && outcomes.isEmpty
                if idle, stopping || (stopWhenIdle && waiting == 0) { return }
                // Nothing to do until a push finishes, more is queued, or a retry comes due.
                let next = idle && !stopping ? try? await relay.store.nextDueDate() : nil
                let wait = min(1, max(0.001, (next ?? .distantFuture).timeIntervalSince(relay.now())))
                await relay.outboxSignal.wait(upTo: .milliseconds(Int(wait * 1000)))
            }
        }
    }

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

/// What the dispatcher's side tasks report to its loop.
private final class DispatchInbox: Sendable {
    enum Event: Sendable {
        case finished(Int64, DeliveryOutcome)
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

/// Runs what time does on its own (schedules, expiry, channel cleanup) once a second.
public struct RelayTicker: Service {
    let relay: RelayService
    let interval: Duration

    public init(relay: RelayService, interval: Duration = .seconds(1)) {
        self.relay = relay
        self.interval = interval
    }

    public func run() async throws {
        while !Task.isShuttingDownGracefully {
            do { try await relay.tick() } catch { relay.logger.error("tick failed", metadata: ["error": "\(error)"]) }
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
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

    /// Whether `queued()` was called since the last time this was asked.
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

    /// Returns when signalled (or already signalled since the last wait), or after `limit`, when
    /// whatever was waiting for its time may have come due.
    func wait(upTo limit: Duration) async {
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
                if !Task.isCancelled { self.queued() }
            }
            await group.next()
            group.cancelAll()
        }
    }
}
