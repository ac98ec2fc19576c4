/// How many pushes the dispatcher keeps in flight, from what it measures (`InFlightSizingTests`).
///
/// To finish pushes at a rate R while each takes a round trip T to APNs, R × T of them must be in
/// flight (Little's law). On loopback T is a fraction of a millisecond and what counts is the
/// batching: an instance writes and reads in large batches only with many streams open, so it
/// keeps at least `floor` in flight (800 measured best there). At a distance it keeps
/// `floor + gain × R × T` in flight, where
/// - T is the shortest round trip of the last 10 seconds: waiting in this process only makes
///   round trips longer, so the shortest is the network's and APNs' own;
/// - R is the fastest rate pushes finished at, over 100 ms, in the last 5 seconds: a slower rate
///   means less was to be sent, not that less could be;
/// - the gain of 2 covers round trips that vary (a mean up to twice the shortest) and lets the
///   rate grow: while the limit holds the rate back, each 100 ms raises it, until the instance
///   sends as fast as it can.
///
/// The limit never exceeds `ceiling` (`serve --max-in-flight`).
struct InFlightSizing: Sendable {
    var floor: Int
    var ceiling: Int
    var gain = 2.0
    /// The limit now.
    private(set) var limit: Int

    static let rateWindow = Duration.milliseconds(100)
    static let rateKeptFor = Duration.seconds(5)
    static let roundTripWindow = Duration.seconds(1)
    static let roundTripKeptFor = Duration.seconds(10)

    /// A measure over one window of time.
    private struct Window<Value: Sendable>: Sendable {
        var start: ContinuousClock.Instant
        var value: Value
    }

    /// Pushes finished in each 100 ms window of the last 5 seconds, the current one last.
    private var finishedPerWindow: [Window<Int>]
    /// The shortest round trip of each second of the last 10 that had an answer, the current one last.
    private var shortestPerWindow: [Window<Duration>] = []

    init(floor: Int, ceiling: Int, now: ContinuousClock.Instant) {
        self.floor = min(floor, ceiling)
        self.ceiling = ceiling
        self.limit = min(floor, ceiling)
        finishedPerWindow = [Window(start: now, value: 0)]
    }

    /// The fastest rate of the finished windows kept, in pushes a second.
    var fastestRate: Double {
        Double(finishedPerWindow.dropLast().map(\.value).max() ?? 0) / Self.seconds(Self.rateWindow)
    }

    /// The shortest round trip of the windows kept.
    var shortestRoundTrip: Duration? {
        shortestPerWindow.map(\.value).min()
    }

    /// A push finished at `now`; `roundTrip`: how long APNs took to answer it, nil when it did not
    /// (a connection that failed at once says nothing of the distance).
    mutating func finished(roundTrip: Duration?, at now: ContinuousClock.Instant) {
        if let roundTrip {
            if let current = shortestPerWindow.last, now - current.start < Self.roundTripWindow {
                shortestPerWindow[shortestPerWindow.count - 1].value = min(current.value, roundTrip)
            } else {
                shortestPerWindow.removeAll { now - $0.start >= Self.roundTripKeptFor }
                shortestPerWindow.append(Window(start: now, value: roundTrip))
            }
        }
        let current = finishedPerWindow[finishedPerWindow.count - 1]
        if now - current.start >= Self.rateWindow {
            // A window ends: the limit follows what the windows kept say.
            finishedPerWindow.removeAll { now - $0.start >= Self.rateKeptFor }
            finishedPerWindow.append(Window(start: now, value: 0))
            limit = Self.limit(floor: floor, ceiling: ceiling, gain: gain, rate: fastestRate, roundTrip: shortestRoundTrip)
        }
        finishedPerWindow[finishedPerWindow.count - 1].value += 1
    }

    static func limit(floor: Int, ceiling: Int, gain: Double, rate: Double, roundTrip: Duration?) -> Int {
        let distance = gain * rate * (roundTrip.map(seconds) ?? 0)
        return min(ceiling, floor + Int(distance.rounded(.up)))
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
