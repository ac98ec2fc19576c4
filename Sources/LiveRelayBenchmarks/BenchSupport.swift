import APNs
import APNsEmulator
import ArgumentParser
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import NIOPosix
import Synchronization

// What the benchmarks share: running pushes, the fixture they send, child processes, h2load.

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
struct H2load {
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
