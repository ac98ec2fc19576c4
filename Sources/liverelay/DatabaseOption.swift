import ArgumentParser
import Foundation
import LiveRelayHTTP
import LiveRelayStore

/// `--database`: where the server's data lives. The option wins over `LIVERELAY_DATABASE`, which
/// wins over the config file's `"database"`; without any, the SQLite file in the data directory.
struct DatabaseOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The database: a SQLite file, or postgres://user@host:5432/database, which several instances may share (also LIVERELAY_DATABASE). Default: <data-dir>/liverelay.sqlite.",
            valueName: "path or url"))
    var database: String?

    func location(in directory: DataDirectory, configured: String? = nil) -> StoreLocation {
        let given = database ?? ProcessInfo.processInfo.environment["LIVERELAY_DATABASE"].flatMap { $0.isEmpty ? nil : $0 } ?? configured
        return given.map(StoreLocation.init) ?? .sqlite(path: directory.database)
    }

    /// Opens the store, brings its schema up to date and runs `body` with it, the store running
    /// for as long as `body` runs; what fails to open names the option.
    static func withMigratedStore<Value>(_ location: StoreLocation, _ body: (any RelayStore) async throws -> Value) async throws -> Value {
        let store: any RelayStore
        do {
            store = try await location.open()
        } catch {
            throw ValidationError("database: \(error)")
        }
        return try await store.running {
            do {
                try await store.migrate()
            } catch {
                throw ValidationError("database: cannot use \(location): \(StoreLocation.explain(error))")
            }
            return try await body(store)
        }
    }
}
