import ArgumentParser
import Crypto
import Foundation
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Signing keys for provider tokens, and the server's API keys.", subcommands: [Generate.self, Create.self])

    struct Generate: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write a new P-256 .p8 key (PKCS#8 PEM, like Apple's) for the emulator and tests, and print a key id.")

        @Option(help: ArgumentHelp("Where to write the key. Default: AuthKey_<key id>.p8 here.", valueName: "path"))
        var output: String?

        func run() throws {
            let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
            let keyID = String((0..<10).map { _ in alphabet.randomElement()! })
            let path = output ?? "AuthKey_\(keyID).p8"
            guard !FileManager.default.fileExists(atPath: path) else {
                throw ValidationError("output: \(path) exists; not overwriting a key")
            }
            let key = P256.Signing.PrivateKey()
            guard
                FileManager.default.createFile(
                    atPath: path, contents: Data((key.pemRepresentation + "\n").utf8), attributes: [.posixPermissions: 0o600])
            else {
                throw ValidationError("output: cannot write \(path)")
            }
            print("key file: \(path)")
            print("key id: \(keyID)")
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Make an API key in a server's data directory, without the server: how access is recovered.",
            discussion: """
                Writes the key straight into the server's database
                (<data-dir>/liverelay.sqlite, or --database; the server may be running) and
                prints its secret, once: only its hash is kept.
                """)

        @Option(help: ArgumentHelp("client, server, admin or viewer (reads the dashboard and the API's listings).", valueName: "scope")) var scope:
            String
        @Option(
            help: ArgumentHelp("The app the key is for: required for a client key; a server key without it serves every app.", valueName: "bundle id")
        )
        var app: String?
        @Option(help: "A name to tell the key by.") var name: String = "made offline"
        @Option(help: ArgumentHelp("The data directory `liverelay serve` uses.", valueName: "path")) var dataDir: String = "liverelay-data"
        @OptionGroup var database: DatabaseOption

        func validate() throws {
            guard let scope = APIKeyScope(rawValue: scope) else {
                throw ValidationError("scope: must be client, server, admin or viewer, got \"\(scope)\"")
            }
            if scope == .client, app == nil { throw ValidationError("app: a client key is for one app: give --app <bundle id>") }
            if scope == .admin, app != nil { throw ValidationError("app: an admin key is for every app: leave --app out") }
            if scope == .viewer, app != nil { throw ValidationError("app: a viewer key reads every app: leave --app out") }
            guard !name.isEmpty, name.count <= 200 else { throw ValidationError("name: must be 1 to 200 characters") }
        }

        func run() async throws {
            let location = database.location(in: DataDirectory(dataDir))
            if case .sqlite(let path) = location, !FileManager.default.fileExists(atPath: path) {
                throw ValidationError("data-dir: no database at \(path); `liverelay serve --data-dir \(dataDir)` makes one on its first start")
            }
            let (record, secret) = try await DatabaseOption.withMigratedStore(location) { store in
                if let app, try await !store.apps().contains(where: { $0.bundleID == app }) {
                    throw ValidationError("app: no app \(app) in \(location); the server registers its apps when it starts")
                }
                return try await RelayService.createAPIKey(name: name, scope: APIKeyScope(rawValue: scope)!, app: app, in: store, at: Date())
            }
            print("API key \(record.id) (\(record.scope.rawValue), \"\(record.name)\"): \(secret)")
            print("The secret is shown only now; the server keeps its hash.")
        }
    }
}
