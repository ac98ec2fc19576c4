import Foundation
import LiveRelayStore
import Synchronization

/// Counters in Prometheus' text format. Labels are bounded (actions, events, results, scopes),
/// never a token, key or device id.
package final class RelayMetrics: Sendable {
    private let counters = Mutex<[String: [String: Int]]>([:])
    /// Pushes answered in each of the last hour's minutes (by minute since 1970), by result.
    private let minutes = Mutex<[Int64: [String: Int]]>([:])
    static let minutesKept: Int64 = 60
    /// Keys whose last change spent three quarters of a target's priority-10 budget or more.
    private let nearBudget = Mutex<[KeyNearBudget.Key: KeyNearBudget]>([:])
    static let nearBudgetKept = 10_000

    package init() {}

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

    func count(_ name: String, _ labels: [String: String], by amount: Int = 1) {
        let series = labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: ",")
        counters.withLock { $0[name, default: [:]][series, default: 0] += amount }
    }

    /// The value of one series, for tests.
    package func value(_ name: String, _ labels: [String: String] = [:]) -> Int {
        let series = labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: ",")
        return counters.withLock { $0[name]?[series] ?? 0 }
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

    /// The series without labels of a rendered text, by name (benchmarks and tests read gauges).
    package static func unlabelledValues(in text: String) -> [String: Int] {
        Dictionary(
            text.split(separator: "\n").compactMap { line -> (String, Int)? in
                let parts = line.split(separator: " ")
                guard parts.count == 2, !parts[0].hasPrefix("#"), let value = Int(parts[1]) else { return nil }
                return (String(parts[0]), value)
            }, uniquingKeysWith: { first, _ in first })
    }

    /// What each series means, for its `# HELP` line: one place for every name this process exports.
    static let help: [String: String] = [
        "liverelay_pushes_total": "Pushes APNs answered, by event and result (sent, retry, failed, token_dead).",
        "liverelay_requests_accepted_total": "Starts, updates and ends accepted, by action.",
        "liverelay_registrations_total": "Tokens, reports and contracts the apps registered, by kind.",
        "liverelay_activities_expired_total": "Activities ended by the 8-hour limit.",
        "liverelay_unconfirmed_starts_total": "Push-to-starts APNs accepted whose activity no device reported within the confirmation window.",
        "liverelay_claims_abandoned_total": "Claimed pushes given back unsent, due again at once.",
        "liverelay_store_failures_total": "Failed attempts of a loop that lives on the store, by loop (dispatcher, ticker).",
        "liverelay_authentication_failures_total": "API keys presented that are unknown or revoked, by route (api, dashboard).",
        "liverelay_authentication_refused_total": "Authentications refused unexamined: their address had failed too often, by route.",
        "liverelay_in_flight": "Pushes sent to APNs and not answered yet.",
        "liverelay_in_flight_limit": "Pushes this instance keeps in flight at most now.",
        "liverelay_apns_round_trip_shortest_microseconds": "The shortest APNs round trip measured.",
        "liverelay_apns_connections": "HTTP/2 connections to APNs, open or opening.",
        "liverelay_push_to_start_tokens": "Push-to-start tokens registered.",
        "liverelay_live_activity_tokens": "Update tokens registered.",
        "liverelay_active_keys": "Activity keys not ended.",
        "liverelay_channels": "Broadcast channels not deleted.",
        "liverelay_deliveries": "Pushes in the outbox and its history, by status.",
        "liverelay_retention_deleted_total": "Rows retention deleted as past their time, by table.",
        "liverelay_retention_batch_longest_microseconds": "How long the longest batch of retention's last run held the store.",
    ]

    private static func microseconds(_ duration: Duration) -> Int {
        Int(duration.components.seconds * 1_000_000 + duration.components.attoseconds / 1_000_000_000_000)
    }

    private static func header(_ name: String, _ type: String) -> String {
        "# HELP \(name) \(help[name] ?? name)\n# TYPE \(name) \(type)\n"
    }

    /// Counters, then gauges of how pushes are sent (`apnsConnections`: open or opening now) and
    /// of what the store holds.
    package func render(store: StoreCounts, deliveries: [DeliveryStatus: Int], apnsConnections: Int) -> String {
        var text = ""
        for (name, series) in counters.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            text += Self.header(name, "counter")
            for (labels, value) in series.sorted(by: { $0.key < $1.key }) {
                text += labels.isEmpty ? "\(name) \(value)\n" : "\(name){\(labels)} \(value)\n"
            }
        }
        let sending = sending.withLock { $0 }
        let roundTrip = sending.shortestRoundTrip.map(Self.microseconds)
        let gauges: [(String, Int)] = [
            ("liverelay_in_flight", sending.inFlight), ("liverelay_in_flight_limit", sending.inFlightLimit),
            ("liverelay_apns_round_trip_shortest_microseconds", roundTrip ?? 0), ("liverelay_apns_connections", apnsConnections),
            ("liverelay_retention_batch_longest_microseconds", Self.microseconds(retentionBatch.withLock { $0 })),
            ("liverelay_push_to_start_tokens", store.pushToStartTokens), ("liverelay_live_activity_tokens", store.liveActivityTokens),
            ("liverelay_active_keys", store.activeKeys), ("liverelay_channels", store.channels),
        ]
        for (name, value) in gauges { text += Self.header(name, "gauge") + "\(name) \(value)\n" }
        text += Self.header("liverelay_deliveries", "gauge")
        for status in DeliveryStatus.allCases { text += "liverelay_deliveries{status=\"\(status.rawValue)\"} \(deliveries[status] ?? 0)\n" }
        return text
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
