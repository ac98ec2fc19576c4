import Foundation
import LiveActivityKit
import LiveRelayStore

/// What `liverelay serve` keeps in its data directory, named once for every command that reads it
/// (the server, `liverelay keys`, the benchmarks). The folder is the owner's alone (0700): the
/// database holds full push tokens, and the initial keys file the first secrets (0600).
public struct DataDirectory: Sendable {
    public let path: String

    public init(_ path: String) { self.path = path }

    public var database: String { file("liverelay.sqlite") }
    public var initialKeys: String { file("initial-keys.json") }
    public var emulatorCA: String { file("emulator-ca.pem") }
    /// The built-in emulator's simulated devices, kept across restarts (0600: it holds their tokens).
    public var emulatorDevices: String { file("emulator-devices.json") }

    private func file(_ name: String) -> String { URL(fileURLWithPath: path).appendingPathComponent(name).path }

    /// The secrets of the first keys, as kept in `initialKeys`; empty when there is no such file.
    public func keptInitialKeys() -> [APIKeyScope: String] {
        guard let data = FileManager.default.contents(atPath: initialKeys), let json = try? JSONValue(parsing: [UInt8](data)) else { return [:] }
        var keys: [APIKeyScope: String] = [:]
        for scope in APIKeyScope.allCases { keys[scope] = json[scope.rawValue]?.stringValue }
        return keys
    }
}
