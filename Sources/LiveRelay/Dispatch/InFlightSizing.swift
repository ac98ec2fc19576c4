/// How many pushes the dispatcher keeps in flight, from what it measures (`InFlightSizingTests`).
///
/// To finish pushes at a rate R while each takes a round trip T to APNs, R × T of them must be in
/// flight (Little's law). On loopback T is a fraction of a millisecond and what counts is batching:
/// an instance writes and reads in large batches only with many streams open, so it keeps at
/// least `floor` in flight (800 measured best there). At a distance it keeps
/// `floor + gain × R × T`, where:
/// - T is the shortest round trip of the latest quarter second that had an answer to a push sent
///   in quiet: with at most `quiet` (32) in flight, and no push sent with more before its answer
///   came; or, after a pause (a push sent alone), the first answer to a push sent in quiet, even
///   with more sent after it: it went first, so little waited before it at the far end. After a
///   pause the limit is the floor until that answer comes, which bounds what is written before it
///   can be read (with the limit left as it was, 6,700 were, and a 100 ms distance read as 381).
///   So every fan-out starts by measuring the distance, and light load measures it all along. A
///   round trip is read on its connection (`APNsRawResponse.roundTrip`), which leaves
///   out the wait for a worker's turn (all of a push's time when the CPU is the limit: 57 ms with
///   800 in flight on loopback). It still holds the wait for the event loop to read the answer
///   and, at the far end, the wait behind what was sent before, both of which grow with what is
///   in flight. By Little's law that wait is about what is in flight over the rate, which looks
///   just like distance: measured with up to the floor in flight, a far end busy on loopback
///   read as 40 ms away, so the limit rose to three or four times the floor, for no more speed
///   (memory only, in workers and buffers). Measured with few in flight, T is the distance; when
///   crowded, T raised the limit, which raised T, up to the ceiling (10,000 in flight and a
///   "round trip" of 777 ms at 100 ms).
/// - R is the fastest rate pushes finished at, over half a second, in the last 5 seconds: a
///   slower rate means less was to be sent, not that less could be. Over 100 ms, answers that
///   come back in bursts read as 64,000 a second where 15,000 were sent.
/// - The gain of 2 covers round trips that vary (a mean up to twice the shortest) and lets the
///   rate grow: while the limit holds the rate back, each half second doubles what goes beyond
///   the floor, until the instance sends as fast as it can.
///
/// The limit never exceeds `ceiling` (`serve --max-in-flight`).
struct InFlightSizing: Sendable {
    var floor: Int
    var ceiling: Int
    var gain = 2.0
    /// At most this many in flight, a push's round trip measures the distance (`floor` if lower).
    static let quietInFlight = 32
    /// The limit now.
    private(set) var limit: Int

    static let rateWindow = Duration.milliseconds(500)
    static let rateKeptFor = Duration.seconds(5)
    static let roundTripWindow = Duration.milliseconds(250)

    /// A measure over one window of time.
    private struct Window<Value: Sendable>: Sendable {
        var start: ContinuousClock.Instant
        var value: Value
    }

    /// The rate of each half-second window of the last 5 seconds: pushes finished over its length
    /// (which ends at the first push past half a second).
    private var rates: [Window<Double>] = []
    /// The window going on, and the pushes finished in it.
    private var current: Window<Int>
    /// The shortest round trip of the latest quarter second with an answer to a push sent in quiet.
    private var roundTrips: Window<Duration>?
    /// Sending began after a pause, and no answer has measured the distance since: the first
    /// answer to a push sent in quiet will. Meanwhile the limit is the floor, not `quiet`: that,
    /// at every push sent alone, queued single-key updates behind it (on PostgreSQL, p50 15–26 ms
    /// instead of 6–9).
    private var measuring = true
    /// Pushes sent with more than `quiet` in flight and not finished.
    private var crowdedInFlight = 0
    /// Pushes sent with more than `quiet` in flight, ever.
    private var crowdedSent = 0

    /// How a push was sent, for what its answer says.
    enum Sending: Sendable, Hashable {
        /// With at most `quiet` in flight, none of them crowded, when `crowdedSent` was this: its
        /// round trip tells the distance if no crowded push followed it before its answer came.
        case inQuiet(crowdedSent: Int)
        case alongsideCrowded
        /// With more than `quiet` in flight.
        case crowded
    }

    init(floor: Int, ceiling: Int, now: ContinuousClock.Instant) {
        self.floor = min(floor, ceiling)
        self.ceiling = ceiling
        self.limit = min(floor, ceiling)
        current = Window(start: now, value: 0)
    }

    /// At most this many in flight, a push measures the distance: few enough that the far end's
    /// queue adds little to its round trip.
    var quiet: Int { min(floor, Self.quietInFlight) }

    /// The fastest rate of the finished windows kept, in pushes a second.
    var fastestRate: Double {
        rates.map(\.value).max() ?? 0
    }

    /// T: the shortest round trip of the latest quarter second with one measured.
    var shortestRoundTrip: Duration? { roundTrips?.value }

    /// A push is sent with `inFlight` in flight, itself included.
    mutating func sent(among inFlight: Int) -> Sending {
        if inFlight == 1, !measuring {
            // The first push after a pause: the distance may have changed meanwhile.
            measuring = true
            limit = floor
        }
        guard inFlight <= quiet else {
            crowdedInFlight += 1
            crowdedSent += 1
            return .crowded
        }
        return crowdedInFlight == 0 ? .inQuiet(crowdedSent: crowdedSent) : .alongsideCrowded
    }

    /// A push finished at `now`. `roundTrip`: how long APNs took to answer it, nil when it did not
    /// (a connection that failed at once says nothing of the distance); `sending`: as `sent` said.
    mutating func finished(_ sending: Sending, roundTrip: Duration?, at now: ContinuousClock.Instant) {
        unsent(sending)
        if let roundTrip, case .inQuiet(let crowdedBefore) = sending, measuring || crowdedBefore == crowdedSent {
            if let current = roundTrips, now - current.start < Self.roundTripWindow {
                roundTrips?.value = min(current.value, roundTrip)
            } else {
                roundTrips = Window(start: now, value: roundTrip)
            }
            if measuring {
                // The first answer after a pause: its push went first, so this is the distance.
                measuring = false
                limit = currentLimit
            }
        }
        if now - current.start >= Self.rateWindow {
            // A window ends: the limit follows what the windows kept say.
            rates.removeAll { now - $0.start >= Self.rateKeptFor }
            rates.append(Window(start: current.start, value: Double(current.value) / Self.seconds(now - current.start)))
            current = Window(start: now, value: 0)
            if !measuring { limit = currentLimit }
        }
        current.value += 1
    }

    /// What the measures say now.
    private var currentLimit: Int {
        Self.limit(floor: floor, ceiling: ceiling, gain: gain, rate: fastestRate, roundTrip: shortestRoundTrip)
    }

    /// A push handed out was not sent after all (or has finished).
    mutating func unsent(_ sending: Sending) {
        if sending == .crowded { crowdedInFlight -= 1 }
    }

    static func limit(floor: Int, ceiling: Int, gain: Double, rate: Double, roundTrip: Duration?) -> Int {
        let distance = gain * rate * (roundTrip.map(seconds) ?? 0)
        return min(ceiling, floor + Int(distance.rounded(.up)))
    }

    private static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
