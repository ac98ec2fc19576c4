import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// A PostgreSQL address as `libpq` reads one: `postgres://user:password@host:port/database`,
/// `?host=/dir` for a Unix socket in `/dir`, `?sslmode=disable|prefer|require`.
struct PostgresURL: CustomStringConvertible {
    enum Endpoint {
        case socket(path: String)
        case tcp(host: String, port: Int)
    }

    enum SSLMode: String {
        case disable, prefer, require
    }

    var endpoint: Endpoint
    var user: String
    var password: String?
    var database: String
    var sslMode: SSLMode
    /// libpq's `options` (`-c search_path=…`, say), sent to the server as they are.
    var options: String?
    var description: String

    init(_ url: String) throws {
        guard let components = URLComponents(string: url), ["postgres", "postgresql"].contains(components.scheme?.lowercased() ?? "") else {
            throw InvalidDatabaseURL("a PostgreSQL address starts with postgres://, as postgres://user@host:5432/database")
        }
        let items = Dictionary((components.queryItems ?? []).map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        user = components.user.flatMap { $0.removingPercentEncoding } ?? "postgres"
        password = components.password.flatMap { $0.removingPercentEncoding }
        let path = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        database = path.isEmpty ? user : (path.removingPercentEncoding ?? path)
        let port = components.port ?? Int(items["port"] ?? "") ?? 5432
        let host = items["host"] ?? components.host.flatMap { $0.isEmpty ? nil : $0 } ?? "localhost"
        switch items["sslmode"] ?? "prefer" {
        case "disable": sslMode = .disable
        case "prefer", "allow": sslMode = .prefer
        // Stricter than libpq's `require`: the certificate is verified too.
        case "require", "verify-ca", "verify-full": sslMode = .require
        case let mode: throw InvalidDatabaseURL("sslmode \"\(mode)\" is not one of disable, prefer, require")
        }
        options = items["options"]
        if host.hasPrefix("/") {
            endpoint = .socket(path: "\(host)/.s.PGSQL.\(port)")
            description = "postgres://\(user)@/\(database)?host=\(host)&port=\(port)"
        } else {
            endpoint = .tcp(host: host, port: port)
            description = "postgres://\(user)@\(host):\(port)/\(database)"
        }
    }

    var configuration: PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        switch endpoint {
        case .socket(let path):
            configuration = .init(unixSocketPath: path, username: user, password: password, database: database)
        case .tcp(let host, let port):
            let tls: PostgresClient.Configuration.TLS =
                switch sslMode {
                case .disable: .disable
                case .prefer: .prefer(.makeClientConfiguration())
                case .require: .require(.makeClientConfiguration())
                }
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        }
        configuration.options.additionalStartupParameters = Self.planOnce + (options.map { [("options", $0)] } ?? [])
        return configuration
    }

    /// The store's statements are prepared once per connection (`PreparedStatements`), and each is
    /// planned once too: left to choose, PostgreSQL planned a change's read and write again at
    /// every run (their generic plans look dearer to it than they are), which took a fifth of
    /// its CPU under `bench server`'s single-key updates.
    static let planOnce = [("plan_cache_mode", "force_generic_plan")]

    /// Connects once, outside the pool: a server that is not there, or refuses us, fails now with
    /// its reason, where the pool would go on trying.
    func probe(logger: Logger) async throws {
        var configuration: PostgresConnection.Configuration
        switch endpoint {
        case .socket(let path):
            configuration = .init(unixSocketPath: path, username: user, password: password, database: database)
        case .tcp(let host, let port):
            let tls: PostgresConnection.Configuration.TLS =
                switch sslMode {
                case .disable: .disable
                case .prefer: .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
                case .require: .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
                }
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        }
        configuration.options.additionalStartupParameters = options.map { [("options", $0)] } ?? []
        let connection = try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger)
        try await connection.close()
    }
}

/// A database address that does not read, and why.
package struct InvalidDatabaseURL: Error, CustomStringConvertible {
    package let description: String

    init(_ description: String) { self.description = description }
}
