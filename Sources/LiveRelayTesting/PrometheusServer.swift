import AsyncHTTPClient
import Foundation
import LiveActivityKit
import NIOCore
import NIOHTTP1

#if canImport(Glibc)
    import Glibc
#endif

/// A real Prometheus server for the tests (Debian's `prometheus`), scraping one target with a
/// bearer key every `interval`, its data in a temporary folder; and `promtool`, which checks
/// alerting rules. Where they are missing, `availability` says so, and CI fails on it.
package final class PrometheusServer: Sendable {
    /// `prometheus` and `promtool` on the PATH, or why not.
    package static let availability: Result<(server: String, tool: String), TestRequirement.Unavailable> = {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        func find(_ name: String) -> String? {
            path.split(separator: ":").map { "\($0)/\(name)" }.first { FileManager.default.isExecutableFile(atPath: $0) }
        }
        guard let server = find("prometheus"), let tool = find("promtool") else {
            return .failure(.init(description: "prometheus and promtool are not on the PATH (apt-get install prometheus)"))
        }
        return .success((server, tool))
    }()

    package static var isAvailable: Bool { availability.isMet }

    package static var skipNote: String { availability.skipNote("metrics were NOT scraped by Prometheus") }

    package let baseURL: String
    private let process: ChildProcess
    private let directory: String

    private init(baseURL: String, process: ChildProcess, directory: String) {
        self.baseURL = baseURL
        self.process = process
        self.directory = directory
    }

    /// Starts a server that scrapes `target` (`host:port`) at `/metrics` with `key`, and waits
    /// until it is ready.
    package static func start(scraping target: String, key: String, interval: Duration = .seconds(1)) async throws -> PrometheusServer {
        let (executable, _) = try availability.get()
        let directory = try TestFiles.folder("prometheus")
        let seconds = interval.components.seconds
        try Data(key.utf8).write(to: URL(fileURLWithPath: directory + "/key"))
        let configuration = """
            global:
              scrape_interval: \(seconds)s
              scrape_timeout: \(seconds)s
            scrape_configs:
              - job_name: liverelay
                metrics_path: /metrics
                authorization:
                  type: Bearer
                  credentials_file: \(directory)/key
                static_configs:
                  - targets: ["\(target)"]
            """
        try Data(configuration.utf8).write(to: URL(fileURLWithPath: directory + "/prometheus.yml"))
        let port = try freeLoopbackPort()
        let process = try ChildProcess.start(
            executable,
            [
                "--config.file=\(directory)/prometheus.yml", "--storage.tsdb.path=\(directory)/data",
                "--web.listen-address=127.0.0.1:\(port)", "--log.level=warn",
            ],
            environment: [:], output: .null)
        let server = PrometheusServer(baseURL: "http://127.0.0.1:\(port)", process: process, directory: directory)
        do {
            try await eventually(every: .milliseconds(100)) {
                guard process.isRunning else { throw TestRequirement.Unavailable(description: "prometheus exited at its start") }
                return (try? await server.get("/-/ready").status) == 200
            }
        } catch {
            await server.stop()
            throw error
        }
        return server
    }

    /// An instant query through the HTTP API: its result's samples, by their labels.
    package func query(_ expression: String) async throws -> [(labels: [String: String], value: Double)] {
        var allowed = CharacterSet.urlQueryAllowed
        allowed.remove(charactersIn: "+&=")
        let answer = try await get("/api/v1/query?query=" + expression.addingPercentEncoding(withAllowedCharacters: allowed)!)
        let json = try JSONValue(parsing: answer.text)
        guard json["status"] == .string("success"), let results = json["data"]?["result"]?.arrayElements else {
            throw TestRequirement.Unavailable(description: "prometheus refused \(expression): \(answer.text)")
        }
        return results.compactMap { result in
            guard case .object(let metric)? = result["metric"], let value = result["value"]?.arrayElements?.last?.stringValue.flatMap(Double.init)
            else { return nil }
            return (Dictionary(metric.compactMap { name, value in value.stringValue.map { (name, $0) } }) { first, _ in first }, value)
        }
    }

    /// The health of its scrape target as it saw it (`up`, `down`, `unknown`) and its last error.
    package func target() async throws -> (health: String, error: String) {
        let json = try JSONValue(parsing: try await get("/api/v1/targets").text)
        let first = json["data"]?["activeTargets"]?.arrayElements?.first
        return (first?["health"]?.stringValue ?? "unknown", first?["lastError"]?.stringValue ?? "")
    }

    private func get(_ path: String) async throws -> (status: Int, text: String) {
        let response = try await HTTPClient.shared.execute(HTTPClientRequest(url: baseURL + path), timeout: .seconds(10))
        return (Int(response.status.code), String(buffer: try await response.body.collect(upTo: 4 * 1024 * 1024)))
    }

    /// Stops it and removes its data.
    package func stop() async {
        process.send(SIGTERM)
        _ = await process.exitCode()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// `promtool` with `arguments` (`check rules FILE`, `test rules FILE`): whether it passed,
    /// and what it printed.
    package static func promtool(_ arguments: [String]) async throws -> (passed: Bool, printed: String) {
        let (_, tool) = try availability.get()
        let process = try ChildProcess.start(tool, arguments, environment: [:], errors: .sameAsOutput)
        // It ends within a second: a blocking read holds a thread only that long.
        let printed = String(decoding: try process.output?.readToEnd() ?? Data(), as: UTF8.self)
        return (await process.exitCode() == 0, printed)
    }
}
