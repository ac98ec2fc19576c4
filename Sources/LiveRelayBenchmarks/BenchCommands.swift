import APNs
import APNsEmulator
import ArgumentParser
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import NIOPosix
import Synchronization

/// `liverelay bench`: every figure Documentation/benchmarks.md quotes, each measured against a reference in the
/// same run. The endpoint and the server under load run as child processes of this executable.
package struct Bench: AsyncParsableCommand {
    package static let configuration = CommandConfiguration(
        abstract: "Benchmarks (build with -c release; debug builds are ~30× slower).",
        subcommands: [Client.self, Emulator.self, Devices.self, Server.self, Outbox.self, Soak.self, AsyncHTTPClientLoad.self, Endpoint.self])

    package init() {}

    /// A bench's `--database` is a PostgreSQL address: the SQLite it measures otherwise is its own.
    static func requirePostgres(_ database: String?, sqliteIs own: String) throws {
        if let database, case .sqlite = StoreLocation(database) {
            throw ValidationError("database: must be a postgres:// address; SQLite is \(own)")
        }
    }

    /// Runs `body` with a migrated store: `database`, or SQLite in a scratch folder removed after.
    static func withStore<Value>(_ database: String?, _ body: (any RelayStore, StoreLocation) async throws -> Value) async throws -> Value {
        let directory = try scratchFolder()
        defer { try? FileManager.default.removeItem(at: directory) }
        let location = StoreLocation(database ?? directory.appendingPathComponent("liverelay.sqlite").path)
        let store = try await location.open()
        return try await store.running {
            try await store.migrate()
            return try await body(store, location)
        }
    }

    /// A new folder for a run's files (keys, certificates, SQLite), which the run removes.
    static func scratchFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("liverelay-bench-\(UUID().uuidString)")
        try BenchInterruption.makeScratch(folder)
        return folder
    }
}

extension Bench {
    /// The endpoint under load, in its own process so that the client's CPU time is its own.
    struct Endpoint: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                "Serve an APNs endpoint (HTTP/2 + TLS) until standard input closes; a line \"accepted\" there is answered with how many pushes it accepted, a line \"latency 100\" changes the latency from then on, a line \"fault goaway\", \"fault reset\" or \"fault freeze\" plays that fault on the next request (full validation only).",
            shouldDisplay: false)

        @Option(help: "Port to listen on (0: any free port).") var port: Int = 0
        @Option(help: "Where to write the CA certificate (PEM).") var caFile: String
        @Option(help: "Judge every request as the emulator does, accepting provider tokens of this .p8 key (else accept all).")
        var emulatorKeyFile: String?
        @Option(help: "With --emulator-key-file, also accept this many numbered tokens.") var tokens: Int = 0
        @Option(help: "Answer every request this many milliseconds late: 100, or 40-120 drawn for each request.") var latency: String = "0"

        func validate() throws { _ = try APNsLatency.option(latency, "latency") }

        func run() async throws {
            let latency = try APNsLatency.option(latency, "latency")
            let setting: LatencySetting
            let certificates = try EmulatorCertificates.generate()
            try certificates.writeCertificateAuthority(to: caFile)
            let port: Int
            let stop: @Sendable () async -> Void
            var accepted: @Sendable () -> Int = { -1 }
            var faults: EmulatorFaults?
            if let emulatorKeyFile {
                let registry = EmulatorRegistry()
                registry.register(
                    try EmulatorKey(
                        p8PEM: String(contentsOfFile: emulatorKeyFile, encoding: .utf8), keyID: BenchFixture.keyID, teamID: BenchFixture.teamID))
                registry.register(EmulatorToken(hex: BenchFixture.token.hex, bundleID: BenchFixture.bundle.value, environment: .sandbox))
                for index in 0..<tokens {
                    registry.register(EmulatorToken(hex: BenchFixture.token(index), bundleID: BenchFixture.bundle.value, environment: .sandbox))
                }
                let emulator = try await APNsEmulator.start(
                    APNsEmulator.Configuration(environments: [.sandbox: EmulatorPorts(push: self.port)], latency: [.sandbox: latency]),
                    certificates: certificates, registry: registry)
                port = emulator.ports(.sandbox).push
                setting = emulator.latency(.sandbox)
                stop = { await emulator.shutdown() }
                accepted = { emulator.journal.counts["Success"] ?? 0 }
                faults = emulator.faults
            } else {
                setting = LatencySetting(latency)
                let server = try await HTTP2TLSServer.start(
                    port: self.port, certificates: certificates, responder: AcceptAllResponder(), latency: setting)
                port = server.port
                stop = { await server.shutdown() }
            }
            // Unbuffered: the parent reads this line through a pipe.
            FileHandle.standardOutput.write(Data("listening on 127.0.0.1:\(port)\n".utf8))
            // Runs until the parent closes our standard input (or dies), answering its questions:
            // a count read here costs the servers measured nothing, where one read from their
            // database would.
            let closed = AsyncStream<Void>.makeStream()
            Thread.detachNewThread { [accepted, faults] in
                while let line = readLine() {
                    if line == "accepted" { FileHandle.standardOutput.write(Data("\(accepted())\n".utf8)) }
                    if line == "faults", let faults { FileHandle.standardOutput.write(Data("faults \(faults.installed.count)\n".utf8)) }
                    if line.hasPrefix("fault "), let faults, let fault = BenchFault(rawValue: String(line.dropFirst(6))) {
                        _ = faults.add(EmulatorFault(fault.action))
                        FileHandle.standardOutput.write(Data("\(line)\n".utf8))
                    }
                    if line.hasPrefix("latency "), let changed = try? APNsLatency(parsing: String(line.dropFirst(8))) {
                        setting.latency = changed
                        FileHandle.standardOutput.write(Data("latency \(changed.text)\n".utf8))
                    }
                }
                closed.continuation.finish()
            }
            for await _ in closed.stream {}
            await stop()
        }
    }

    struct Emulator: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Load the APNs emulator with h2load: accept-all against full validation, one and four connections.",
            discussion: """
                Starts each endpoint in its own process and sends the same Live Activity update
                with h2load (100 streams per connection), alternating the two modes for
                --rounds rounds. Full validation checks headers, token, topic and provider
                token (ES256, verified once per connection) and journals every request.
                Targets: ≥ 15,000 pushes/s on one connection with full validation, and ≥ 80% of
                accept-all there.
                Needs h2load (Debian: nghttp2-client).
                """)

        @Option(help: "Pushes per h2load run.") var pushes: Int = 100_000
        @Option(help: "Streams per connection.") var streams: Int = 100
        @Option(help: "Rounds of (accept-all, full validation); the mean is reported.") var rounds: Int = 2
        @Option(help: "The h2load binary (Debian: nghttp2-client).") var h2load: String = "h2load"

        func validate() throws {
            guard pushes > 0, streams > 0, rounds > 0 else { throw ValidationError("pushes, streams and rounds must be positive") }
        }

        func run() async throws {
            let directory = try Bench.scratchFolder()
            defer { try? FileManager.default.removeItem(at: directory) }
            let privateKey = P256.Signing.PrivateKey()
            let keyFile = directory.appendingPathComponent("key.p8").path
            try privateKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
            let key = try APNsSigningKey(privateKey: privateKey, keyID: BenchFixture.keyID, teamID: BenchFixture.teamID)
            let request = try BenchFixture.request()
            let bodyFile = directory.appendingPathComponent("body.json").path
            try Data(request.body ?? []).write(to: URL(fileURLWithPath: bodyFile))

            let modes = [("accept-all", [String]()), ("full validation", ["--emulator-key-file", keyFile])]
            var rates: [String: [Int: [Double]]] = [:]
            print("h2load: \(pushes) pushes per run, \(streams) streams per connection, \(rounds) round(s)")
            for round in 1...rounds {
                for (mode, arguments) in modes {
                    let caFile = directory.appendingPathComponent("ca.pem").path
                    let endpoint = try EndpointProcess.start(caFile: caFile, arguments: arguments)
                    defer { endpoint.stop() }
                    let h2 = H2load(
                        binary: h2load, port: endpoint.port, request: request,
                        providerToken: key.makeProviderToken(issuedAt: Date()), bodyFile: bodyFile)
                    for connections in [1, 4] {
                        let rate = try h2.run(pushes: pushes, inFlight: streams * connections, connections: connections)
                        rates[mode, default: [:]][connections, default: []].append(rate)
                        print("round \(round): \(mode), \(connections) connection(s): \(String(format: "%.0f", rate)) pushes/s")
                    }
                }
            }
            func mean(_ mode: String, _ connections: Int) -> Double {
                let values = rates[mode]?[connections] ?? []
                return values.reduce(0, +) / Double(max(1, values.count))
            }
            print("")
            print("mode              1 connection    4 connections")
            for (mode, _) in modes {
                print(
                    "\(mode.padding(toLength: 18, withPad: " ", startingAt: 0))\(String(format: "%12.0f", mean(mode, 1)))    \(String(format: "%13.0f", mean(mode, 4)))  pushes/s"
                )
            }
            let full = mean("full validation", 1)
            print(
                "full validation / accept-all: \(String(format: "%.0f", 100 * full / mean("accept-all", 1)))% (1 connection, target ≥ 80%), \(String(format: "%.0f", 100 * mean("full validation", 4) / mean("accept-all", 4)))% (4 connections)"
            )
            print(
                "target ≥ 15000 pushes/s on one connection with full validation: \(full >= 15_000 ? "met" : "NOT met") (\(String(format: "%.0f", full)))"
            )
        }
    }

    struct Client: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send update pushes to a local accept-all endpoint in another process; compare with h2load on the same endpoint.",
            discussion: """
                Reports pushes/s, client CPU µs per push (user + system time of this process),
                p50/p99 latency and peak RSS; then h2load's rate for the same headers and body,
                measured just before and just after, and our rate as a fraction of their mean.
                Targets: ≥ 90% of h2load, ≤ 25 µs CPU per push.
                """)

        @Option(help: "Pushes to send in the measured run.") var pushes: Int = 100_000
        @Option(help: "Pushes in flight at once.") var inFlight: Int = 100
        @Option(help: "HTTP/2 connections.") var connections: Int = 1
        @Option(help: "Pushes sent before measuring (connection set-up, warm caches).") var warmup: Int = 5_000
        @Option(help: "The h2load binary (Debian: nghttp2-client).") var h2load: String = "h2load"
        @Flag(help: "Skip the h2load reference.") var skipH2load = false
        @Option(help: "The endpoint answers this many milliseconds late, as APNs at a distance: 100, or 40-120 drawn for each request.")
        var apnsLatency: String = "0"

        func validate() throws {
            guard pushes > 0, inFlight > 0, connections > 0, warmup >= 0 else {
                throw ValidationError("pushes, in-flight and connections must be positive")
            }
            _ = try APNsLatency.option(apnsLatency, "apns-latency")
        }

        func run() async throws {
            let directory = try Bench.scratchFolder()
            defer { try? FileManager.default.removeItem(at: directory) }
            let caFile = directory.appendingPathComponent("ca.pem").path

            let latency = try APNsLatency.option(apnsLatency, "apns-latency")
            let endpoint = try EndpointProcess.start(caFile: caFile, arguments: ["--latency", latency.text])
            defer { endpoint.stop() }
            print(
                "endpoint: 127.0.0.1:\(endpoint.port) (pid \(endpoint.pid)), \(pushes) pushes, \(inFlight) in flight, \(connections) connection(s), APNs latency \(latency)"
            )

            let key = try APNsSigningKey(privateKey: P256.Signing.PrivateKey(), keyID: BenchFixture.keyID, teamID: BenchFixture.teamID)
            let request = try BenchFixture.request()

            let bodyFile = directory.appendingPathComponent("body.json").path
            try Data(request.body ?? []).write(to: URL(fileURLWithPath: bodyFile))
            let h2 =
                skipH2load
                ? nil
                : H2load(
                    binary: h2load, port: endpoint.port, request: request,
                    providerToken: key.makeProviderToken(issuedAt: Date()), bodyFile: bodyFile)
            var reference: [Double] = []
            if let h2 {
                reference.append(try h2.run(pushes: pushes, inFlight: inFlight, connections: connections))
                print("h2load (before): \(format(reference[0])) pushes/s")
            }

            let configuration = APNsClient.Configuration(
                environment: .custom(host: "127.0.0.1", port: endpoint.port, channelManagementPort: endpoint.port, caFile: caFile),
                signingKey: key, connectionsPerHost: connections...connections, requestTimeout: .seconds(30))
            // One event loop for every connection, as `serve` runs each client (`APNsRoutes`).
            let loop = MultiThreadedEventLoopGroup.singleton.next()
            let result = try await withAPNsClient(configuration: configuration, eventLoopGroup: loop) { client in
                _ = try await sendPushes(client: client, count: warmup, inFlight: inFlight, request: request)
                return try await sendPushes(client: client, count: pushes, inFlight: inFlight, request: request)
            }

            if let h2 {
                reference.append(try h2.run(pushes: pushes, inFlight: inFlight, connections: connections))
                print("h2load (after):  \(format(reference[1])) pushes/s")
            }

            print("")
            print("liverelay client: \(format(result.rate)) pushes/s")
            print(
                "  CPU per push:   \(String(format: "%.1f", result.cpuMicrosecondsPerPush)) µs (user \(String(format: "%.1f", result.userMicrosecondsPerPush)), system \(String(format: "%.1f", result.systemMicrosecondsPerPush)))  target ≤ 25"
            )
            print("  latency:        p50 \(String(format: "%.2f", result.p50 * 1000)) ms, p99 \(String(format: "%.2f", result.p99 * 1000)) ms")
            print("  peak RSS:       \(result.peakRSSMegabytes) MiB")
            if !reference.isEmpty {
                let mean = reference.reduce(0, +) / Double(reference.count)
                print(
                    "  vs h2load:      \(String(format: "%.0f", 100 * result.rate / mean))% of \(format(mean)) pushes/s (mean of before and after)  target ≥ 90%"
                )
            }
            if result.failures > 0 { print("  failures:       \(result.failures)") }
        }

        private func format(_ rate: Double) -> String { String(format: "%.0f", rate) }
    }
}
