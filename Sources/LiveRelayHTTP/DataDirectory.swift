import Foundation
import LiveActivityKit
import LiveRelayStore

/// What `liverelay serve` keeps in its data directory, named once for every command that reads it
/// (the server, `liverelay keys`, the benchmarks). The folder is the owner's alone (0700): the
/// database holds full push tokens, and the initial keys file the first secrets (0600).
package struct DataDirectory: Sendable {
    package let path: String

    package init(_ path: String) { self.path = path }

    package var database: String { file("liverelay.sqlite") }
    package var initialKeys: String { file("initial-keys.json") }
    /// The key sealing the SQLite store's signing keys, made on the first start when none is
    /// given (0600). A backup of the database alone does not hold it.
    package var masterKey: String { file("master.key") }
    /// The master key a rotation replaced, kept until a server has started with the new one.
    package var previousMasterKey: String { file("master.key.old") }
    package var emulatorCA: String { file("emulator-ca.pem") }
    /// The built-in emulator's simulated devices, kept across restarts (0600: it holds their tokens).
    package var emulatorDevices: String { file("emulator-devices.json") }

    private func file(_ name: String) -> String { URL(fileURLWithPath: path).appendingPathComponent(name).path }

    /// The secrets of the first keys, as kept in `initialKeys`; empty when there is no such file.
    package func keptInitialKeys() -> [APIKeyScope: String] {
        guard let data = FileManager.default.contents(atPath: initialKeys), let json = try? JSONValue(parsing: [UInt8](data)) else { return [:] }
        var keys: [APIKeyScope: String] = [:]
        for scope in APIKeyScope.allCases { keys[scope] = json[scope.rawValue]?.stringValue }
        return keys
    }
}
