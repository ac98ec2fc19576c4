import Foundation

/// Where the tests write files: one folder of this process's in the system's temporary folder,
/// removed when the process exits. Without it a run of the suite left about 170 MB behind (a
/// store per contract test, certificates, data directories), and CI's disk has run out before.
/// The PostgreSQL cluster the tests start is removed with its server (`TestPostgres`).
package enum TestFiles {
    /// This process's folder, made on first use.
    package static let root: String = {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("liverelay-tests-\(UUID().uuidString.prefix(8))").path
        try? FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        rootAtExit = root
        atexit { try? FileManager.default.removeItem(atPath: TestFiles.rootAtExit) }
        return root
    }()

    nonisolated(unsafe) private static var rootAtExit = ""

    /// A path no one has used, `<name>-<UUID>` with `pathExtension` if there is one; nothing is
    /// written there.
    package static func path(_ name: String, pathExtension: String? = nil) -> String {
        let file = "\(name)-\(UUID().uuidString)" + (pathExtension.map { ".\($0)" } ?? "")
        return (root as NSString).appendingPathComponent(file)
    }

    /// A new, empty folder.
    package static func folder(_ name: String) throws -> String {
        let folder = path(name)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        return folder
    }
}
