import Testing

@testable import LiveRelay

/// The dispatcher's decisions, without a store, a network or a clock: time is an instant the
/// test moves.
@Suite struct DispatchLoopTests {
    static let t0 = ContinuousClock.now
    static let limits = DispatchLoop.Limits(batchSize: 100, recordingDelay: .milliseconds(10))

    static func loop(stopWhenIdle: Bool = false) -> DispatchLoop {
        DispatchLoop(limits: limits, stopWhenIdle: stopWhenIdle, now: t0)
    }

    static func seen(
        queued: Int = 0, sending: Int = 0, unrecorded: Int = 0, inFlightLimit: Int = 10, at offset: Duration = .zero, stopping: Bool = false
    ) -> DispatchLoop.Snapshot {
        // Low water: 10 in flight and half a batch, 60.
        .init(queued: queued, sending: sending, unrecorded: unrecorded, inFlightLimit: inFlightLimit, now: t0 + offset, stopping: stopping)
    }

    /// Counts how often the loop asks whether more was queued.
    final class News {
        var queued: Bool
        var asked = 0
        init(_ queued: Bool) { self.queued = queued }
        func take() -> Bool {
            asked += 1
            defer { queued = false }
            return queued
        }
    }

    @Test func itClaimsAtOnceThenNotWhileAClaimIsInFlight() {
        var loop = Self.loop()
        let news = News(false)
        #expect(loop.next(Self.seen(), queuedSinceLastClaim: news.take).claim)
        #expect(!loop.next(Self.seen(), queuedSinceLastClaim: news.take).claim)
        #expect(news.asked == 0)
    }

    @Test func aFullBatchIsFollowedByAnotherClaimAPartialOneOnlyByNews() {
        var loop = Self.loop()
        _ = loop.next(Self.seen(), queuedSinceLastClaim: { false })
        _ = loop.claimed(count: 100)
        #expect(loop.next(Self.seen(queued: 59, sending: 41), queuedSinceLastClaim: { false }).claim)
        _ = loop.claimed(count: 3)
        let news = News(false)
        #expect(!loop.next(Self.seen(queued: 3), queuedSinceLastClaim: news.take).claim)
        news.queued = true
        #expect(loop.next(Self.seen(queued: 3), queuedSinceLastClaim: news.take).claim)
        #expect(news.asked == 2)
    }

    @Test func itDoesNotClaimWhileTheQueueIsAboveLowWaterNorAskForNewsThen() {
        var loop = Self.loop()
        let news = News(true)
        #expect(!loop.next(Self.seen(queued: 60), queuedSinceLastClaim: news.take).claim)
        #expect(news.asked == 0)
        #expect(news.queued)
        #expect(loop.next(Self.seen(queued: 60, inFlightLimit: 11), queuedSinceLastClaim: news.take).claim, "more in flight, more queued")
    }

    @Test func outcomesWaitTheRecordingDelayUnlessHalfABatchPilesUp() {
        var loop = Self.loop()
        _ = loop.next(Self.seen(), queuedSinceLastClaim: { false })
        _ = loop.claimed(count: 10)
        let first = loop.next(Self.seen(queued: 0, sending: 9, unrecorded: 1), queuedSinceLastClaim: { false })
        #expect(!first.record)
        // The wait ends when the oldest outcome is due, and then only to record.
        let wait = loop.wait(at: Self.t0 + .milliseconds(4))
        #expect(wait.duration == .milliseconds(6))
        #expect(!wait.thenClaim)
        #expect(loop.next(Self.seen(sending: 8, unrecorded: 2, at: .milliseconds(10)), queuedSinceLastClaim: { false }).record)
        // Only one recording at a time.
        #expect(!loop.next(Self.seen(sending: 1, unrecorded: 50, at: .milliseconds(11)), queuedSinceLastClaim: { false }).record)
        _ = loop.recorded()
        #expect(loop.next(Self.seen(sending: 1, unrecorded: 50, at: .milliseconds(11)), queuedSinceLastClaim: { false }).record)
    }

    @Test func stoppingItRecordsAtOnceNeverClaimsAndFinishesWhenIdle() {
        var loop = Self.loop()
        let stepping = loop.next(Self.seen(sending: 2, unrecorded: 1, stopping: true), queuedSinceLastClaim: { true })
        #expect(stepping.record && !stepping.claim && !stepping.finish)
        #expect(!loop.next(Self.seen(stopping: true), queuedSinceLastClaim: { true }).finish)  // still recording
        _ = loop.recorded()
        let last = loop.next(Self.seen(stopping: true), queuedSinceLastClaim: { true })
        #expect(last.finish && !last.claim)
    }

    @Test func drainingItFinishesOnceNothingIsDueOrInFlight() {
        var loop = Self.loop(stopWhenIdle: true)
        _ = loop.next(Self.seen(), queuedSinceLastClaim: { false })
        _ = loop.claimed(count: 2)
        #expect(!loop.next(Self.seen(sending: 2), queuedSinceLastClaim: { false }).finish)
        // Quiet: what is left is recorded at once, without the delay.
        #expect(loop.next(Self.seen(unrecorded: 2), queuedSinceLastClaim: { false }).record)
        _ = loop.recorded()
        #expect(loop.next(Self.seen(), queuedSinceLastClaim: { false }).finish)
    }

    @Test func idleItAsksTheStoreForTheNextRetryAndWaitsUntilThenWithinASecond() {
        var loop = Self.loop()
        _ = loop.next(Self.seen(), queuedSinceLastClaim: { false })
        _ = loop.claimed(count: 0)
        let idle = loop.next(Self.seen(), queuedSinceLastClaim: { false })
        #expect(idle.askNextDue && !idle.finish)
        #expect(loop.wait(at: Self.t0) == (.seconds(1), true))
        var dueNow = loop.learned(nextDue: Self.t0 + .milliseconds(250), at: Self.t0)
        #expect(!dueNow && loop.wait(at: Self.t0) == (.milliseconds(250), true))
        dueNow = loop.learned(nextDue: Self.t0 + .seconds(30), at: Self.t0)
        #expect(!dueNow && loop.wait(at: Self.t0) == (.seconds(1), true))
        dueNow = loop.learned(nextDue: nil, at: Self.t0)
        #expect(!dueNow && loop.wait(at: Self.t0) == (.seconds(1), true))
        // Due already: claim at once (the dispatcher signals it); the wait is not shortened by it,
        // which would spin while a claim or sending goes on.
        dueNow = loop.learned(nextDue: Self.t0 - .seconds(3), at: Self.t0)
        #expect(dueNow)
        #expect(loop.wait(at: Self.t0) == (.seconds(1), true))
    }

    @Test func theStoreIsAskedAgainOnlyAfterARecordedRetryOrOnceTheRetryItNamedIsDue() {
        var loop = Self.loop()
        _ = loop.next(Self.seen(), queuedSinceLastClaim: { false })
        _ = loop.claimed(count: 0)
        #expect(loop.next(Self.seen(), queuedSinceLastClaim: { false }).askNextDue)
        _ = loop.learned(nextDue: nil, at: Self.t0)
        // Nothing due later: pushes sent and recorded since change nothing.
        #expect(!loop.next(Self.seen(at: .milliseconds(5)), queuedSinceLastClaim: { false }).askNextDue)
        _ = loop.next(Self.seen(unrecorded: 1, at: .milliseconds(20)), queuedSinceLastClaim: { false })
        _ = loop.recorded(retries: false)
        #expect(!loop.next(Self.seen(at: .milliseconds(21)), queuedSinceLastClaim: { false }).askNextDue)
        // A recorded retry may be the next due.
        _ = loop.next(Self.seen(unrecorded: 1, at: .milliseconds(40)), queuedSinceLastClaim: { false })
        _ = loop.recorded(retries: true)
        #expect(loop.next(Self.seen(at: .milliseconds(41)), queuedSinceLastClaim: { false }).askNextDue)
        _ = loop.learned(nextDue: Self.t0 + .milliseconds(500), at: Self.t0 + .milliseconds(41))
        #expect(!loop.next(Self.seen(at: .milliseconds(499)), queuedSinceLastClaim: { false }).askNextDue)
        #expect(loop.wait(at: Self.t0 + .milliseconds(499)) == (.milliseconds(1), true))
        // Once it is due (and claimed), what comes after it is asked for.
        #expect(loop.next(Self.seen(at: .milliseconds(500)), queuedSinceLastClaim: { true }).claim)
        _ = loop.claimed(count: 1)
        #expect(loop.next(Self.seen(at: .milliseconds(502)), queuedSinceLastClaim: { false }).askNextDue)
        // Busy, a retry named earlier and due by now does not shorten the wait.
        #expect(loop.next(Self.seen(queued: 80, sending: 20, at: .milliseconds(503)), queuedSinceLastClaim: { false }).claim == false)
        #expect(loop.wait(at: Self.t0 + .milliseconds(503)) == (.seconds(1), true))
    }

    @Test func aFailingStoreIsWaitedOutDoublingAndItsRecoveryIsToldOnce() {
        var loop = Self.loop()
        _ = loop.next(Self.seen(), queuedSinceLastClaim: { true })
        #expect(loop.storeFailed(whileRecording: false, stopping: false, at: Self.t0) == .init(change: .startedFailing, keepOutcomes: false))
        // Paused for 50 ms: no claim, no question to the store, and the wait ends with the pause.
        let paused = loop.next(Self.seen(at: .milliseconds(20)), queuedSinceLastClaim: { true })
        #expect(!paused.claim && !paused.askNextDue)
        #expect(loop.wait(at: Self.t0 + .milliseconds(20)) == (.milliseconds(30), true))
        #expect(loop.next(Self.seen(at: .milliseconds(50)), queuedSinceLastClaim: { true }).claim)
        #expect(loop.storeFailed(whileRecording: false, stopping: false, at: Self.t0 + .milliseconds(50)).change == nil)
        #expect(!loop.next(Self.seen(at: .milliseconds(149)), queuedSinceLastClaim: { true }).claim)
        #expect(loop.next(Self.seen(at: .milliseconds(150)), queuedSinceLastClaim: { true }).claim)
        #expect(loop.claimed(count: 0) == .recovered(failures: 2))
        #expect(loop.recorded() == nil)
    }

    @Test func aFailedRecordingKeepsItsOutcomesUntilAStoppingDispatcherGivesUp() {
        var loop = Self.loop()
        var moment = Self.t0
        _ = loop.next(Self.seen(unrecorded: 50, at: .zero), queuedSinceLastClaim: { false })
        #expect(loop.storeFailed(whileRecording: true, stopping: false, at: moment).keepOutcomes)
        for attempt in 2...5 {
            moment += .seconds(10)
            #expect(loop.next(Self.seen(unrecorded: 50, at: moment - Self.t0, stopping: true), queuedSinceLastClaim: { false }).record)
            #expect(loop.storeFailed(whileRecording: true, stopping: true, at: moment).keepOutcomes == (attempt < 5))
        }
    }
}
