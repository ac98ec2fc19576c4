import ArgumentParser
import Foundation
import LiveRelayHTTP
import LiveRelayStore

/// `liverelay backup` and `restore`: a SQLite server's database copied while it runs, and put
/// back. PostgreSQL has its own tools (`pg_dump`, `pg_restore`; see Documentation/operating.md).
struct Backup: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a SQLite server's database while it runs, consistent to one moment.",
        discussion: """
            Uses SQLite's online backup: the copy is one read's snapshot, taken while the
            server goes on writing, and checked whole. It holds everything accepted before
            that moment, with the pushes still to send, but not the master key that seals
            the apps' signing keys (<data-dir>/master.key): keep a copy of that apart.
            """)

    @Option(help: ArgumentHelp("The data directory `liverelay serve` uses.", valueName: "path")) var dataDir: String = "liverelay-data"
    @OptionGroup var database: DatabaseOption
    @Option(help: ArgumentHelp("The file to write; it must not exist.", valueName: "file")) var to: String

    func run() async throws {
        let path = try sqlitePath(database.location(in: DataDirectory(dataDir)), command: "backup")
        let summary: SQLiteStore.CopySummary
        do {
            summary = try await SQLiteStore.open(path: path).backup(to: to)
        } catch let refused as CopyRefused {
            throw ValidationError("to: \(refused)")
        }
        print("backup: \(to), \(summary.bytes) bytes, \(summary.pushesToSend) push(es) still to send in it")
        print("The master key is not in it: keep \(DataDirectory(dataDir).masterKey) (or yours) apart from it.")
    }
}

struct Restore: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Put a backup in place as a SQLite server's database (the server stopped).",
        discussion: """
            The backup is checked whole first. The data directory must have no database;
            start `liverelay serve` on it afterwards with the master key the backup's
            signing keys were sealed with (copy master.key into the data directory, or
            give --master-key-file): it sends the pushes the backup still had to send.
            """)

    @Option(help: ArgumentHelp("The data directory to restore into.", valueName: "path")) var dataDir: String = "liverelay-data"
    @OptionGroup var database: DatabaseOption
    @Option(help: ArgumentHelp("The backup `liverelay backup` wrote.", valueName: "file")) var from: String

    func run() async throws {
        let directory = DataDirectory(dataDir)
        let path = try sqlitePath(database.location(in: directory), command: "restore")
        guard FileManager.default.fileExists(atPath: from) else { throw ValidationError("from: no file at \(from)") }
        for file in [path, path + "-wal"] where FileManager.default.fileExists(atPath: file) {
            throw ValidationError("data-dir: \(file) exists: stop the server and move its database away first; restore never overwrites one")
        }
        try directory.prepare()
        let summary: SQLiteStore.CopySummary
        do {
            summary = try await SQLiteStore.restore(from: from, to: path)
        } catch let refused as CopyRefused {
            throw ValidationError("from: \(refused)")
        }
        print("restored \(from) to \(path): \(summary.pushesToSend) push(es) to send when the server starts")
        if !FileManager.default.fileExists(atPath: directory.masterKey) {
            print("Start it with the master key the backup was sealed with: copy it to \(directory.masterKey), or give --master-key-file.")
        }
    }
}

/// The SQLite file at `location`, or why the command does not apply.
private func sqlitePath(_ location: StoreLocation, command: String) throws -> String {
    guard case .sqlite(let path) = location else {
        throw ValidationError(
            "database: `liverelay \(command)` copies a SQLite database; for PostgreSQL use pg_dump and pg_restore (Documentation/operating.md)")
    }
    if command == "backup", !FileManager.default.fileExists(atPath: path) {
        throw ValidationError("data-dir: no database at \(path)")
    }
    return path
}
