import APNs
import APNsEmulator
import ArgumentParser
import Crypto
import Foundation
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SimulatedDevices
import UnixSignals
import WebPages

/// The first keys: made on the first start (`RelayServer.prepare`) and kept in the data directory
/// (0600), where later starts and the benchmarks read them; their secrets are printed only when
/// they are made.
enum InitialKeys {
    /// Writes the keys a first start made to the data directory's keys file (0600), replacing it;
    /// nothing when none was made. The secrets exist nowhere else: a start that cannot keep them
    /// must not go on.
    static func keep(_ keys: [APIKeyScope: String], in directory: DataDirectory) throws {
        guard !keys.isEmpty else { return }
        let json = JSONValue.object(APIKeyScope.allCases.compactMap { scope in keys[scope].map { (scope.rawValue, .string($0)) } })
        try? FileManager.default.removeItem(atPath: directory.initialKeys)
        guard FileManager.default.createFile(atPath: directory.initialKeys, contents: Data(json.serialized), attributes: [.posixPermissions: 0o600])
        else { throw ValidationError("data-dir: cannot write \(directory.initialKeys)") }
    }

    /// The client key the demo iPhone's app reports with: the initial one, or, in a data directory
    /// that keeps none (restored from a backup, which holds only the database), one made now for
    /// it and kept beside the others (without it, a restored server had no demo iPhone).
    static func demoClientKey(
        server: RelayServer, made: [APIKeyScope: String], app: String, in directory: DataDirectory
    ) async throws -> String {
        if let client = made[.client] ?? directory.keptInitialKeys()[.client] { return client }
        let secret = try await server.relay.createAPIKey(name: "demo iPhone's app", scope: .client, app: app).secret
        var kept = directory.keptInitialKeys()
        kept[.client] = secret
        try keep(kept, in: directory)
        return secret
    }
}
