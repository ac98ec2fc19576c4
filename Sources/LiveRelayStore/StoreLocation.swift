import Foundation
import PostgresNIO

/// Where a server keeps its data: a SQLite file (the embedded default), or a PostgreSQL database
/// that several instances share.
package enum StoreLocation: Sendable, Hashable, CustomStringConvertible {
    case sqlite(path: String)
    case postgres(url: String)

    /// `postgres://…` or `postgresql://…` is a PostgreSQL database; anything else a SQLite file's path.
    package init(_ text: String) {
        let lowered = text.lowercased()
        self = lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://") ? .postgres(url: text) : .sqlite(path: text)
    }

    /// Opens the store (not migrated yet). Throws `InvalidDatabaseURL` for an address that does
    /// not read; a server that cannot be reached shows at the first statement.
    package func open() async throws -> any RelayStore {
        switch self {
        case .sqlite(let path): try await SQLiteStore.open(path: path)
        case .postgres(let url): try PostgresStore(url: url)
        }
    }

    /// The file, or the database's address without its password.
    package var description: String {
        switch self {
        case .sqlite(let path): path
        case .postgres(let url): (try? PostgresURL(url).description) ?? "a PostgreSQL database"
        }
    }

    /// What went wrong opening or using the store, in words a person can act on. PostgreSQL's
    /// errors describe themselves only generically (so as not to leak data): this reads the
    /// server's message or the connection's error.
    package static func explain(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        if let message = error.serverInfo?[.message] {
            return "PostgreSQL: \(message)" + (error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? "")
        }
        if let underlying = error.underlying { return "PostgreSQL: \(underlying)" }
        return "PostgreSQL: \(error.code)"
    }
}
