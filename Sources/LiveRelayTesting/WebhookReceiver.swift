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

    /// The interpreter that has the library, or why there is none. Asked once, when the tests are planned.
    package static let interpreter = PythonProgram.interpreter(importing: "standardwebhooks", install: "pip install standardwebhooks==1.1.0")

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
        let log = log ?? TestFiles.path("webhooks", pathExtension: "jsonl")
        let (process, bound) = try await PythonProgram.start(
            try interpreter.get(), PythonProgram.script("webhook_receiver.py"), [secret, String(port), log, String(delay)],
            environment: redirect.map { ["REDIRECT": $0] } ?? [:])
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
