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
public struct Bench: AsyncParsableCommand {
    public static let configuration = CommandConfiguration(
        abstract: "Benchmarks (build with -c release; debug builds are ~30× slower).",
        subcommands: [Client.self, Emulator.self, Devices.self, Server.self, Outbox.self, AsyncHTTPClientLoad.self, Endpoint.self])

    public init() {}

    /// A bench's `--database` is a PostgreSQL address: the SQLite it measures otherwise is its own.
    static func requirePostgres(_ database: String?, sqliteIs own: String) throws {
        if let database, case .sqlite = StoreLocation(database) {
            throw ValidationError("database: must be a postgres:// address; SQLite is \(own)")
        }
    }

    /// A new folder for a run's files (keys, certificates, SQLite), which the run removes.
    static func scratchFolder() throws -> URL {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("liverelay-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        BenchInterruption.madeScratch(folder)
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

/// What one run of pushes measured.
struct PushRunResult {
    var rate: Double
    var userMicrosecondsPerPush: Double
    var systemMicrosecondsPerPush: Double
    var cpuMicrosecondsPerPush: Double { userMicrosecondsPerPush + systemMicrosecondsPerPush }
    var p50: Double
    var p99: Double
    var peakRSSMegabytes: Int
    var failures: Int
}

/// `count` pushes through `inFlight` workers; wall time, this process's CPU time, latencies.
func sendPushes(client: APNsClient, count: Int, inFlight: Int, request: APNsRequest) async throws -> PushRunResult {
    let next = Counter()
    let before = resourceUsage()
    let start = ContinuousClock.now
    let (latencies, failures) = try await withThrowingTaskGroup(of: ([Double], Int).self) { group in
        for _ in 0..<inFlight {
            group.addTask(executorPreference: client.pushExecutor) {
                var latencies: [Double] = []
                latencies.reserveCapacity(count / inFlight + 1)
                var failures = 0
                while next.take() < count {
                    let sent = ContinuousClock.now
                    let raw = try await client.execute(request)
                    if raw.status != 200 { failures += 1 }
                    latencies.append((ContinuousClock.now - sent).seconds)
                }
                return (latencies, failures)
            }
        }
        var all: [Double] = []
        var failures = 0
        for try await (part, failed) in group {
            all += part
            failures += failed
        }
        return (all, failures)
    }
    let seconds = (ContinuousClock.now - start).seconds
    let after = resourceUsage()
    let sorted = latencies.sorted()
    return PushRunResult(
        rate: Double(count) / seconds,
        userMicrosecondsPerPush: (after.user - before.user) * 1e6 / Double(count),
        systemMicrosecondsPerPush: (after.system - before.system) * 1e6 / Double(count),
        p50: sorted.percentile(0.50), p99: sorted.percentile(0.99),
        peakRSSMegabytes: after.maxRSSKilobytes / 1024, failures: failures)
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension [Double] {
    /// The value at fraction `p` of a sorted array.
    func percentile(_ p: Double) -> Double { isEmpty ? 0 : self[Swift.min(count - 1, Int(Double(count) * p))] }
}

/// What every benchmark sends: one Live Activity update to one token, signed by a key with these ids.
enum BenchFixture {
    static let keyID = "BENCH00001"
    static let teamID = "BENCHTEAM1"
    static let bundle = try! BundleID("com.example.bench")
    static let token = try! DeviceToken(String(repeating: "5a", count: 80))

    /// The `index`th of the numbered tokens a benchmark registers in bulk.
    static func token(_ index: Int) -> String {
        String(repeating: "5b", count: 72) + hex16(index)
    }

    /// The update tokens under "match" that a fan-out is sent to.
    static func fanOutTokens(_ count: Int, registeredAt: Date) -> [ActivityTokenRecord] {
        (0..<count).map { index in
            ActivityTokenRecord(
                bundleID: bundle.value, key: "match", deviceID: "fan-\(index)", token: token(index), frequentPushesEnabled: false,
                environment: .sandbox, registeredAt: registeredAt)
        }
    }

    /// Registers tokens through the store, the way the registration routes do. PostgreSQL takes
    /// them in bulk (`importTokens`), as a transaction each would take most of an hour for a million.
    static func register(
        _ store: any RelayStore, activityTokens: [ActivityTokenRecord], attributesType: String, pushToStart: [PushToStartTokenRecord] = []
    ) async throws {
        if let postgres = store as? PostgresStore {
            try await postgres.importTokens(activityTokens: activityTokens, attributesType: attributesType, pushToStart: pushToStart)
            return
        }
        for token in activityTokens { try await store.saveActivityToken(token, attributesType: attributesType) }
        for token in pushToStart { try await store.savePushToStartToken(token) }
    }

    /// `index` as 16 hexadecimal digits.
    static func hex16(_ index: Int) -> String {
        let digits = String(index, radix: 16)
        return String(repeating: "0", count: max(0, 16 - digits.count)) + digits
    }

    static func request() throws -> APNsRequest {
        let payload = try LiveActivityPayload.update(
            content: ActivityContent(state: ["driverName": "Alex", "step": "delivering", "eta": "12 min"], staleDate: nil),
            timestamp: Date())
        return try APNsRequest.liveActivity(payload, to: token, topic: bundle)
    }
}

final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    /// The value before incrementing.
    func take() -> Int { value.wrappingAdd(1, ordering: .relaxed).oldValue }
}

func resourceUsage() -> (user: Double, system: Double, maxRSSKilobytes: Int) {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func seconds(_ t: timeval) -> Double { Double(t.tv_sec) + Double(t.tv_usec) / 1e6 }
    return (seconds(usage.ru_utime), seconds(usage.ru_stime), Int(usage.ru_maxrss))
}

/// Runs this executable with `arguments` and reads the first line it prints.
func startThisExecutable(_ arguments: [String], input: Pipe? = nil) throws -> (process: Process, output: Pipe, firstLine: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    process.arguments = arguments
    let output = Pipe()
    process.standardOutput = output
    if let input { process.standardInput = input }
    try process.run()
    BenchInterruption.started(process.processIdentifier)
    var line = Data()
    while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
        line.append(byte)
    }
    return (process, output, String(decoding: line, as: UTF8.self))
}

/// `liverelay bench endpoint` as a child process.
struct EndpointProcess {
    let process: Process
    let input: Pipe
    let output: Pipe
    let port: Int
    var pid: Int32 { process.processIdentifier }

    static func start(caFile: String, arguments: [String] = []) throws -> EndpointProcess {
        let input = Pipe()
        // The first line says where it listens.
        let (process, output, text) = try startThisExecutable(["bench", "endpoint", "--ca-file", caFile] + arguments, input: input)
        guard text.hasPrefix("listening on "), let port = text.split(separator: ":").last.flatMap({ Int($0) }) else {
            process.terminate()
            BenchInterruption.stopped(process.processIdentifier)
            throw ValidationError("the benchmark endpoint did not start: \(text)")
        }
        return EndpointProcess(process: process, input: input, output: output, port: port)
    }

    /// How many pushes the endpoint has accepted since it started (with full validation only).
    func accepted() throws -> Int {
        let count = try ask("accepted") { Int($0) }
        guard count >= 0 else { throw ValidationError("the benchmark endpoint counts pushes only with full validation") }
        return count
    }

    /// Answers from now on after `latency`; returns once the endpoint has said so.
    func answer(after latency: APNsLatency) throws {
        let said = "latency \(latency.text)"
        _ = try ask(said) { $0 == said ? true : nil }
    }

    /// Plays `fault` on the next request; returns once the endpoint has said so.
    func play(_ fault: BenchFault) throws {
        let said = "fault \(fault.rawValue)"
        _ = try ask(said) { $0 == said ? true : nil }
    }

    /// How many faults played with `play` have not met their request yet.
    func faultsInForce() throws -> Int {
        try ask("faults") { $0.hasPrefix("faults ") ? Int($0.dropFirst(7)) : nil }
    }

    /// Writes `question` and returns the first line after it that `answer` reads (a log line may
    /// come first).
    private func ask<T>(_ question: String, _ answer: (String) -> T?) throws -> T {
        try input.fileHandleForWriting.write(contentsOf: Data((question + "\n").utf8))
        while true {
            var line = Data()
            while let byte = try output.fileHandleForReading.read(upToCount: 1), !byte.isEmpty, byte != Data("\n".utf8) {
                line.append(byte)
            }
            if let answered = answer(String(decoding: line, as: UTF8.self)) { return answered }
            guard !line.isEmpty else { throw ValidationError("the benchmark endpoint did not answer \"\(question)\"") }
        }
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        BenchInterruption.stopped(pid)
    }
}

/// h2load with the same headers and body as our client.
private struct H2load {
    let binary: String
    let port: Int
    let request: APNsRequest
    let providerToken: String
    let bodyFile: String

    /// h2load's requests per second.
    func run(pushes: Int, inFlight: Int, connections: Int) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        var arguments = [binary, "-n", String(pushes), "-c", String(connections), "-m", String(max(1, inFlight / connections)), "-t", "1"]
        arguments += ["-H", "authorization: bearer \(providerToken)"]
        for header in request.headers { arguments += ["-H", "\(header.name): \(header.value)"] }
        arguments += ["-d", bodyFile, "https://127.0.0.1:\(port)\(request.path)"]
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        do {
            try process.run()
        } catch {
            throw ValidationError("cannot run \(binary) (apt-get install nghttp2-client, or --skip-h2load): \(error)")
        }
        // Started with SIGINT ignored (as this process has it): it stops with the benchmark instead.
        BenchInterruption.started(process.processIdentifier)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        BenchInterruption.stopped(process.processIdentifier)
        let text = String(decoding: data, as: UTF8.self)
        // "finished in 5.01s, 19960.12 req/s, 1.46MB/s" and "requests: N total, N started, N done, N succeeded, ..."
        guard process.terminationStatus == 0,
            let finished = text.split(separator: "\n").first(where: { $0.hasPrefix("finished in") }),
            let rateText = finished.split(separator: ",").dropFirst().first?.split(separator: " ").first,
            let rate = Double(rateText)
        else {
            throw ValidationError("h2load failed:\n\(text)")
        }
        if let requests = text.split(separator: "\n").first(where: { $0.hasPrefix("requests:") }), !requests.contains("\(pushes) succeeded") {
            throw ValidationError("h2load did not get \(pushes) successes: \(requests)")
        }
        return rate
    }
}

extension APNsLatency {
    /// A command line's latency option, or a message naming it.
    static func option(_ text: String, _ name: String) throws -> APNsLatency {
        do throws(LatencyError) {
            return try APNsLatency(parsing: text)
        } catch {
            throw ValidationError("\(name): \(error)")
        }
    }
}

/// The faults `bench server --bad-day` plays in the middle of a fan-out.
enum BenchFault: String, CaseIterable, Sendable {
    /// GOAWAY: the connection's unprocessed streams are to be sent again elsewhere.
    case goaway
    /// The connection drops with its streams unanswered.
    case reset
    /// The connection holds every answer for 5 seconds.
    case freeze

    var action: EmulatorFault.Action {
        switch self {
        case .goaway: .goAway(reason: .shutdown)
        case .reset: .resetConnection
        case .freeze: .freeze(.seconds(5))
        }
    }
}
