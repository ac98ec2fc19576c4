import Foundation
import LiveRelayStore
import Synchronization

/// Counters in Prometheus' text format. Labels are bounded (actions, events, results, scopes),
/// never a token, key or device id.
public final class RelayMetrics: Sendable {
    private let counters = Mutex<[String: [String: Int]]>([:])
    /// Pushes answered in each of the last hour's minutes (by minute since 1970), by result.
    private let minutes = Mutex<[Int64: [String: Int]]>([:])
    static let minutesKept: Int64 = 60

    public init() {}

    /// Counts a push answered at `date` with `result` (`sent`, `retry`, `failed`, `token_dead`).
    func countPush(result: String, at date: Date) {
        let minute = Int64((date.timeIntervalSince1970 / 60).rounded(.down))
        minutes.withLock { minutes in
            minutes[minute, default: [:]][result, default: 0] += 1
            if minutes.count > Self.minutesKept { minutes = minutes.filter { $0.key > minute - Self.minutesKept } }
        }
    }

    /// This process's pushes per minute by result, for the `count` minutes up to `date`'s, oldest first.
    public func pushesPerMinute(upTo date: Date, count: Int) -> [(minute: Date, results: [String: Int])] {
        let last = Int64((date.timeIntervalSince1970 / 60).rounded(.down))
        let kept = minutes.withLock { $0 }
        return (last - Int64(count) + 1...last).map { minute in (Date(timeIntervalSince1970: Double(minute) * 60), kept[minute] ?? [:]) }
    }

    func count(_ name: String, _ labels: [String: String], by amount: Int = 1) {
        let series = labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: ",")
        counters.withLock { $0[name, default: [:]][series, default: 0] += amount }
    }

    /// The value of one series, for tests.
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Int {
        let series = labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: ",")
        return counters.withLock { $0[name]?[series] ?? 0 }
    }

    /// Counters, then gauges of what the store holds.
    public func render(store: StoreCounts, deliveries: [DeliveryStatus: Int]) -> String {
        var text = ""
        for (name, series) in counters.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            text += "# TYPE \(name) counter\n"
            for (labels, value) in series.sorted(by: { $0.key < $1.key }) {
                text += labels.isEmpty ? "\(name) \(value)\n" : "\(name){\(labels)} \(value)\n"
            }
        }
        let gauges: [(String, Int)] = [
            ("liverelay_push_to_start_tokens", store.pushToStartTokens), ("liverelay_live_activity_tokens", store.liveActivityTokens),
            ("liverelay_active_keys", store.activeKeys), ("liverelay_channels", store.channels),
        ]
        for (name, value) in gauges { text += "# TYPE \(name) gauge\n\(name) \(value)\n" }
        text += "# TYPE liverelay_deliveries gauge\n"
        for status in DeliveryStatus.allCases { text += "liverelay_deliveries{status=\"\(status.rawValue)\"} \(deliveries[status] ?? 0)\n" }
        return text
    }
}
