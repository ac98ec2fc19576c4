import ArgumentParser
import Foundation

/// What `liverelay serve` keeps in its data directory, named once for every command that reads it.
/// The folder is the owner's alone (0700): the database holds full push tokens, and the initial
/// keys file the first secrets.
struct DataDirectory {
    let path: String

    init(_ path: String) { self.path = path }

    var database: String { file("liverelay.sqlite") }
    var initialKeys: String { file("initial-keys.json") }
    var emulatorCA: String { file("emulator-ca.pem") }

    private func file(_ name: String) -> String { URL(fileURLWithPath: path).appendingPathComponent(name).path }

    /// Creates the folder, or takes away what group and others may do in one made before.
    func prepare() throws {
        let manager = FileManager.default
        do {
            if manager.fileExists(atPath: path) {
                try manager.setAttributes([.posixPermissions: 0o700], ofItemAtPath: path)
            } else {
                try manager.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            }
        } catch {
            throw ValidationError("data-dir: cannot make \(path) a folder only you can read: \(error.localizedDescription)")
        }
    }
}
