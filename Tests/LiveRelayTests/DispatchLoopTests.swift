import Testing

@testable import LiveRelay

/// The dispatcher's decisions, without a store, a network or a clock: time is an instant the
/// test moves.
@Suite struct DispatchLoopTests {
    static let t0 = ContinuousClock.now
    static let limits = DispatchLoop.Limits(batchSize: 100, lowWater: 60, recordingDelay: .milliseconds(10))

    static func loop(stopWhenIdle: Bool = false) -> DispatchLoop {
        DispatchLoop(limits: limits, stopWhenIdle: stopWhenIdle, now: t0)
    }

    static func seen(
        queued: Int = 0, sending: Int = 0, unrecorded: Int = 0, at offset: Duration = .zero, stopping: Bool = false
    ) -> DispatchLoop.Snapshot {
        .init(queued: queued, sending: sending, unrecorded: unrecorded, now: t0 + offset, stopping: stopping)
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
    }

    @Test func outcomesWaitTheRecordingDelayUnlessHalfABatchPilesUp() {
        var loop = Self.loop()
        _ = loop.next(Self.seen(), queuedSinceLastClaim: { false })
        _ = loop.claimed(count: 10)
        let first = loop.next(Self.seen(queued: 0, sending: 9, unrecorded: 1), queuedSinceLastClaim: { false })
        #expect(!first.record)
        // The wait ends when the oldest outcome is due, and then only to record.
        let wait = loop.wait(at: Self.t0 + .milliseconds(4), nextDueIn: nil)
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
        #expect(loop.wait(at: Self.t0, nextDueIn: .milliseconds(250)) == (.milliseconds(250), true))
        #expect(loop.wait(at: Self.t0, nextDueIn: .seconds(30)) == (.seconds(1), true))
        #expect(loop.wait(at: Self.t0, nextDueIn: .seconds(-3)) == (.milliseconds(1), true))
        #expect(loop.wait(at: Self.t0, nextDueIn: nil) == (.seconds(1), true))
    }

    @Test func aFailingStoreIsWaitedOutDoublingAndItsRecoveryIsToldOnce() {
        var loop = Self.loop()
        _ = loop.next(Self.seen(), queuedSinceLastClaim: { true })
        #expect(loop.storeFailed(whileRecording: false, stopping: false, at: Self.t0) == .init(change: .startedFailing, keepOutcomes: false))
        // Paused for 50 ms: no claim, no question to the store, and the wait ends with the pause.
        let paused = loop.next(Self.seen(at: .milliseconds(20)), queuedSinceLastClaim: { true })
        #expect(!paused.claim && !paused.askNextDue)
        #expect(loop.wait(at: Self.t0 + .milliseconds(20), nextDueIn: nil) == (.milliseconds(30), true))
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
