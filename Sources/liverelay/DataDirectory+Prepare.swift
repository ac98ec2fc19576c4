import ArgumentParser
import Foundation
import LiveRelayHTTP

extension DataDirectory {
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
