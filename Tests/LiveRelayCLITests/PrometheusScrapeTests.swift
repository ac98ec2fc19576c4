import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import Testing

/// `liverelay serve`'s `/metrics` as an operator reads it: scraped by Debian's Prometheus server
/// with a metrics key, a latency read back as a histogram quantile through its HTTP API; and the
/// alerting rules the documentation ships, checked and tested by `promtool`.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct PrometheusScrapeTests {
    static let rules = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Documentation/prometheus").path

    @Test(.enabled(if: PrometheusServer.isAvailable || TestRequirement.isCI, Comment(rawValue: PrometheusServer.skipNote)))
    func prometheusScrapesServeWithAMetricsKeyAndReadsALatencyQuantile() async throws {
        let directory = try TestFiles.folder("serve-prometheus")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withDeadline(.seconds(120)) {
            let server = try await ServeProcess.start(["serve", "--data-dir", directory + "/data", "--http-port", "0"])
            let keys = try initialKeys(dataDir: directory + "/data")
            let made = try await liverelay(["keys", "create", "--scope", "metrics", "--name", "prometheus", "--data-dir", directory + "/data"])
            #expect(made.status == 0, "\(made.stderr)")
            let scraper = try #require(made.stdout.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
            // The key reads the metrics, and nothing else.
            #expect(try await server.call(.GET, "/v1/activities", key: scraper).status == 403)
            // The demo iPhone's activity started, once its app reported its push-to-start token.
            let store = try await SQLiteStore.open(path: directory + "/data/liverelay.sqlite")
            try await eventually { try await store.pushToStartTokens(deviceID: "demo-iphone").count == 1 }
            let (path, body) = try server.printedStart()
            #expect(try await server.call(.POST, path, key: keys.server, body: body).status == 201)

            let prometheus = try await PrometheusServer.start(scraping: String(server.baseURL.dropFirst("http://".count)), key: scraper)
            do {
                try await eventually(every: .milliseconds(200)) { try await prometheus.target().health == "up" }
                let latency =
                    "histogram_quantile(0.9, sum by (le) (liverelay_http_request_duration_seconds_bucket{route=\"/v1/activities/{key}/start\"}))"
                var quantile: [(labels: [String: String], value: Double)] = []
                try await eventually(every: .milliseconds(200)) {
                    quantile = try await prometheus.query(latency)
                    return !quantile.isEmpty
                }
                // One start, well within a histogram bucket between a millisecond and 10 s.
                let value = try #require(quantile.first?.value)
                #expect(value > 0 && value <= 10, "\(value)")
                let sent = try await prometheus.query("sum(liverelay_pushes_total{result=\"sent\"})")
                #expect(sent.first?.value ?? 0 >= 1, "\(sent)")
                let help = try await server.call(.GET, "/metrics", key: scraper).text
                #expect(help.contains("# HELP liverelay_push_wait_seconds "))
            } catch {
                await prometheus.stop()
                _ = await server.stop()
                throw error
            }
            await prometheus.stop()
            #expect(await server.stop() == 0)
        }
    }

    @Test(.enabled(if: PrometheusServer.isAvailable || TestRequirement.isCI, Comment(rawValue: PrometheusServer.skipNote)))
    func theShippedAlertingRulesPassPromtoolAndFireOnTheirFailures() async throws {
        let checked = try await PrometheusServer.promtool(["check", "rules", Self.rules + "/liverelay-alerts.yml"])
        #expect(checked.passed && checked.printed.contains("SUCCESS: 6 rules found"), "\(checked.printed)")
        // Each alert fires on the series that should fire it, and none on a healthy server.
        let tested = try await PrometheusServer.promtool(["test", "rules", Self.rules + "/liverelay-alerts-test.yml"])
        #expect(tested.passed, "\(tested.printed)")
    }
}
