import ArgumentParser
import Crypto
import Foundation
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Signing keys for provider tokens, and the server's API keys.", subcommands: [Generate.self, Create.self, RotateMaster.self])

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

        @Option(
            help: ArgumentHelp(
                "client, server, admin, viewer (reads the dashboard and the listings) or metrics (reads /metrics).", valueName: "scope")) var scope:
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
                throw ValidationError("scope: must be \(APIKeyScope.listed), got \"\(scope)\"")
            }
            if let rule = scope.appRuleBroken(by: app) {
                throw ValidationError("app: \(rule): \(app == nil ? "give --app <bundle id>" : "leave --app out")")
            }
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

    struct RotateMaster: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rotate-master",
            abstract: "Seal every app's signing key and webhook secret in a server's database under a new master key.",
            discussion: """
                Stop the servers first: one still running holds the old key and cannot open
                the keys sealed anew (with SQLite, a rotation beside a running server is
                refused). The current key is --master-key-file,
                LIVERELAY_MASTER_KEY or, with SQLite, <data-dir>/master.key; the new one is
                --new-master-key-file (made there, 0600, when the file does not exist) or, for
                the data directory's own key, a new key that replaces <data-dir>/master.key
                (the old one stays as master.key.old until a server starts with the new one).
                The apps' keys are re-sealed in one transaction, the webhook secrets in
                another; run again, it finishes a rotation that was interrupted.
                """)

        @Option(help: ArgumentHelp("The data directory `liverelay serve` uses.", valueName: "path")) var dataDir: String = "liverelay-data"
        @OptionGroup var database: DatabaseOption
        @OptionGroup var masterKey: MasterKeyOption
        @Option(help: ArgumentHelp("The new master key's file; made when it does not exist.", valueName: "path"))
        var newMasterKeyFile: String?

        func run() async throws {
            let directory = DataDirectory(dataDir)
            let location = database.location(in: directory)
            if case .sqlite(let path) = location, !FileManager.default.fileExists(atPath: path) {
                throw ValidationError("data-dir: no database at \(path)")
            }
            let current = try masterKey.load(for: location, in: directory, mayMake: false)
            // The data directory's own key is replaced last, once the database holds the new
            // seals: until then the pending key waits beside it, and a second run picks it up.
            let replacing = newMasterKeyFile == nil && current.source == .file(directory.masterKey)
            guard let nextPath = newMasterKeyFile ?? (replacing ? directory.masterKey + ".next" : nil) else {
                throw ValidationError("new-master-key-file: say where the new master key is (the current one is not the data directory's own)")
            }
            let next: MasterKey
            if FileManager.default.fileExists(atPath: nextPath) {
                next = try MasterKeyOption.read(nextPath, option: "new-master-key-file")
            } else {
                next = .generate()
                try MasterKeyOption.writeNew(next, to: nextPath, option: "new-master-key-file")
            }
            guard next.id != current.key.id else { throw ValidationError("new-master-key-file: it is the current master key") }
            func reseal() async throws -> Int {
                try await DatabaseOption.withMigratedStore(location) { store in
                    try await RelayService.resealSecrets(in: store, from: current.key, to: next)
                }
            }
            // Never beside a running server (SQLite: the lock every `serve` holds).
            let resealed =
                if case .sqlite(let path) = location { try await ServingLock.exclusively(database: path, reseal) } else { try await reseal() }
            if replacing {
                // The old key stays beside the new one until a server has started with the new one.
                guard rename(directory.masterKey, directory.previousMasterKey) == 0, rename(nextPath, directory.masterKey) == 0 else {
                    throw ValidationError("data-dir: cannot move \(nextPath) to \(directory.masterKey): \(String(cString: strerror(errno)))")
                }
            }
            print("\(resealed) signing key(s) and webhook secret(s) re-sealed under master key \(next.id) (was \(current.key.id)).")
            print(
                replacing
                    ? "The data directory's master key is the new one; the old one stays in \(directory.previousMasterKey) until a server starts with the new one."
                    : "Start the servers with --master-key-file \(nextPath).")
        }
    }
}
