import Foundation
import LiveActivityKit

#if canImport(Glibc)
    import Glibc
#endif

/// A real OTLP/HTTP trace receiver for the tests: `Tests/Support/otlp_receiver.py`, which decodes
/// every export with OpenTelemetry's own protobuf definitions from PyPI (`opentelemetry-proto`),
/// as a collector would, and logs each span. Where Python or the package is missing,
/// `availability` says so, and CI fails on it.
package final class OTLPReceiver: Sendable {
    /// One span as the receiver decoded it; ids in hex, `parent` empty for a trace's root.
    package struct Span: Sendable {
        package var trace: String
        package var id: String
        package var parent: String
        package var name: String
        package var kind: String
        package var service: String?
        package var attributes: JSONValue
    }

    package static let interpreter = PythonProgram.interpreter(
        importing: "opentelemetry.proto.collector.trace.v1.trace_service_pb2", install: "pip install opentelemetry-proto==1.45.2")

    package static var isAvailable: Bool { interpreter.isMet }

    package static var skipNote: String { interpreter.skipNote("traces were NOT decoded as OTLP") }

    /// The collector's address for `serve --otlp-endpoint`.
    package let endpoint: String
    private let log: String
    private let process: ChildProcess

    private init(endpoint: String, log: String, process: ChildProcess) {
        self.endpoint = endpoint
        self.log = log
        self.process = process
    }

    package static func start() async throws -> OTLPReceiver {
        let log = TestFiles.path("spans", pathExtension: "jsonl")
        let (process, port) = try await PythonProgram.start(try interpreter.get(), PythonProgram.script("otlp_receiver.py"), [log])
        return OTLPReceiver(endpoint: "http://127.0.0.1:\(port)", log: log, process: process)
    }

    /// The spans received so far; throws on an export it could not decode.
    package func spans() throws -> [Span] {
        guard let text = try? String(contentsOfFile: log, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { line in
            let json = try JSONValue(parsing: String(line))
            if let error = json["error"]?.stringValue { throw TestRequirement.Unavailable(description: "an export did not decode: \(error)") }
            return Span(
                trace: json["trace"]?.stringValue ?? "", id: json["span"]?.stringValue ?? "", parent: json["parent"]?.stringValue ?? "",
                name: json["name"]?.stringValue ?? "", kind: json["kind"]?.stringValue ?? "", service: json["service"]?.stringValue,
                attributes: json["attributes"] ?? .null)
        }
    }

    package func stop() async {
        process.send(SIGKILL)
        _ = await process.exitCode()
        try? FileManager.default.removeItem(atPath: log)
    }
}
