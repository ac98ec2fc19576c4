import Foundation
import LiveActivityKit
import LiveRelayStore
import Metrics
import Prometheus
import Synchronization

/// What this process counts and measures, rendered in Prometheus' text format (`MetricCatalog`
/// names every series). Labels are bounded (actions, events, results, routes, environments),
/// never a token, key or device id. Besides, what the dashboard's overview shows.
package final class RelayMetrics: Sendable {
    /// The series of this process: swift-metrics' API over a registry of its own (so that every
    /// service in one process, as in the tests, counts apart), which swift-prometheus renders.
    let registry = PrometheusCollectorRegistry()
    var factory: MetricCatalog.Factory { MetricCatalog.Factory(registry: registry) }

    /// Pushes answered in each of the last hour's minutes (by minute since 1970), by result.
    private let minutes = Mutex<[Int64: [String: Int]]>([:])
    static let minutesKept: Int64 = 60
    /// Keys whose last change spent three quarters of a target's priority-10 budget or more.
    private let nearBudget = Mutex<[KeyNearBudget.Key: KeyNearBudget]>([:])
    static let nearBudgetKept = 10_000

    package init() {
        let factory = MetricCatalog.Factory(registry: registry)
        var pushes: [PushSeries: Metrics.Counter] = [:]
        var waits: [DeliveryAction: Metrics.Timer] = [:]
        for event in DeliveryAction.allCases {
            for result in PushResult.allCases {
                pushes[PushSeries(event: event, result: result)] = Metrics.Counter(
                    label: Metric.pushesTotal.rawValue, dimensions: [("event", event.rawValue), ("result", result.rawValue)], factory: factory)
            }
            waits[event] = Metrics.Timer(label: Metric.pushWaitSeconds.rawValue, dimensions: [("event", event.rawValue)], factory: factory)
        }
        self.pushes = pushes
        self.waits = waits
        self.roundTrips = Dictionary(
            uniqueKeysWithValues: PushEnvironment.allCases.map {
                ($0, Metrics.Timer(label: Metric.apnsRoundTripSeconds.rawValue, dimensions: [("environment", $0.rawValue)], factory: factory))
            })
    }

    // MARK: Pushes

    /// What APNs' answer made of a push.
    enum PushResult: String, CaseIterable {
        case sent, retry, failed
        case tokenDead = "token_dead"
    }

    struct PushSeries: Hashable {
        var event: DeliveryAction
        var result: PushResult
    }

    /// The series every push touches, made at the start (so that each shows from the first
    /// scrape), then only counted or observed: no registry lookup and no label hashing a push.
    private let pushes: [PushSeries: Metrics.Counter]
    private let waits: [DeliveryAction: Metrics.Timer]
    private let roundTrips: [PushEnvironment: Metrics.Timer]

    /// An exchange with APNs answered after `roundTrip`.
    func noteExchange(in environment: PushEnvironment, roundTrip: Duration) {
        roundTrips[environment]?.record(duration: roundTrip)
    }

    /// A push of `event` answered at `date` with `result`: counted, and, when that settles it,
    /// how long it waited since `acceptedAt` and whether it was its fan-out's last.
    func notePush(_ event: DeliveryAction, _ result: PushResult, acceptedAt: Date, requestID: String, at date: Date) {
        pushes[PushSeries(event: event, result: result)]?.increment()
        countPush(result: result.rawValue, at: date)
        guard result != .retry else { return }
        waits[event]?.record(duration: .seconds(max(0, date.timeIntervalSince(acceptedAt))))
        noteAnswered(requestID: requestID, at: date)
    }

    /// Keeps a key whose change at `date` spent most of a budget, and forgets it once a change spends less.
    func noteBudget(_ use: BudgetUse?, app: String, key: String, at date: Date) {
        guard let use else { return }
        let id = KeyNearBudget.Key(app: app, key: key)
        nearBudget.withLock { kept in
            guard use.isNearLimit else {
                kept[id] = nil
                return
            }
            kept[id] = KeyNearBudget(app: app, key: key, use: use, at: date)
            guard kept.count > Self.nearBudgetKept else { return }
            // Full: forget what is over an hour old, and if that is not enough, the oldest tenth
            // at once, so that a full map costs one sort per thousand changes, not a scan per change.
            kept = kept.filter { $0.value.at > date - 3600 }
            if kept.count > Self.nearBudgetKept {
                let newest = kept.values.sorted { $0.at > $1.at }.prefix(Self.nearBudgetKept * 9 / 10)
                kept = Dictionary(uniqueKeysWithValues: newest.map { (KeyNearBudget.Key(app: $0.app, key: $0.key), $0) })
            }
        }
    }

    /// The keys this process saw spend most of a target's budget in the hour before `date`, the
    /// fullest first.
    package func keysNearBudget(at date: Date, limit: Int) -> [KeyNearBudget] {
        nearBudget.withLock { Array($0.values) }
            .filter { $0.at > date - 3600 }
            .sorted { ($0.use.share, $0.at) > ($1.use.share, $1.at) }
            .prefix(limit).map { $0 }
    }

    /// Counts a push answered at `date` with `result` (`sent`, `retry`, `failed`, `token_dead`).
    func countPush(result: String, at date: Date) {
        let minute = Int64((date.timeIntervalSince1970 / 60).rounded(.down))
        minutes.withLock { minutes in
            minutes[minute, default: [:]][result, default: 0] += 1
            if minutes.count > Self.minutesKept { minutes = minutes.filter { $0.key > minute - Self.minutesKept } }
        }
    }

    /// This process's pushes per minute by result, for the `count` minutes up to `date`'s, oldest first.
    package func pushesPerMinute(upTo date: Date, count: Int) -> [(minute: Date, results: [String: Int])] {
        let last = Int64((date.timeIntervalSince1970 / 60).rounded(.down))
        let kept = minutes.withLock { $0 }
        return (last - Int64(count) + 1...last).map { minute in (Date(timeIntervalSince1970: Double(minute) * 60), kept[minute] ?? [:]) }
    }

    /// The series made so far, by name and labels: each is made once (a registry lookup checks
    /// and hashes its name and labels), then only counted or observed, as a push is.
    private let counters = Mutex<[Series: Metrics.Counter]>([:])
    private let timers = Mutex<[Series: Metrics.Timer]>([:])

    struct Series: Hashable {
        var name: Metric
        var labels: [String: String]
    }

    /// Counts `amount` in the series `name{labels}`.
    func count(_ name: Metric, _ labels: [String: String], by amount: Int = 1) {
        Self.made(Series(name: name, labels: labels), in: counters) { Metrics.Counter(label: name.rawValue, dimensions: $0, factory: factory) }
            .increment(by: amount)
    }

    /// Observes `duration` in the histogram `name{labels}`.
    package func observe(_ name: Metric, _ labels: [String: String], _ duration: Duration) {
        Self.made(Series(name: name, labels: labels), in: timers) { Metrics.Timer(label: name.rawValue, dimensions: $0, factory: factory) }
            .record(duration: max(duration, .zero))
    }

    /// The handler of `series` in `cache`, made with its labels in order the first time.
    private static func made<Handler>(
        _ series: Series, in cache: borrowing Mutex<[Series: Handler]>, _ make: ([(String, String)]) -> Handler
    ) -> Handler {
        cache.withLock { made in
            if let handler = made[series] { return handler }
            let handler = make(MetricCatalog.dimensions(series.labels))
            made[series] = handler
            return handler
        }
    }

    /// The series as they are, without setting the store's gauges first (tests).
    var text: String { registry.emitToString() }

    /// The value of one counter or gauge, for tests (0 when it has none).
    package func value(_ name: Metric, _ labels: [String: String] = [:]) -> Int {
        Int(PrometheusSamples(text).value(name.rawValue, labels) ?? 0)
    }

    /// How the dispatcher sends now: what it keeps in flight and why (`InFlightSizing`).
    struct Sending: Sendable, Hashable {
        var inFlightLimit = 0
        var inFlight = 0
        var shortestRoundTrip: Duration?
    }

    private let sending = Mutex(Sending())
    /// How long retention's longest batch of its last run held the store.
    private let retentionBatch = Mutex(Duration.zero)

    func noteRetentionBatch(_ longest: Duration) {
        retentionBatch.withLock { $0 = longest }
    }

    func noteSending(_ now: Sending) {
        sending.withLock { $0 = now }
    }

    // MARK: Fan-outs

    /// Fan-outs accepted here whose pushes are not all answered yet, by request id.
    private let fanOuts = Mutex<[String: FanOut]>([:])
    /// Fan-outs kept at most: past it, the oldest are forgotten unmeasured (another instance sent
    /// their pushes, or the process was told of answers it never saw).
    static let fanOutsKept = 1_000

    struct FanOut {
        var acceptedAt: Date
        var unanswered: Int
    }

    /// Starts timing a request's pushes when it queued more than one.
    func noteAccepted(requestID: String, pushes: Int, at date: Date) {
        guard pushes > 1 else { return }
        fanOuts.withLock { kept in
            kept[requestID] = FanOut(acceptedAt: date, unanswered: pushes)
            guard kept.count > Self.fanOutsKept else { return }
            let oldest = kept.min { $0.value.acceptedAt < $1.value.acceptedAt }!.key
            kept[oldest] = nil
        }
    }

    /// Counts a push of a request answered for good (sent, failed, its token dead) at `date`: the
    /// last of a fan-out's observes how long the whole took.
    func noteAnswered(requestID: String, at date: Date) {
        let finished: Date? = fanOuts.withLock { kept in
            guard var fanOut = kept[requestID] else { return nil }
            fanOut.unanswered -= 1
            guard fanOut.unanswered == 0 else {
                kept[requestID] = fanOut
                return nil
            }
            kept[requestID] = nil
            return fanOut.acceptedAt
        }
        if let finished { observe(Metric.fanoutDurationSeconds, [:], .seconds(date.timeIntervalSince(finished))) }
    }

    // MARK: Rendering

    private static func microseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000)
    }

    /// Every series in Prometheus' text format, after setting the gauges of how pushes are sent
    /// (`apnsConnections`: open or opening now), of what the store holds, and of the statements it
    /// has run.
    package func render(store: StoreCounts, deliveries: [DeliveryStatus: Int], apnsConnections: Int, statements: Int) -> String {
        let sending = sending.withLock { $0 }
        var gauges: [(Metric, [String: String], Int)] = [
            (Metric.inFlight, [:], sending.inFlight), (Metric.inFlightLimit, [:], sending.inFlightLimit),
            (Metric.apnsRoundTripShortestMicroseconds, [:], sending.shortestRoundTrip.map(Self.microseconds) ?? 0),
            (Metric.apnsConnections, [:], apnsConnections),
            (Metric.retentionBatchLongestMicroseconds, [:], Self.microseconds(retentionBatch.withLock { $0 })),
            (Metric.pushToStartTokens, [:], store.pushToStartTokens), (Metric.liveActivityTokens, [:], store.liveActivityTokens),
            (Metric.activeKeys, [:], store.activeKeys), (Metric.channels, [:], store.channels),
            (Metric.storeStatements, [:], statements),
        ]
        for status in DeliveryStatus.countedByIndex { gauges.append((Metric.deliveries, ["status": status.rawValue], deliveries[status] ?? 0)) }
        for (name, labels, value) in gauges {
            Metrics.Gauge(label: name.rawValue, dimensions: MetricCatalog.dimensions(labels), factory: factory).record(value)
        }
        return registry.emitToString()
    }
}

/// A key that spent most of a device's or channel's hourly priority-10 budget, and when.
package struct KeyNearBudget: Sendable, Hashable {
    struct Key: Hashable {
        var app: String
        var key: String
    }
    package var app: String
    package var key: String
    package var use: BudgetUse
    package var at: Date
}
