import AsyncHTTPClient
import Foundation
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import NIOHTTP1
import Synchronization

/// `liverelay serve` as a child process, as a user runs it: started, its announcement read,
/// then killed or stopped.
final class ServeProcess: Sendable {
    let process: ChildProcess
    /// Everything it printed on standard output so far.
    private let output: PrintedText
    /// `http://127.0.0.1:<port>`, from the announcement.
    let baseURL: String

    private init(process: ChildProcess, output: PrintedText, baseURL: String) {
        self.process = process
        self.output = output
        self.baseURL = baseURL
    }

    var printed: String { output.text }

    /// Starts `liverelay <arguments>` and waits for the announcement, which ends with the `curl`
    /// command to try.
    /// `yielding`: at the lowest CPU priority (`ChildProcess.start`). `environment`: variables
    /// set for it, besides this process's own but for `LIVERELAY_…`.
    static func start(_ arguments: [String], environment: [String: String] = [:], yielding: Bool = false) async throws -> ServeProcess {
        let process = try ChildProcess.start(
            liverelayExecutable.path, arguments,
            environment: ChildProcess.environment(dropping: "LIVERELAY_").merging(environment) { $1 }, errors: .sameAsOutput,
            yielding: yielding)
        let printed = PrintedText()
        // Drained as it comes, so that a full pipe never blocks the server.
        process.output?.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil } else { printed.append(data) }
        }
        while !printed.text.contains(#""audience""#) {
            guard process.isRunning else {
                throw ServeFailed(message: "liverelay serve exited with \(process.waitUntilExit()): \(printed.text)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let text = printed.text
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix("LiveRelay server:") }),
            let url = line.split(separator: " ").first(where: { $0.hasPrefix("http://") })
        else {
            process.send(SIGTERM)
            throw ServeFailed(message: "no API address in: \(text)")
        }
        return ServeProcess(process: process, output: printed, baseURL: String(url))
    }

    /// The start the announcement suggests: its path and its body, as printed.
    func printedStart() throws -> (path: String, body: JSONValue) {
        let text = printed
        guard let path = text.components(separatedBy: "$API").last?.split(separator: " ").first,
            let body = text.components(separatedBy: "-d '").last?.components(separatedBy: "'").first
        else { throw ServeFailed(message: "no start to try in: \(text)") }
        return (String(path), try JSONValue(parsing: body))
    }

    /// SIGKILL: no graceful anything, as when the machine's OOM killer or a power cut strikes.
    func kill() async {
        process.send(SIGKILL)
        _ = await process.exitCode()
    }

    /// SIGTERM, then its exit status once it has shut down. Awaited, not waited for on the
    /// thread: a server at the lowest priority on a busy machine may take long to shut down, and
    /// two blocked threads are the whole cooperative pool of a 2-core machine (every other test
    /// then stalls until its deadline).
    func stop() async -> Int32 {
        process.send(SIGTERM)
        let status = await process.exitCode()
        // Its errors are in `printed` (a crash's message among them): a failing run says why.
        if status != 0 {
            // A crash's report starts with the backtracer's "Program crashed" line.
            let text = printed
            let crash = text.range(of: "Program crashed").map { String(text[$0.lowerBound...].prefix(6000)) } ?? String(text.suffix(4000))
            print("serve exited with \(status) at SIGTERM; it printed:\n\(crash)")
        }
        return status
    }

    deinit {
        if process.isRunning {
            process.send(SIGKILL)
            process.waitUntilExit()
        }
    }

    /// A request to this server's API.
    func call(_ method: HTTPMethod, _ path: String, key: String?, body: JSONValue? = nil) async throws -> HTTPAnswer {
        try await httpCall(method, baseURL + path, key: key, body: body)
    }
}

struct HTTPAnswer {
    var status: Int
    var json: JSONValue
    /// The body as text (for answers that are not JSON, as `/metrics`).
    var text: String = ""
}

/// One JSON request over HTTP/1.1, with a bearer key if given.
func httpCall(_ method: HTTPMethod, _ url: String, key: String? = nil, body: JSONValue? = nil) async throws -> HTTPAnswer {
    var request = HTTPClientRequest(url: url)
    request.method = method
    if let key { request.headers.add(name: "authorization", value: "Bearer \(key)") }
    if let body {
        request.headers.add(name: "content-type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: body.serialized))
    }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
    let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
    return HTTPAnswer(
        status: Int(response.status.code), json: (try? JSONValue(parsing: Array(buffer: bytes))) ?? .null, text: String(buffer: bytes))
}

final class PrintedText: Sendable {
    private let state = Mutex("")
    var text: String { state.withLock { $0 } }
    func append(_ data: Data) { state.withLock { $0 += String(decoding: data, as: UTF8.self) } }
}

struct ServeFailed: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}

/// The keys `serve` made on its first start, from `<data-dir>/initial-keys.json`.
func initialKeys(dataDir: String) throws -> (admin: String, server: String, client: String) {
    let data = try Data(contentsOf: URL(fileURLWithPath: dataDir).appendingPathComponent("initial-keys.json"))
    let json = try JSONValue(parsing: [UInt8](data))
    guard let admin = json["admin"]?.stringValue, let server = json["server"]?.stringValue, let client = json["client"]?.stringValue else {
        throw ServeFailed(message: "initial-keys.json lacks a key: \(json)")
    }
    return (admin, server, client)
}

/// What `liverelay emulator` announces when it starts: the banner, and the ports in it.
struct EmulatorBanner {
    var text: String
    var sandboxPush: String
    var sandboxManagement: String
    var productionPush: String
    /// The control API's address, `http://127.0.0.1:<port>`.
    var control: String

    /// Reads the banner up to its example command.
    static func read(from emulator: ChildProcess) async throws -> EmulatorBanner {
        // Read on a thread of its own: an emulator at the lowest priority may take long to print,
        // and a blocked thread of the cooperative pool stalls every other test.
        let text = try await withDeadline(.seconds(20)) {
            await withCheckedContinuation { continuation in
                Thread.detachNewThread {
                    var text = ""
                    // Through the end of the last line, the command to try.
                    while !(text.components(separatedBy: "try: ").dropFirst().first?.contains("\n") ?? false),
                        let chunk = try? emulator.output?.read(upToCount: 1), !chunk.isEmpty
                    {
                        text += String(decoding: chunk, as: UTF8.self)
                    }
                    continuation.resume(returning: text)
                }
            }
        }
        // "sandbox pushes:   https://127.0.0.1:PORT  (…)"
        func port(after label: String) throws -> String {
            let line = text.split(separator: "\n").first { $0.hasPrefix(label) }
            guard let port = line?.split(separator: ":").dropFirst(3).first?.split(separator: " ").first else {
                throw ServeFailed(message: "no \(label) port in the emulator's banner: \(text)")
            }
            return String(port)
        }
        return EmulatorBanner(
            text: text, sandboxPush: try port(after: "sandbox pushes:"), sandboxManagement: try port(after: "sandbox channel management:"),
            productionPush: try port(after: "production pushes:"), control: "http://127.0.0.1:" + (try port(after: "control API:")))
    }
}

/// A new master key in a file of its own (for `--master-key-file`), as `head -c 32 /dev/urandom | base64` makes one.
func writeMasterKey() throws -> String {
    let path = TestFiles.path("master", pathExtension: "key")
    try (Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString() + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    return path
}
