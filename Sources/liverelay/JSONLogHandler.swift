import ArgumentParser
import Foundation
import LiveActivityKit
import Logging

/// `--log-format`: lines for people (swift-log's own), or one JSON object a line for log collectors.
enum LogFormat: String, ExpressibleByArgument, CaseIterable {
    case text
    case json

    /// Makes every logger of this process write in this format, to standard error for JSON
    /// (standard output keeps the announcement), as swift-log's text does to standard output.
    func bootstrap() {
        switch self {
        case .text: break
        case .json: LoggingSystem.bootstrap { label in JSONLogHandler(label: label) }
        }
    }
}

/// One JSON object a line: `time` (ISO 8601 with milliseconds), `level`, `logger`, `message` and
/// every metadata item as a string member (`request.id`, `app`, `key`, …), for log collectors.
/// Metadata never overrides the four fixed members.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    private static let output = FileHandle.standardError
    private static let lock = NSLock()

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var all = metadata
        if let provided = metadataProvider?.get() { all.merge(provided) { _, new in new } }
        if let extra = event.metadata { all.merge(extra) { _, new in new } }
        let fixed: JSONValue.Members = [
            ("time", .string(Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))),
            ("level", .string(event.level.rawValue)), ("logger", .string(label)), ("message", .string(event.message.description)),
        ]
        let names = Set(fixed.map(\.0))
        let items = all.sorted { $0.key < $1.key }.filter { !names.contains($0.key) }.map { ($0.key, JSONValue.string("\($0.value)")) }
        let line = Data((JSONValue.object(fixed + items).serialized + [UInt8(ascii: "\n")]))
        Self.lock.withLock { Self.output.write(line) }
    }
}
