import Foundation
import GRDB

/// Copies of a SQLite store, taken while its server runs, and put back.
extension SQLiteStore {
    /// What a copy holds, for the operator: its size and the pushes it still has to send.
    package struct CopySummary: Sendable, Hashable {
        package var bytes: Int
        package var migrations: Int
        /// Pushes queued or being sent when the copy was taken: a server restored from it sends them.
        package var pushesToSend: Int
    }

    /// A consistent copy of the database in a new file at `path` (0600), taken with SQLite's
    /// online backup in one step: one read transaction's snapshot, while the server's writes go on
    /// (in WAL mode a reader never blocks the writer). The copy is one file (journal mode DELETE),
    /// checked whole before it is reported.
    package func backup(to path: String) async throws -> CopySummary {
        try Self.createPrivateFile(path)
        do {
            let copy = try await BlockingWork.run { [pool] in
                let copy = try DatabaseQueue(path: path)
                try pool.backup(to: copy)
                return copy
            }
            try await copy.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = DELETE") }
            let summary = try await Self.check(copy, path: path)
            try copy.close()
            return summary
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            throw error
        }
    }

    /// Puts the copy at `backup` in place as the database at `path`, which must not exist: the
    /// copy is checked whole, and must be a LiveRelay database. The server migrates it on start.
    package static func restore(from backup: String, to path: String) async throws -> CopySummary {
        var configuration = Configuration()
        configuration.readonly = true
        let source: DatabaseQueue
        let summary: CopySummary
        do {
            source = try await BlockingWork.run { [configuration] in try DatabaseQueue(path: backup, configuration: configuration) }
            summary = try await check(source, path: backup)
        } catch let error as DatabaseError {
            throw CopyRefused("\(backup) is not a SQLite database: \(error.message ?? "\(error.resultCode)")")
        }
        try createPrivateFile(path)
        do {
            try await BlockingWork.run {
                let target = try DatabaseQueue(path: path)
                try source.backup(to: target)
                try target.close()
            }
        } catch {
            try? FileManager.default.removeItem(atPath: path)
            throw error
        }
        return summary
    }

    /// `PRAGMA integrity_check` over every page, then what the copy holds.
    private static func check(_ database: some DatabaseReader, path: String) async throws -> CopySummary {
        try await database.read { db in
            let verdict = try String.fetchAll(db, sql: "PRAGMA integrity_check")
            guard verdict == ["ok"] else { throw CopyRefused("\(path) is damaged: \(verdict.prefix(3).joined(separator: "; "))") }
            guard try db.tableExists("grdb_migrations"), try db.tableExists("deliveries") else {
                throw CopyRefused("\(path) is not a LiveRelay database")
            }
            let bytes = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            return CopySummary(
                bytes: bytes, migrations: try Int.fetchOne(db, sql: "SELECT count(*) FROM grdb_migrations") ?? 0,
                pushesToSend: try Int.fetchOne(db, sql: "SELECT count(*) FROM deliveries WHERE status IN ('queued', 'sending')") ?? 0)
        }
    }

    /// A new empty file only its owner reads, or an error when one is there.
    private static func createPrivateFile(_ path: String) throws {
        guard !FileManager.default.fileExists(atPath: path) else { throw CopyRefused("\(path) exists; not overwriting it") }
        guard FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600]) else {
            throw CopyRefused("cannot make \(path)")
        }
    }
}

/// Why a copy cannot be taken or put back, in one line.
package struct CopyRefused: Error, CustomStringConvertible {
    package let description: String
    init(_ description: String) { self.description = description }
}
