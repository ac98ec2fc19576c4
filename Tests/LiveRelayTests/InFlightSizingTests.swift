import Testing

@testable import LiveRelay

/// How many pushes the dispatcher keeps in flight, from the round trips and rates it measures;
/// time is an instant the test moves.
@Suite struct InFlightSizingTests {
    static let t0 = ContinuousClock.now

    /// Finishes `count` pushes evenly over `window` from `start`, each answered after `roundTrip`.
    static func finish(
        _ sizing: inout InFlightSizing, _ count: Int, over window: Duration = .milliseconds(100), from start: Duration,
        roundTrip: Duration?
    ) {
        for index in 0..<count {
            sizing.finished(roundTrip: roundTrip, at: t0 + start + window * (Double(index) / Double(count)))
        }
    }

    /// An instance that can send `capacity` pushes a second, against APNs `roundTrip` away, with
    /// work always waiting: each 100 ms it finishes what the limit lets through, at most its capacity.
    static func run(_ sizing: inout InFlightSizing, capacity: Double, roundTrip: Duration, windows: Int, from start: Int = 0) {
        let seconds = Double(roundTrip.components.attoseconds) / 1e18 + Double(roundTrip.components.seconds)
        for window in start..<(start + windows) {
            let rate = min(Double(sizing.limit) / seconds, capacity)
            finish(&sizing, Int(rate / 10), from: .milliseconds(100 * window), roundTrip: roundTrip)
        }
    }

    @Test func itStartsAtItsFloorAndStaysThereOnLoopback() {
        var sizing = InFlightSizing(floor: 800, ceiling: 10_000, now: Self.t0)
        #expect(sizing.limit == 800)
        Self.run(&sizing, capacity: 10_000, roundTrip: .microseconds(300), windows: 30)
        // 800 + 2 × 10,000/s × 0.3 ms: what batching needs, and six more.
        #expect(sizing.limit == 806)
    }

    @Test func atADistanceItKeepsTheRoundTripsWorthInFlightOnTopOfItsFloor() {
        var sizing = InFlightSizing(floor: 800, ceiling: 10_000, now: Self.t0)
        Self.finish(&sizing, 800, from: .zero, roundTrip: .milliseconds(100))
        Self.finish(&sizing, 1, from: .milliseconds(100), roundTrip: .milliseconds(100))
        // 8,000 a second, 100 ms away: 800 + 2 × 800.
        #expect(sizing.fastestRate == 8_000)
        #expect(sizing.shortestRoundTrip == .milliseconds(100))
        #expect(sizing.limit == 2_400)
    }

    @Test(arguments: [Duration.milliseconds(20), .milliseconds(100), .milliseconds(300)])
    func whileTheLimitHoldsTheRateBackItGrowsUntilTheInstanceSendsAsFastAsItCan(roundTrip: Duration) {
        var sizing = InFlightSizing(floor: 800, ceiling: 100_000, now: Self.t0)
        Self.run(&sizing, capacity: 10_000, roundTrip: roundTrip, windows: 20)
        let seconds = Double(roundTrip.components.attoseconds) / 1e18
        let settled = 800 + Int((2 * 10_000 * seconds).rounded(.up))
        #expect(sizing.limit == settled, "at \(roundTrip)")
        #expect(Double(sizing.limit) / seconds >= 10_000, "the limit no longer holds the rate back")
        // Within five windows (half a second) of a fan-out's start.
        var quick = InFlightSizing(floor: 800, ceiling: 100_000, now: Self.t0)
        Self.run(&quick, capacity: 10_000, roundTrip: roundTrip, windows: 6)
        #expect(quick.limit == settled, "after 600 ms at \(roundTrip)")
    }

    @Test func theLimitNeverPassesItsCeilingNorFallsBelowItsFloor() {
        var sizing = InFlightSizing(floor: 800, ceiling: 3_000, now: Self.t0)
        Self.run(&sizing, capacity: 10_000, roundTrip: .milliseconds(500), windows: 20)
        #expect(sizing.limit == 3_000)
        var one = InFlightSizing(floor: 800, ceiling: 1, now: Self.t0)
        #expect(one.limit == 1)
        Self.run(&one, capacity: 10_000, roundTrip: .milliseconds(100), windows: 5)
        #expect(one.limit == 1, "a ceiling below the floor is the limit")
    }

    @Test func theShortestRoundTripCountsNotTheMeanSinceWaitingHereOnlyLengthensThem() {
        var sizing = InFlightSizing(floor: 800, ceiling: 100_000, now: Self.t0)
        for window in 0..<3 {
            for index in 0..<500 {
                let roundTrip = Duration.milliseconds(40 + (index * 7) % 81)  // 40 to 120 ms
                sizing.finished(roundTrip: roundTrip, at: Self.t0 + .milliseconds(100 * window) + .microseconds(200 * index))
            }
        }
        #expect(sizing.shortestRoundTrip == .milliseconds(40))
        // 5,000 a second: 800 + 2 × 5,000 × 40 ms, which covers the 80 ms mean.
        #expect(sizing.limit == 1_200)
    }

    @Test func aPushWithoutAnAnswerCountsForTheRateNotTheRoundTrip() {
        var sizing = InFlightSizing(floor: 800, ceiling: 100_000, now: Self.t0)
        Self.finish(&sizing, 100, from: .zero, roundTrip: nil)
        Self.finish(&sizing, 1, from: .milliseconds(100), roundTrip: .milliseconds(50))
        #expect(sizing.shortestRoundTrip == .milliseconds(50))
        #expect(sizing.fastestRate == 1_000)
    }

    @Test func oldMeasuresAreForgottenARoundTripAfterTenSecondsARateAfterFive() {
        var sizing = InFlightSizing(floor: 800, ceiling: 100_000, now: Self.t0)
        Self.run(&sizing, capacity: 10_000, roundTrip: .milliseconds(20), windows: 10)
        #expect(sizing.limit == 1_200)
        // The route to APNs grows longer: 200 ms from second 1 on. Until the 20 ms answers are
        // 10 s old, they stay the shortest.
        Self.run(&sizing, capacity: 10_000, roundTrip: .milliseconds(200), windows: 80, from: 10)
        #expect(sizing.shortestRoundTrip == .milliseconds(20))
        Self.run(&sizing, capacity: 10_000, roundTrip: .milliseconds(200), windows: 30, from: 90)
        #expect(sizing.shortestRoundTrip == .milliseconds(200))
        #expect(sizing.limit == 4_800)
        // Then little is sent: after five seconds the limit follows the lower rate.
        for second in 12..<20 { Self.finish(&sizing, 10, over: .seconds(1), from: .seconds(second), roundTrip: .milliseconds(200)) }
        #expect(sizing.fastestRate <= 100)
        #expect(sizing.limit <= 840)
    }
}
