import CoreMetrics
import Prometheus

/// Every series this process exports, in one place: what it means (its `# HELP` line) and, for a
/// histogram, its buckets. swift-metrics' factory below takes both from here.
package enum MetricCatalog {
    package static let help: [String: String] = [
        "liverelay_pushes_total": "Pushes APNs answered, by event and result (sent, retry, failed, token_dead).",
        "liverelay_requests_accepted_total": "Starts, updates and ends accepted, by action.",
        "liverelay_registrations_total": "Tokens, reports and contracts the apps registered, by kind.",
        "liverelay_reports_refused_total": "Reports of devices a key does not know, refused for want of a grant or for a bad one, by reason.",
        "liverelay_catch_ups_total": "Devices that reported late, sent their key's latest state, by event (update, end).",
        "liverelay_activities_expired_total": "Activities ended by the 8-hour limit.",
        "liverelay_unconfirmed_starts_total": "Push-to-starts APNs accepted whose activity no device reported within the confirmation window.",
        "liverelay_claims_abandoned_total": "Claimed pushes given back unsent, due again at once.",
        "liverelay_store_failures_total": "Failed attempts of a loop that lives on the store, by loop (dispatcher, ticker, webhooks).",
        "liverelay_authentication_failures_total": "API keys presented that are unknown or revoked, by route (api, dashboard).",
        "liverelay_authentication_refused_total": "Authentications refused unexamined: their address had failed too often, by route.",
        "liverelay_webhook_attempts_total": "Webhook posts, by result (delivered, failed).",
        "liverelay_webhook_deliveries_failed_total": "Webhook deliveries given up after their last attempt.",
        "liverelay_retention_deleted_total": "Rows retention deleted as past their time, by table.",
        "liverelay_in_flight": "Pushes sent to APNs and not answered yet.",
        "liverelay_in_flight_limit": "Pushes this instance keeps in flight at most now.",
        "liverelay_apns_round_trip_shortest_microseconds": "The shortest APNs round trip measured.",
        "liverelay_apns_connections": "HTTP/2 connections to APNs, open or opening.",
        "liverelay_push_to_start_tokens": "Push-to-start tokens registered.",
        "liverelay_live_activity_tokens": "Update tokens registered.",
        "liverelay_active_keys": "Activity keys not ended.",
        "liverelay_channels": "Broadcast channels not deleted.",
        "liverelay_deliveries": "Pushes in the outbox and its history, by status.",
        "liverelay_retention_batch_longest_microseconds": "How long the longest batch of retention's last run held the store.",
        "liverelay_http_request_duration_seconds": "API and dashboard requests from their head to their answer, by method, route and status.",
        "liverelay_apns_round_trip_seconds": "APNs exchanges from the request's first byte to its answer, by environment.",
        "liverelay_push_wait_seconds":
            "Pushes from their acceptance (or their schedule's time) to the APNs answer that settled them, retries included, by event.",
        "liverelay_fanout_duration_seconds":
            "Requests of more than one push, from acceptance to the answer of their last push, as seen by the instance that accepted them.",
    ]

    /// The histograms' upper bounds: from a millisecond for what happens on loopback, to an hour
    /// for pushes that waited out APNs' or the store's failures.
    static let buckets: [String: [Duration]] = [
        "liverelay_http_request_duration_seconds": quick,
        "liverelay_apns_round_trip_seconds": quick,
        "liverelay_push_wait_seconds": [
            .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10), .seconds(30), .seconds(60), .seconds(300),
            .seconds(900), .seconds(3600),
        ],
        "liverelay_fanout_duration_seconds": [
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
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help[name] ?? name)
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
            registry.makeDurationHistogram(descriptor: descriptor(label), labels: dimensions, buckets: buckets[label] ?? quick)
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
