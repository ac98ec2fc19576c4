import APNsEmulator
import AsyncHTTPClient
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import NIOCore
import NIOHTTP1
import SimulatedDevices
import Testing

/// `/metrics` through swift-metrics and swift-prometheus: every series with its `# HELP`, and the
/// histograms an operator reads latencies from, measured where they happen.
@Suite struct MetricsTests {
    @Test func theHistogramsMeasureRequestsAPNsExchangesWaitsAndFanOuts() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            try await relay.addRegisteredDevice("iphone-2")
            let started = try await relay.post("/v1/activities/k/start", startBody(key: "k"))
            // The pushes wait three (injected) seconds before they go.
            relay.emulator.clock.advance(by: 3)
            try await relay.dispatch()
            // A path no route has (past the harness, which checks every answer against the API's document).
            let nowhere = try await HTTPClient.shared.execute(HTTPClientRequest(url: relay.baseURL + "/v1/nowhere/\(UUID())"), timeout: .seconds(10))
            #expect(nowhere.status.code == 404)
            let scraper = try await relay.relay.createAPIKey(name: "prometheus", scope: .metrics).secret
            let answer = try await relay.call(.GET, "/metrics", scope: nil, secret: scraper)
            #expect(answer.status == 200)
            let metrics = PrometheusSamples(answer.text)

            let start = ["method": "POST", "route": "/v1/activities/{key}/start", "status": "\(started.status)"]
            #expect(metrics.value("liverelay_http_request_duration_seconds_count", start) == 1)
            #expect(metrics.value("liverelay_http_request_duration_seconds_bucket", start.merging(["le": "+Inf"]) { $1 }) == 1)
            // A path no route matches is one series, whatever the path.
            #expect(metrics.value("liverelay_http_request_duration_seconds_count", ["route": "NotFound", "status": "404"]) == 1)

            #expect(metrics.value("liverelay_apns_round_trip_seconds_count", ["environment": "sandbox"]) == 2)
            #expect(metrics.value("liverelay_push_wait_seconds_count", ["event": "start"]) == 2)
            // (The store keeps times to the millisecond.)
            #expect(abs(try #require(metrics.value("liverelay_push_wait_seconds_sum", ["event": "start"])) - 6) < 0.01)
            #expect(metrics.value("liverelay_push_wait_seconds_bucket", ["event": "start", "le": "2.5"]) == 0)
            #expect(metrics.value("liverelay_push_wait_seconds_bucket", ["event": "start", "le": "5.0"]) == 2)
            // The start went to two devices: one fan-out, done when its second push was answered.
            #expect(metrics.value("liverelay_fanout_duration_seconds_count") == 1)
            #expect(metrics.value("liverelay_fanout_duration_seconds_sum") == 3)

            // Gauges and counters as before, each series with what it means.
            #expect(metrics.value("liverelay_push_to_start_tokens") == 2)
            #expect(metrics.value("liverelay_pushes_total", ["event": "start", "result": "sent"]) == 2)
            let lines = answer.text.split(separator: "\n")
            let typed = Set(lines.filter { $0.hasPrefix("# TYPE ") }.map { $0.split(separator: " ")[2] })
            let helped = Set(lines.filter { $0.hasPrefix("# HELP ") }.map { $0.split(separator: " ")[2] })
            #expect(typed.isSuperset(of: ["liverelay_http_request_duration_seconds", "liverelay_push_wait_seconds", "liverelay_deliveries"]))
            #expect(typed == helped)
            #expect(lines.filter { $0.hasPrefix("# HELP ") }.allSatisfy { $0.split(separator: " ").count > 4 }, "every HELP says something")
        }
    }

    @Test func aMetricsKeyReadsTheMetricsAndNothingElse() async throws {
        try await withRelayHarness { relay in
            let scraper = try await relay.relay.createAPIKey(name: "prometheus", scope: .metrics).secret
            #expect(try await relay.call(.GET, "/metrics", scope: nil, secret: scraper).status == 200)
            #expect(try await relay.call(.GET, "/v1/activities", scope: nil, secret: scraper).status == 403)
            #expect(try await relay.call(.GET, "/v1/api-keys", scope: nil, secret: scraper).status == 403)
            #expect(try await relay.call(.POST, "/v1/activities/k/start", startBody(key: "k"), scope: nil, secret: scraper).status == 403)
            // It is for the whole server, never one app's.
            let refused = try await relay.post(
                "/v1/api-keys", .object([("name", .string("m")), ("scope", .string("metrics")), ("bundleID", .string(harnessApp))]),
                scope: .admin)
            #expect(refused.status == 400 && refused.json["error"]?["field"] == .string("bundleID"), "\(refused.json)")
        }
    }
}
