import Testing

@testable import LiveRelay

/// How many pushes the dispatcher keeps in flight, from the round trips and rates it measures;
/// time is an instant the test moves.
@Suite struct InFlightSizingTests {
    static let t0 = ContinuousClock.now

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// An instance that can send `capacity` pushes a second, against APNs `roundTrip` away, with
    /// work always waiting, from `start` for `duration`: each push goes out as soon as the limit
    /// and the capacity allow, and is answered `roundTrip` later, or, when the far end can answer
    /// only `farEndRate` a second, once it has answered those sent before. Returns when it stopped.
    @discardableResult
    static func run(
        _ sizing: inout InFlightSizing, capacity: Double, roundTrip: Duration, farEndRate: Double? = nil,
        for duration: Duration, from start: Duration = .zero
    ) -> Duration {
        let step = Duration.seconds(1 / capacity)
        var inFlight: [(sent: Duration, due: Duration, sending: InFlightSizing.Sending)] = []
        var lastDue = start
        var now = start
        while now < start + duration {
            // Answers due by now come back, shortest first.
            while let first = inFlight.first, first.due <= now {
                inFlight.removeFirst()
                sizing.finished(first.sending, roundTrip: first.due - first.sent, at: t0 + first.due)
            }
            if inFlight.count < sizing.limit {
                let sending = sizing.sent(among: inFlight.count + 1)
                let due = max(now + roundTrip, farEndRate.map { lastDue + .seconds(1 / $0) } ?? .zero)
                lastDue = due
                inFlight.append((now, due, sending))
                now += step
            } else {
                now = inFlight.first!.due
            }
        }
        for answer in inFlight { sizing.finished(answer.sending, roundTrip: answer.due - answer.sent, at: t0 + answer.due) }
        return now
    }

    static func sizing(floor: Int = 800, ceiling: Int = 100_000) -> InFlightSizing {
        InFlightSizing(floor: floor, ceiling: ceiling, now: t0)
    }

    @Test func itStartsAtItsFloorAndStaysNearItOnLoopback() {
        var sizing = Self.sizing()
        #expect(sizing.limit == 800)
        Self.run(&sizing, capacity: 10_000, roundTrip: .microseconds(300), for: .seconds(3))
        // 800 + 2 × 10,000/s × 0.3 ms: what batching needs, and six more.
        #expect(sizing.shortestRoundTrip == .microseconds(300))
        #expect(sizing.limit == 806)
    }

    @Test(arguments: [Duration.milliseconds(20), .milliseconds(100), .milliseconds(300)])
    func atADistanceItGrowsUntilTheInstanceSendsAsFastAsItCan(roundTrip: Duration) {
        var sizing = Self.sizing()
        Self.run(&sizing, capacity: 10_000, roundTrip: roundTrip, for: .seconds(4))
        // The floor, and twice the round trip's worth at the fastest rate.
        let settled = 800 + Int((2 * 10_000 * Self.seconds(roundTrip)).rounded(.up))
        #expect(sizing.shortestRoundTrip == roundTrip)
        #expect(sizing.fastestRate == 10_000)
        #expect(sizing.limit == settled, "at \(roundTrip)")
        #expect(Double(sizing.limit) / Self.seconds(roundTrip) > 10_000, "the limit no longer holds the rate back")
    }

    @Test func aFarEndThatIsBusyIsNotReadAsDistance() {
        // On loopback, the far end answers 20,000 a second, the instance could send 30,000: with
        // 800 in flight each push waits 40 ms behind the others there. That wait grows with what
        // is in flight; taken for distance, it would raise the limit and with it the wait.
        var sizing = Self.sizing()
        Self.run(&sizing, capacity: 30_000, roundTrip: .microseconds(300), farEndRate: 20_000, for: .seconds(3))
        #expect(sizing.fastestRate > 19_000)
        #expect(sizing.shortestRoundTrip.map { $0 < .milliseconds(2) } == true, "\(String(describing: sizing.shortestRoundTrip))")
        #expect(sizing.limit < 900, "\(sizing.limit)")
        // The same far end 100 ms away: the distance is measured, and the limit lets the instance
        // send as fast as the far end answers.
        var far = Self.sizing()
        Self.run(&far, capacity: 30_000, roundTrip: .milliseconds(100), farEndRate: 20_000, for: .seconds(4))
        #expect(far.shortestRoundTrip.map { $0 >= .milliseconds(100) && $0 < .milliseconds(102) } == true)
        #expect(far.fastestRate > 19_000)
        #expect(Double(far.limit) / 0.1 > 20_000, "\(far.limit)")
    }

    @Test func theLimitNeverPassesItsCeilingNorFallsBelowItsFloor() {
        var sizing = Self.sizing(ceiling: 3_000)
        Self.run(&sizing, capacity: 10_000, roundTrip: .milliseconds(500), for: .seconds(5))
        #expect(sizing.limit == 3_000)
        var one = Self.sizing(ceiling: 1)
        #expect(one.limit == 1)
        Self.run(&one, capacity: 10_000, roundTrip: .milliseconds(100), for: .seconds(2))
        #expect(one.limit == 1, "a ceiling below the floor is the limit")
    }

    @Test func onlyAnswersToPushesSentInQuietMeasureTheDistance() {
        var sizing = Self.sizing(floor: 10)
        // The first push, alone, measures the distance: 100 ms.
        let first = sizing.sent(among: 1)
        sizing.finished(first, roundTrip: .milliseconds(100), at: Self.t0)
        let quiet = (1...10).map { sizing.sent(among: $0) }
        #expect(quiet.allSatisfy { if case .inQuiet = $0 { true } else { false } })
        // An eleventh: crowded. While it is in flight, others are not sent in quiet.
        let crowded = sizing.sent(among: 11)
        #expect(crowded == .crowded)
        #expect(sizing.sent(among: 5) == .alongsideCrowded)
        // The quiet ones but the first (sent alone: it begins a measure) were followed by a crowded
        // one before their answers: the event loop and the far end were busier than in quiet, so
        // they measure nothing.
        sizing.finished(quiet[0], roundTrip: .milliseconds(100), at: Self.t0 + .milliseconds(90))
        for sending in quiet.dropFirst() { sizing.finished(sending, roundTrip: .milliseconds(90), at: Self.t0 + .milliseconds(90)) }
        #expect(sizing.shortestRoundTrip == .milliseconds(100))
        sizing.finished(crowded, roundTrip: .milliseconds(40), at: Self.t0 + .milliseconds(400))
        sizing.finished(.alongsideCrowded, roundTrip: .milliseconds(40), at: Self.t0 + .milliseconds(400))
        #expect(sizing.shortestRoundTrip == .milliseconds(100), "nor do the crowded")
        // Quiet again.
        let alone = sizing.sent(among: 1)
        sizing.finished(alone, roundTrip: .milliseconds(95), at: Self.t0 + .milliseconds(500))
        #expect(sizing.shortestRoundTrip == .milliseconds(95))
    }

    @Test func afterAPauseTheFirstAnswerMeasuresEvenWithACrowdSentAfterIt() {
        // A fan-out begins: its first pushes go out in quiet, hundreds follow before any answer.
        // The first answer is to the first push, which met no queue at the far end: the distance.
        var sizing = Self.sizing()
        let first = sizing.sent(among: 1)
        for count in 2...800 { _ = sizing.sent(among: count) }
        sizing.finished(first, roundTrip: .milliseconds(100), at: Self.t0 + .milliseconds(100))
        #expect(sizing.shortestRoundTrip == .milliseconds(100))
    }

    @Test func afterAPauseItMeasuresAgainInQuietSoALongerRouteCountsFromTheNextFanOut() {
        var sizing = Self.sizing()
        let end = Self.run(&sizing, capacity: 10_000, roundTrip: .milliseconds(20), for: .seconds(3))
        #expect(sizing.limit == 1_200)
        // The route to APNs grows longer while nothing is sent. The next fan-out's first push
        // measures it: the first answer to a push sent in quiet is the new distance.
        guard case .inQuiet = sizing.sent(among: 1) else {
            Issue.record("the first push after a pause goes in quiet")
            return
        }
        #expect(sizing.limit == 800, "at the floor until then")
        Self.run(&sizing, capacity: 10_000, roundTrip: .milliseconds(200), for: .seconds(2), from: end + .seconds(1))
        #expect(sizing.shortestRoundTrip == .milliseconds(200))
        #expect(sizing.limit == 4_800)
    }

    @Test func pushesSentAloneUnderSteadyLoadKeepTheLimitAtItsFloorAtLeast() {
        var sizing = Self.sizing()
        // A thousand single pushes a second, each answered 2 ms later: each goes out alone and
        // measures the distance again, but the limit never falls below the floor (below it,
        // pushes would wait behind it).
        var lowest = Int.max
        for index in 0..<2_000 {
            let sending = sizing.sent(among: 1)
            lowest = min(lowest, sizing.limit)
            sizing.finished(sending, roundTrip: .milliseconds(2), at: Self.t0 + .milliseconds(index + 2))
        }
        #expect(lowest >= 800)
        #expect(sizing.shortestRoundTrip == .milliseconds(2))
    }

    @Test func aPushWithoutAnAnswerCountsForTheRateNotTheRoundTrip() {
        var sizing = Self.sizing()
        for index in 0..<500 {
            let sending = sizing.sent(among: 1)
            sizing.finished(sending, roundTrip: nil, at: Self.t0 + .milliseconds(index))
        }
        let sending = sizing.sent(among: 1)
        sizing.finished(sending, roundTrip: .milliseconds(50), at: Self.t0 + .milliseconds(500))
        #expect(sizing.shortestRoundTrip == .milliseconds(50))
        #expect(sizing.fastestRate == 1_000)
    }

    @Test func aFastRateIsForgottenAfterFiveSeconds() {
        var sizing = Self.sizing()
        let end = Self.run(&sizing, capacity: 10_000, roundTrip: .milliseconds(100), for: .seconds(3))
        #expect(sizing.limit == 2_800)
        // Then ten a second: the limit follows the lower rate once the fast one is 5 s old.
        for tenth in 0..<80 {
            let sending = sizing.sent(among: 1)
            sizing.finished(sending, roundTrip: .milliseconds(100), at: Self.t0 + end + .milliseconds(100 * tenth))
        }
        #expect(sizing.fastestRate <= 20)
        #expect(sizing.limit <= 810)
    }

    @Test func aPushGivenBackUnsentLeavesNoCrowdBehind() {
        var sizing = Self.sizing(floor: 1)
        _ = sizing.sent(among: 1)
        let crowded = sizing.sent(among: 2)
        sizing.unsent(crowded)
        #expect(sizing.sent(among: 1) != .alongsideCrowded)
    }
}
