import CoreMetrics
import Prometheus

/// Every series this process exports, by its Prometheus name: written nowhere else.
package enum Metric: String, Sendable, CaseIterable {
    case pushesTotal = "liverelay_pushes_total"
    case requestsAcceptedTotal = "liverelay_requests_accepted_total"
    case registrationsTotal = "liverelay_registrations_total"
    case reportsRefusedTotal = "liverelay_reports_refused_total"
    case reportsThrottledTotal = "liverelay_reports_throttled_total"
    case catchUpsTotal = "liverelay_catch_ups_total"
    case activitiesExpiredTotal = "liverelay_activities_expired_total"
    case unconfirmedStartsTotal = "liverelay_unconfirmed_starts_total"
    case claimsAbandonedTotal = "liverelay_claims_abandoned_total"
    case storeFailuresTotal = "liverelay_store_failures_total"
    case authenticationFailuresTotal = "liverelay_authentication_failures_total"
    case authenticationRefusedTotal = "liverelay_authentication_refused_total"
    case webhookAttemptsTotal = "liverelay_webhook_attempts_total"
    case webhookDeliveriesFailedTotal = "liverelay_webhook_deliveries_failed_total"
    case retentionDeletedTotal = "liverelay_retention_deleted_total"
    case inFlight = "liverelay_in_flight"
    case inFlightLimit = "liverelay_in_flight_limit"
    case apnsRoundTripShortestMicroseconds = "liverelay_apns_round_trip_shortest_microseconds"
    case apnsConnections = "liverelay_apns_connections"
    case pushToStartTokens = "liverelay_push_to_start_tokens"
    case liveActivityTokens = "liverelay_live_activity_tokens"
    case activeKeys = "liverelay_active_keys"
    case channels = "liverelay_channels"
    case deliveries = "liverelay_deliveries"
    case retentionBatchLongestMicroseconds = "liverelay_retention_batch_longest_microseconds"
    case storeStatements = "liverelay_store_statements"
    case httpRequestDurationSeconds = "liverelay_http_request_duration_seconds"
    case apnsRoundTripSeconds = "liverelay_apns_round_trip_seconds"
    case pushWaitSeconds = "liverelay_push_wait_seconds"
    case fanoutDurationSeconds = "liverelay_fanout_duration_seconds"

    /// Its `# HELP` line.
    package var help: String {
        switch self {
        case .pushesTotal:
            "Pushes APNs answered, by event and result (sent, retry, failed, token_dead)."
        case .requestsAcceptedTotal:
            "Starts, updates and ends accepted, by action."
        case .registrationsTotal:
            "Tokens, reports and contracts the apps registered, by kind."
        case .reportsThrottledTotal:
            "Reports of devices that reported faster than a device may (429), by kind."
        case .reportsRefusedTotal:
            "Reports of devices a key does not know, refused for want of a grant or for a bad one, by reason."
        case .catchUpsTotal:
            "Devices that reported late, sent their key's latest state, by event (update, end)."
        case .activitiesExpiredTotal:
            "Activities ended by the 8-hour limit."
        case .unconfirmedStartsTotal:
            "Push-to-starts APNs accepted whose activity no device reported within the confirmation window."
        case .claimsAbandonedTotal:
            "Claimed pushes given back unsent, due again at once."
        case .storeFailuresTotal:
            "Failed attempts of a loop that lives on the store, by loop (dispatcher, ticker, webhooks)."
        case .authenticationFailuresTotal:
            "API keys presented that are unknown or revoked, by route (api, dashboard)."
        case .authenticationRefusedTotal:
            "Authentications refused unexamined: their address had failed too often, by route."
        case .webhookAttemptsTotal:
            "Webhook posts, by result (delivered, failed)."
        case .webhookDeliveriesFailedTotal:
            "Webhook deliveries given up after their last attempt."
        case .retentionDeletedTotal:
            "Rows retention deleted as past their time, by table."
        case .inFlight:
            "Pushes sent to APNs and not answered yet."
        case .inFlightLimit:
            "Pushes this instance keeps in flight at most now."
        case .apnsRoundTripShortestMicroseconds:
            "The shortest APNs round trip measured."
        case .apnsConnections:
            "HTTP/2 connections to APNs, open or opening."
        case .pushToStartTokens:
            "Push-to-start tokens registered."
        case .liveActivityTokens:
            "Update tokens registered."
        case .activeKeys:
            "Activity keys not ended."
        case .channels:
            "Broadcast channels not deleted."
        case .deliveries:
            "Pushes waiting (queued, sending) and ended unsent (failed, superseded, skipped), by status; those sent: liverelay_pushes_total."
        case .retentionBatchLongestMicroseconds:
            "How long the longest batch of retention's last run held the store."
        case .storeStatements:
            "Statements this instance has run on the store since it started, BEGIN and COMMIT included."
        case .httpRequestDurationSeconds:
            "API and dashboard requests from their head to their answer, by method, route and status."
        case .apnsRoundTripSeconds:
            "APNs exchanges from the request's first byte to its answer, by environment."
        case .pushWaitSeconds:
            "Pushes from their acceptance (or their schedule's time) to the APNs answer that settled them, retries included, by event."
        case .fanoutDurationSeconds:
            "Requests of more than one push, from acceptance to the answer of their last push, as seen by the instance that accepted them."
        }
    }
}

/// What swift-metrics' factory below needs of the series: each one's help (`Metric.help`) and,
/// for a histogram, its buckets.
package enum MetricCatalog {

    /// The histograms' upper bounds: from a millisecond for what happens on loopback, to an hour
    /// for pushes that waited out APNs' or the store's failures.
    static let buckets: [Metric: [Duration]] = [
        .httpRequestDurationSeconds: quick,
        .apnsRoundTripSeconds: quick,
        .pushWaitSeconds: [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(300),
            .seconds(900), .seconds(3600),
        ],
        .fanoutDurationSeconds: [
            .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
            .seconds(30), .seconds(60), .seconds(120), .seconds(300), .seconds(900), .seconds(3600),
        ],
    ]
    private static let quick: [Duration] = [
        .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
        .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
    ]

    /// Labels in one order (by name), as a series is named by them.
    static func dimensions(_ labels: [String: String]) -> [(String, String)] {
        labels.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }

    private static func descriptor(_ name: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name, unitName: "", helpText: Metric(rawValue: name)?.help ?? name)
    }

    /// swift-metrics' factory over one Prometheus registry, naming every series as the catalog
    /// says. Counters are counters, timers histograms, recorders and meters gauges.
    struct Factory: MetricsFactory {
        let registry: PrometheusCollectorRegistry

        func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
            registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
        }

        func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
            registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
        }

        func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
            registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
        }

        func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
            registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
        }

        func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
            registry.makeDurationHistogram(
                descriptor: descriptor(label), labels: dimensions, buckets: Metric(rawValue: label).flatMap { buckets[$0] } ?? quick)
        }

        func destroyCounter(_ handler: any CounterHandler) {
            if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
        }

        func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
            if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
        }

        func destroyRecorder(_ handler: any RecorderHandler) {
            if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
        }

        func destroyMeter(_ handler: any MeterHandler) {
            if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
        }

        func destroyTimer(_ handler: any TimerHandler) {
            if let histogram = handler as? DurationHistogram { registry.unregisterDurationHistogram(histogram) }
        }
    }
}
