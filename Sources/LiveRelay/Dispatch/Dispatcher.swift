import APNs
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import ServiceLifecycle
import Synchronization

/// Sends what the outbox holds: keeps up to `concurrency` pushes in flight, claiming due
/// deliveries as slots free up, so that one slow or hung push never holds back the others; records
/// outcomes in batches as they come. What an answer means is `DeliveryOutcomeRules`' decision (a
/// retry with backoff, a dead token, a dead letter); when to claim and record is `DispatchLoop`'s.
/// Each push goes for its app, signed with the app's credentials, to its token's (or channel's)
/// APNs environment, through the client of that pair. The APNs client itself refreshes the
/// provider token on `ExpiredProviderToken`.
package final class Dispatcher: Service {
    private let context: DispatchContext
    /// Where the workers run: the APNs connections' event loop.
    private let executor: any TaskExecutor
    private var policy: DispatchPolicy { context.policy }
    private var outcomes: DeliveryOutcomeRules { DeliveryOutcomeRules(policy: policy) }
    private var logger: Logger { context.logger }
    private var outbox: any OutboxStore & SessionAndLeaseStore { context.outbox }

    package init(context: DispatchContext, apns: APNsRoutes) {
        self.context = context
        self.executor = apns.pushExecutor
    }

    package func run() async throws {
        // No claim survives a restart: what was in flight when the process died is due again.
        // A store that fails now is waited for, as the loop waits for it later.
        var backoff = StoreBackoff()
        while true {
            do {
                try await outbox.releaseClaims(at: context.now())
                logger.log(backoff.succeeded(), who: "the dispatcher")
                break
            } catch {
                // Cancellation is how the service group stops this loop, never a store failure.
                if Task.isCancelled { return }
                let (wait, change) = backoff.failed()
                logger.log(change, who: "the dispatcher", error: error)
                context.metrics.count(Metric.storeFailuresTotal, ["loop": "dispatcher"])
                guard await StoreBackoff.pause(for: wait) else { return }
            }
        }
        try await withThrowingDiscardingTaskGroup { group in
            group.addTask { await self.hearOtherInstances() }
            try await pump(stopWhenIdle: false)
            group.cancelAll()
        }
    }

    /// Wakes this dispatcher when another instance sharing the store queues pushes (a large
    /// fan-out), so that every instance helps send them without polling; until cancelled.
    private func hearOtherInstances() async {
        var backoff = StoreBackoff()
        let signal = context.signal
        while !Task.isCancelled {
            do {
                try await outbox.watchOutbox { signal.queued() }
                return
            } catch {
                if Task.isCancelled { return }
                let (wait, change) = backoff.failed()
                logger.log(change, who: "the outbox listener", error: error)
                guard await StoreBackoff.pause(for: wait) else { return }
            }
        }
    }

    /// Sends until nothing is due now and nothing is in flight (tests, benchmarks).
    package func drain() async throws {
        try await pump(stopWhenIdle: true)
    }

    /// The send loop. Workers take claimed deliveries from a local queue and send them, as many at
    /// once as `InFlightSizing` says from the round trips and rates it measures (on the
    /// connections' event loop, where a push is written and its answer read with no hop between
    /// threads: that hop cost more than our HTTP/2 framing). This loop only starts workers as the
    /// limit grows, refills the queue and records outcomes in batches, each in a side task, so the
    /// workers never wait on the database and a large fan-out costs few transactions. When to do
    /// which is `DispatchLoop`'s decision; this performs it. On graceful shutdown it stops claiming,
    /// gives back the claimed pushes not started yet (due again at once), and lets the pushes in
    /// flight finish, so that their outcomes are recorded.
    private func pump(stopWhenIdle: Bool) async throws {
        let inbox = DispatchInbox()
        let limits = DispatchLoop.Limits(batchSize: policy.batchSize, recordingDelay: policy.recordingDelay)
        let work = SendQueue(
            wake: context.signal, limits: limits,
            sizing: InFlightSizing(floor: policy.inFlight.lowerBound, ceiling: policy.inFlight.upperBound, now: .now),
            wakeWhenIdle: stopWhenIdle)
        var loop = DispatchLoop(limits: limits, stopWhenIdle: stopWhenIdle, now: .now)
        if !stopWhenIdle {
            context.handOver.open(
                .init(
                    hasRoom: {
                        let counts = work.counts()
                        return counts.queued < counts.inFlightLimit
                    }, take: { work.add($0) }))
        }
        try await withThrowingDiscardingTaskGroup { group in
            var workers = 0
            defer {
                context.handOver.close()
                work.stop()
            }
            while true {
                let stopping = Task.isShuttingDownGracefully || Task.isCancelled
                if stopping {
                    context.handOver.close()
                    work.stop()
                }
                for event in inbox.takeAll() { take(event, loop: &loop, work: work, stopping: stopping) }
                let counts = work.counts()
                while !stopping && workers < counts.inFlightLimit {
                    workers += 1
                    group.addTask(executorPreference: executor) { await self.sendWhatComes(from: work) }
                }
                context.metrics.noteSending(
                    .init(inFlightLimit: counts.inFlightLimit, inFlight: counts.sending, shortestRoundTrip: counts.shortestRoundTrip))
                let step = loop.next(
                    .init(
                        queued: counts.queued, sending: counts.sending, unrecorded: counts.unrecorded,
                        inFlightLimit: counts.inFlightLimit, now: .now, stopping: stopping),
                    queuedSinceLastClaim: context.signal.takeQueued)
                if step.record {
                    let (batch, abandoned, released) = work.takeOutcomes()
                    group.addTask { await self.record(batch, givingBack: abandoned, released: released, reportingTo: inbox) }
                }
                if step.claim { group.addTask { await self.claim(reportingTo: inbox) } }
                if step.finish { return }
                // Nothing to do until a batch is claimed or recorded, the queue runs low, outcomes
                // pile up, more is queued, or a retry comes due.
                if step.askNextDue { await askWhenNextDue(&loop) }
                let wait = loop.wait(at: .now)
                await context.signal.wait(upTo: wait.duration, thenClaim: wait.thenClaim)
            }
        }
    }

    /// A worker: sends the claimed pushes the queue gives it, one at a time, until it stops.
    private func sendWhatComes(from work: SendQueue) async {
        while let (delivery, sending) = await work.next() {
            // Claimed pushes wait here while the instance sends slower than it claims.
            guard policy.maySend(leasedUntil: delivery.nextAttemptAt, at: context.now()) else {
                work.abandon(delivery, sending)
                continue
            }
            let (outcome, roundTrip) = await RelayTracing.dispatching(delivery) { await send(delivery) }
            work.finished(delivery.id, outcome, sending, roundTrip: roundTrip, at: .now)
        }
    }

    /// What a side task reported: a batch claimed, outcomes recorded, or the store failing.
    private func take(_ event: DispatchInbox.Event, loop: inout DispatchLoop, work: SendQueue, stopping: Bool) {
        switch event {
        case .claimed(let batch):
            work.add(batch)
            logger.log(loop.claimed(count: batch.count), who: "the dispatcher")
        case .recorded(let retries):
            logger.log(loop.recorded(retries: retries), who: "the dispatcher")
        case .failed(let error, let unrecorded):
            let failure = loop.storeFailed(whileRecording: unrecorded != nil, stopping: stopping, at: .now)
            // Cancelled, the store's work was interrupted: that is no store failure.
            if !Task.isCancelled {
                logger.log(failure.change, who: "the dispatcher", error: error)
                context.metrics.count(Metric.storeFailuresTotal, ["loop": "dispatcher"])
            }
            if let unrecorded {
                if failure.keepOutcomes {
                    work.putBack(unrecorded)
                } else {
                    logger.error("outcomes not recorded at shutdown; their pushes will be sent again", metadata: ["count": "\(unrecorded.count)"])
                }
            }
        }
    }

    /// Records a batch of outcomes, after giving back the pushes abandoned unsent and those
    /// released at a stop (a side task).
    private func record(
        _ batch: [(id: Int64, outcome: DeliveryOutcome)], givingBack abandoned: [DeliveryRecord], released: [DeliveryRecord],
        reportingTo inbox: DispatchInbox
    ) async {
        await giveBack(abandoned, because: .sendingSlowerThanClaiming)
        await giveBack(released, because: .stopping)
        do {
            try await outbox.recordOutcomes(batch, at: context.now())
            context.noteChange()
            inbox.put(.recorded(retries: batch.contains { $0.outcome.isRetry }))
        } catch {
            inbox.put(.failed(error, unrecorded: batch))
        }
        context.signal.signal()
    }

    /// Claims a batch of due pushes (a side task).
    private func claim(reportingTo inbox: DispatchInbox) async {
        do {
            let now = context.now()
            inbox.put(.claimed(try await outbox.claimDeliveries(dueBy: now, limit: policy.batchSize, leaseUntil: now + policy.lease)))
        } catch {
            inbox.put(.failed(error, unrecorded: nil))
        }
        context.signal.signal()
    }

    /// Learns when the next queued push is due; a store that fails is asked again next time round.
    private func askWhenNextDue(_ loop: inout DispatchLoop) async {
        let next: Date?
        do { next = try await outbox.nextDueDate() } catch { return }
        let now = ContinuousClock.now
        if loop.learned(nextDue: next.map { now + .milliseconds($0.timeIntervalSince(context.now()) * 1000) }, at: now) {
            context.signal.queued()
        }
    }

    /// Gives claimed pushes back unsent, due again at once; where the store fails, their leases
    /// run out instead.
    /// Why claimed pushes go back to the store unsent.
    private enum GivingBack {
        /// Their lease would run out before a worker came to them.
        case sendingSlowerThanClaiming
        /// The dispatcher stops: due again at once, for another instance or the next start.
        case stopping
    }

    private func giveBack(_ abandoned: [DeliveryRecord], because reason: GivingBack) async {
        guard !abandoned.isEmpty else { return }
        let now = context.now()
        for (leasedUntil, deliveries) in Dictionary(grouping: abandoned, by: \.nextAttemptAt) {
            do {
                try await outbox.abandonClaims(deliveries.map(\.id), leasedUntil: leasedUntil, at: now)
            } catch {
                logger.warning("claimed pushes not given back; due when their lease runs out", metadata: ["error": "\(error)"])
            }
        }
        switch reason {
        case .sendingSlowerThanClaiming:
            context.metrics.count(Metric.claimsAbandonedTotal, [:], by: abandoned.count)
            logger.warning(
                "claimed pushes given back unsent: this instance sends slower than it claims for its lease (--claim-lease)",
                metadata: ["count": "\(abandoned.count)"])
        case .stopping:
            logger.notice("claimed pushes given back unsent at shutdown: due again at once", metadata: ["count": "\(abandoned.count)"])
        }
        context.signal.queued()
    }

    /// Sends one push; `roundTrip`: how long APNs took to answer it, nil when it did not.
    private func send(_ delivery: DeliveryRecord) async -> (outcome: DeliveryOutcome, roundTrip: Duration?) {
        let apns: APNsClient
        let topic: BundleID
        do {
            (apns, topic) = try await context.route(delivery)
        } catch {
            // The app is gone, its key cannot sign, or the server no longer sends to the
            // environment: a dead letter that says so. A store that fails is tried again.
            let outcome =
                error is RelayError || error is LiveActivityValidationError
                ? DeliveryOutcome.failed(status: nil, reason: "\(error)", tokenIsDead: false)
                : outcomes.outcome(ofNoAnswer: error, attempts: delivery.attempts + 1, at: context.now())
            record(outcome, delivery)
            return (outcome, nil)
        }
        let request: APNsRequest
        switch delivery.target {
        case .pushToStartToken(_, let hex), .activityToken(_, let hex):
            guard let token = try? DeviceToken(hex) else {
                return (.failed(status: nil, reason: APNsReason.badDeviceToken.rawValue, tokenIsDead: true), nil)
            }
            let options = PushOptions(
                priority: delivery.priority,
                expiration: delivery.expiration.flatMap { try? APNsExpiration(unixSeconds: $0) })
            request = .liveActivity(encoded: delivery.payload, to: token, topic: topic, options: options)
        case .channel(let channelID):
            let options = BroadcastOptions(
                priority: delivery.priority,
                expiration: delivery.expiration.flatMap { try? APNsExpiration(unixSeconds: $0) } ?? .immediately)
            request = .broadcast(encoded: delivery.payload, channelID: channelID, bundleID: topic, options: options)
        case .surface(let type, _, let hex):
            guard let token = try? DeviceToken(hex) else {
                return (.failed(status: nil, reason: APNsReason.badDeviceToken.rawValue, tokenIsDead: true), nil)
            }
            let options = PushOptions(
                priority: delivery.priority, expiration: delivery.expiration.flatMap { try? APNsExpiration(unixSeconds: $0) })
            // Apple's one body, which is what the outbox kept; refused only at priority 1, which the API never queues.
            guard let built = try? APNsRequest.reload(type, to: token, topic: topic, options: options) else {
                return (.failed(status: nil, reason: "a reload push cannot be built", tokenIsDead: false), nil)
            }
            request = built
        }
        let outcome: DeliveryOutcome
        var roundTrip: Duration?
        do {
            let answer = try await RelayTracing.exchanging(delivery) { try await apns.execute(request, timeout: policy.requestTimeout) }
            roundTrip = answer.roundTrip
            if let roundTrip { context.metrics.noteExchange(in: delivery.environment, roundTrip: roundTrip) }
            if (200..<300).contains(answer.status) {
                outcome = .sent(status: answer.status, apnsID: answer.header("apns-id") ?? answer.header("apns-request-id"))
            } else {
                outcome = outcomes.outcome(of: APNsError(answer), attempts: delivery.attempts + 1, at: context.now())
            }
        } catch {
            outcome = outcomes.outcome(ofNoAnswer: error, attempts: delivery.attempts + 1, at: context.now())
        }
        record(outcome, delivery)
        return (outcome, roundTrip)
    }

    private func record(_ outcome: DeliveryOutcome, _ delivery: DeliveryRecord) {
        let result: RelayMetrics.PushResult
        switch outcome {
        case .sent: result = .sent
        case .retry(_, let status, let reason):
            result = .retry
            logger.info("push will be retried", metadata: Self.metadata(delivery, status, reason))
        case .failed(let status, let reason, let dead):
            result = dead ? .tokenDead : .failed
            logger.warning("push failed", metadata: Self.metadata(delivery, status, reason))
        }
        context.metrics.notePush(
            delivery.event, result, acceptedAt: delivery.createdAt, requestID: delivery.requestID, at: context.now())
    }

    private static func metadata(_ delivery: DeliveryRecord, _ status: Int?, _ reason: String) -> Logger.Metadata {
        var metadata: Logger.Metadata = [
            "app": "\(delivery.bundleID)", "activity.key": "\(delivery.key)", "delivery": "\(delivery.id)",
            "apns.status": "\(status.map(String.init) ?? "-")",
            "apns.reason": "\(reason)", "apns.environment": "\(delivery.environment.rawValue)",
        ]
        switch delivery.target {
        case .activityToken(_, let token), .pushToStartToken(_, let token), .surface(_, _, let token):
            metadata["token"] = "\(DeviceToken.shortened(token))"
        case .channel(let id): metadata["channel"] = "\(id)"
        }
        return metadata
    }
}

/// What the dispatcher's side tasks report to its loop.
final class DispatchInbox: Sendable {
    enum Event: Sendable {
        case claimed([DeliveryRecord])
        case recorded(retries: Bool)
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
