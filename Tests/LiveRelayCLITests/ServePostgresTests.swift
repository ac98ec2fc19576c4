import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import Testing

/// `liverelay serve --database postgres://…` as a user runs it, on a real PostgreSQL server
/// (`TestPostgres`; in CI its absence fails these tests, elsewhere they are reported skipped).
@Suite(.serialized, .timeLimit(.minutes(3)), .enabled(if: TestPostgres.isAvailable || TestPostgres.isCI, Comment(rawValue: TestPostgres.skipNote)))
struct ServePostgresTests {
    /// The demo on PostgreSQL: the printed start reaches the demo iPhone, `keys create` writes to
    /// the same database, and what was accepted is still there after a restart.
    @Test func theDemoRunsOnPostgresAndItsDataOutlivesARestart() async throws {
        let database = try await TestPostgres.freshDatabase()
        let dataDir = try TestFiles.folder("serve")
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        // PostgreSQL requires a master key, given apart from the data directory.
        let masterKeyFile = try writeMasterKey()
        let arguments = ["serve", "--data-dir", dataDir, "--http-port", "0", "--database", database, "--master-key-file", masterKeyFile]
        try await withDeadline(.seconds(120)) {
            var server = try await ServeProcess.start(arguments)
            // The announcement names the database, never a password; no SQLite file is made.
            #expect(server.printed.contains("data:               postgres://postgres@/postgres?host="))
            #expect(!FileManager.default.fileExists(atPath: dataDir + "/liverelay.sqlite"))
            #expect(!FileManager.default.fileExists(atPath: dataDir + "/master.key"))
            let keys = try initialKeys(dataDir: dataDir)
            let store = try PostgresStore(url: database)
            try await store.running {
                try await eventually { try await store.pushToStartTokens(deviceID: "demo-iphone").count == 1 }
                let (path, body) = try server.printedStart()
                let key = path.split(separator: "/")[2]
                let started = try await server.call(.POST, path, key: keys.server, body: body)
                #expect(started.status == 201, "\(started.json)")
                try await eventually {
                    let answer = try await server.call(.GET, "/v1/activities/\(key)", key: keys.server)
                    return answer.json["tokens"]?.arrayElements?.first?["state"] == .string("live")
                }
                let watch = try #require(server.printed.split(separator: "\n").first { $0.hasPrefix("watch it:") }?.split(separator: " ").last)
                #expect(try await httpCall(.GET, String(watch)).json["lockScreen"]?.arrayElements?.count == 1)

                // A key made offline goes into the same database and works at once.
                let made = try await liverelay(["keys", "create", "--scope", "admin", "--name", "offline", "--database", database])
                #expect(made.status == 0, "\(made.stderr)")
                let secret = try #require(made.stdout.split(whereSeparator: \.isWhitespace).map(String.init).first { $0.hasPrefix("lr_admin_") })
                #expect(try await server.call(.GET, "/v1/api-keys", key: secret).status == 200)

                #expect(await server.stop() == 0)
                server = try await ServeProcess.start(arguments)
                let after = try await server.call(.GET, "/v1/activities/\(key)", key: keys.server)
                #expect(after.status == 200 && after.json["state"] == .string("active"), "\(after.json)")
                let update = try await server.call(
                    .POST, "/v1/activities/\(key)/update", key: keys.server,
                    body: JSONValue(parsing: #"{"contentState": {"status": "on the way", "etaMinutes": 10}}"#))
                #expect(update.status == 200, "\(update.json)")
                #expect(await server.stop() == 0)
            }
        }
    }

    /// The backup procedure of Documentation/operating.md, run once: `pg_dump` while the server
    /// runs, the database lost, `pg_restore`, and the server started on it again with its master
    /// key has everything it had accepted.
    @Test func pgDumpAndPgRestoreBringBackEverythingAccepted() async throws {
        let database = try await TestPostgres.freshDatabase()
        let schema = try #require(TestPostgres.schema(of: database))
        let dataDir = try TestFiles.folder("serve")
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        let masterKeyFile = try writeMasterKey()
        let arguments = ["serve", "--data-dir", dataDir, "--http-port", "0", "--database", database, "--master-key-file", masterKeyFile]
        let dump = TestFiles.path("liverelay", pathExtension: "dump")
        try await withDeadline(.seconds(120)) {
            var server = try await ServeProcess.start(arguments)
            let keys = try initialKeys(dataDir: dataDir)
            let store = try PostgresStore(url: database)
            let key = try await store.running {
                try await eventually { try await store.pushToStartTokens(deviceID: "demo-iphone").count == 1 }
                let (path, body) = try server.printedStart()
                let started = try await server.call(.POST, path, key: keys.server, body: body)
                #expect(started.status == 201, "\(started.json)")
                return String(path.split(separator: "/")[2])
            }
            try await TestPostgres.tool("pg_dump", ["--format=custom", "--schema=\(schema)", "--file=\(dump)", database])
            #expect(await server.stop() == 0)

            try await TestPostgres.psql(database, "DROP SCHEMA \(schema) CASCADE")
            try await TestPostgres.tool("pg_restore", ["--no-owner", "--dbname=\(database)", dump])
            server = try await ServeProcess.start(arguments)
            let after = try await server.call(.GET, "/v1/activities/\(key)", key: keys.server)
            #expect(after.status == 200 && after.json["state"] == .string("active"), "\(after.json)")
            #expect(try await server.call(.GET, "/v1/api-keys", key: keys.admin).status == 200)
            #expect(await server.stop() == 0)
        }
    }

    /// A database address that does not read, and a server that is not there, stop `serve` at
    /// once with a message naming `database` (exit 64), before it serves anything; so does
    /// PostgreSQL without a master key, naming the option.
    @Test func aBadOrUnreachableDatabaseOrAMissingMasterKeyIsNamed() async throws {
        let dataDir = try TestFiles.folder("serve")
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        let keyless = try await liverelay(["serve", "--data-dir", dataDir, "--http-port", "0", "--database", "postgres://u@localhost/db"])
        #expect(keyless.status == 64 && keyless.stderr.contains("master-key-file: PostgreSQL needs a master key"), "\(keyless.stderr)")
        #expect(!FileManager.default.fileExists(atPath: dataDir + "/master.key"))
        let masterKeyFile = try writeMasterKey()
        let badMode = try await liverelay([
            "serve", "--data-dir", dataDir, "--http-port", "0", "--database", "postgres://u@localhost/db?sslmode=sometimes",
            "--master-key-file", masterKeyFile,
        ])
        #expect(badMode.status == 64 && badMode.stderr.contains("database: sslmode \"sometimes\""), "\(badMode.stderr)")
        let nowhere = try await liverelay([
            "serve", "--data-dir", dataDir, "--http-port", "0", "--database", "postgres://postgres@/postgres?host=\(dataDir)/no-such-folder",
            "--master-key-file", masterKeyFile,
        ])
        #expect(nowhere.status == 64 && nowhere.stderr.contains("database: cannot use postgres://postgres@/postgres?host="), "\(nowhere.stderr)")
        // The environment variable names it too.
        let fromEnvironment = try await liverelay(
            ["keys", "create", "--scope", "admin", "--data-dir", dataDir], environment: ["LIVERELAY_DATABASE": "postgresql://u@h/db?sslmode=x"])
        #expect(fromEnvironment.status == 64 && fromEnvironment.stderr.contains("database: sslmode \"x\""), "\(fromEnvironment.stderr)")
    }
}
