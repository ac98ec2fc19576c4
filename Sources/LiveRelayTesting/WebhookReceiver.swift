import Foundation
import LiveActivityKit
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A real webhook receiver for the tests: `Tests/Support/webhook_receiver.py`, which verifies
/// every delivery with the Standard Webhooks specification's Python library from PyPI
/// (`standardwebhooks`), and logs what it received. Where Python or the library is missing,
/// `availability` says so, and CI fails on it (as with `TestPostgres`).
package final class WebhookReceiver: Sendable {
    /// One request the receiver got.
    package struct Received: Sendable {
        package var verified: Bool
        /// The `webhook-id` header.
        package var id: String?
        /// The verified event, as the library parsed it.
        package var event: JSONValue?
        package var error: String?
    }

    package static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/Support/webhook_receiver.py").path

    /// The first `python3` on the PATH (or `LIVERELAY_PYTHON`).
    package static let python: String? = {
        if let named = ProcessInfo.processInfo.environment["LIVERELAY_PYTHON"] { return named }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/python3" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// The interpreter that has the library (the program itself, not a version manager's shim:
    /// pyenv's runs a shell and several programs at every start, 0.46 s against 0.17 s here while
    /// the machine compiled), or why there is none. Asked once, when the tests are planned.
    package static let interpreter: Result<String, TestRequirement.Unavailable> = {
        guard let python else { return .failure(.init(description: "python3 is not on the PATH")) }
        guard
            let check = try? ChildProcess.start(
                python, ["-c", "import standardwebhooks, sys; print(sys.executable)"], environment: ProcessInfo.processInfo.environment),
            let printed = try? check.output?.readToEnd(), check.waitUntilExit() == 0
        else {
            return .failure(.init(description: "\(python) cannot import standardwebhooks (pip install standardwebhooks==1.1.0)"))
        }
        let executable = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return .success(FileManager.default.isExecutableFile(atPath: executable) ? executable : python)
    }()

    /// Whether there is a Python with the library, or why not.
    package static var availability: Result<Void, TestRequirement.Unavailable> { interpreter.map { _ in () } }

    package static var isAvailable: Bool { availability.isMet }

    package static var skipNote: String { availability.skipNote("webhooks were NOT verified with the Standard Webhooks library") }

    package let port: Int
    package let secret: String
    /// The file it logs to: a receiver started again with it goes on where this one stopped.
    package let log: String
    private let process: ChildProcess

    private init(port: Int, secret: String, log: String, process: ChildProcess) {
        self.port = port
        self.secret = secret
        self.log = log
        self.process = process
    }

    package var url: String { "http://127.0.0.1:\(port)/hooks" }

    /// Starts a receiver that verifies with `secret`, on `port` (0: a free one), logging to `log`
    /// (a new file unless given: a receiver started again on the same port and log goes on), and
    /// answering `delay` seconds after it logged a request; with `redirect`, every answer is a
    /// `307` to that address.
    package static func start(secret: String, port: Int = 0, log: String? = nil, delay: Double = 0, redirect: String? = nil) async throws
        -> WebhookReceiver
    {
        let interpreter = try interpreter.get()
        let log = log ?? TestFiles.path("webhooks", pathExtension: "jsonl")
        let process = try ChildProcess.start(
            interpreter, [script, secret, String(port), log, String(delay)],
            environment: ProcessInfo.processInfo.environment.merging(redirect.map { ["REDIRECT": $0] } ?? [:]) { _, new in new },
            errors: .sameAsOutput)
        // Its first line is the port it listens on. Read as it comes, never by a blocking read:
        // that would hold one of the cooperative pool's threads (two on this machine).
        let printed = Mutex("")
        process.output?.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil } else { printed.withLock { $0 += String(decoding: data, as: UTF8.self) } }
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while !printed.withLock({ $0.contains("\n") }), process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let line = printed.withLock { $0.split(separator: "\n").first.map(String.init) ?? $0 }
        guard let bound = Int(line) else {
            // A traceback: let it finish printing, so that the error says all of it.
            let finishing = ContinuousClock.now + .seconds(5)
            while process.isRunning, ContinuousClock.now < finishing { try await Task.sleep(for: .milliseconds(20)) }
            process.send(SIGKILL)
            _ = await process.exitCode()
            throw TestRequirement.Unavailable(description: "the webhook receiver did not start: \(printed.withLock { $0 })")
        }
        return WebhookReceiver(port: bound, secret: secret, log: log, process: process)
    }

    /// What it received so far, in order.
    package func received() throws -> [Received] {
        guard let text = try? String(contentsOfFile: log, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { line in
            let json = try JSONValue(parsing: String(line))
            return Received(
                verified: json["verified"] == .bool(true), id: json["id"]?.stringValue, event: json["event"], error: json["error"]?.stringValue)
        }
    }

    /// Stops it (the port is free again once this returns).
    package func stop() async {
        process.send(SIGKILL)
        _ = await process.exitCode()
    }
}
