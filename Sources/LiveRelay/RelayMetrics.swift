import Foundation
import LiveRelayStore
import Synchronization

/// Counters in Prometheus' text format. Labels are bounded (actions, events, results, scopes),
/// never a token, key or device id.
public final class RelayMetrics: Sendable {
    private let counters = Mutex<[String: [String: Int]]>([:])

    public init() {}

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
