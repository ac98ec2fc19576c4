import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import Testing

/// What an operator meets after the first start: secrets shown once, files only they can read,
/// a way back in when the last admin key is gone, and a server that a bad stored schedule cannot
/// keep down.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct ServeRecoveryTests {
    static func permissions(_ path: String) throws -> Int {
        try #require((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue)
    }

    @Test func secretsArePrintedOnceFilesAreTheOwnersAndKeysCreateRecoversAccessOffline() async throws {
        let directory = try TestFiles.folder("serve")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let dataDir = directory + "/data"
        try await withDeadline(.seconds(90)) {
            var server = try await ServeProcess.start(["serve", "--data-dir", dataDir, "--http-port", "0"])
            let keys = try initialKeys(dataDir: dataDir)
            #expect(server.printed.contains(keys.admin))
            // The database holds full push tokens: the folder and every SQLite file are the owner's alone.
            #expect(try Self.permissions(dataDir) == 0o700)
            for file in ["liverelay.sqlite", "liverelay.sqlite-wal", "liverelay.sqlite-shm", "initial-keys.json"] {
                #expect(try Self.permissions(dataDir + "/" + file) == 0o600, "\(file)")
            }

            // The last live admin key cannot revoke itself.
            let initialAdmin = try #require(
                try await server.call(.GET, "/v1/api-keys", key: keys.admin).json["apiKeys"]?.arrayElements?
                    .first { $0["scope"] == .string("admin") }?["id"]?.stringValue)
            let refused = try await server.call(.DELETE, "/v1/api-keys/\(initialAdmin)", key: keys.admin)
            #expect(refused.status == 409)
            #expect(refused.json["error"]?["code"] == .string("last_admin_key"))
            #expect(try await server.call(.GET, "/v1/api-keys", key: keys.admin).status == 200)

            // An admin whose secret is lost: `keys create` makes a new one beside the running server.
            let made = try await liverelay(["keys", "create", "--scope", "admin", "--name", "recovery", "--data-dir", dataDir])
            #expect(made.status == 0, "\(made.stderr)")
            let secret = try #require(made.stdout.split(whereSeparator: \.isWhitespace).map(String.init).first { $0.hasPrefix("lr_admin_") })
            #expect(try await server.call(.GET, "/v1/api-keys", key: secret).status == 200)
            #expect(try await server.call(.DELETE, "/v1/api-keys/\(initialAdmin)", key: secret).status == 200)
            #expect(try await server.call(.GET, "/v1/api-keys", key: keys.admin).status == 401)
            // A client key offline: for one app the server has.
            let client = try await liverelay(["keys", "create", "--scope", "client", "--app", "com.example.liverelay.demo", "--data-dir", dataDir])
            #expect(client.status == 0, "\(client.stderr)")
            let unknownApp = try await liverelay(["keys", "create", "--scope", "client", "--app", "com.example.nope", "--data-dir", dataDir])
            #expect(unknownApp.status == 64 && unknownApp.stderr.contains("app: no app com.example.nope"), "\(unknownApp.stderr)")

            // A later start prints where the keys are kept, not the keys.
            #expect(await server.stop() == 0)
            server = try await ServeProcess.start(["serve", "--data-dir", dataDir, "--http-port", "0"])
            for key in [keys.admin, keys.server, keys.client, secret] { #expect(!server.printed.contains(key)) }
            #expect(server.printed.contains("initial-keys.json"))
            #expect(await server.stop() == 0)
        }
    }

    /// A missing database is found as the command runs, the scope's rules before: both are told
    /// with `keys create`'s usage.
    @Test func keysCreateRefusesAMissingDatabaseAndABadScope() async throws {
        let dataDir = try TestFiles.folder("serve")
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        try await expectUsageError(["keys", "create", "--scope", "admin", "--data-dir", dataDir], "data-dir: no database")
        try await expectUsageError(
            ["keys", "create", "--scope", "root", "--data-dir", dataDir], "scope: must be client, server, admin, viewer or metrics")
        try await expectUsageError(
            ["keys", "create", "--scope", "viewer", "--app", "com.example.app", "--data-dir", dataDir], "app: a viewer key reads every app")
        try await expectUsageError(["keys", "create", "--scope", "client", "--data-dir", dataDir], "app: a client key is for one app")
    }

    /// Before dates were range-checked, a scheduled update with `"staleDate": 1e19` took the server
    /// down when due, and again on every restart.
    @Test func aServerStartedOnADatabaseHoldingAScheduleThatCannotRunStaysUp() async throws {
        let directory = try TestFiles.folder("serve")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let dataDir = directory + "/data"
        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        let store = try await SQLiteStore.open(path: dataDir + "/liverelay.sqlite")
        try await store.migrate()
        let now = Date()
        // A stale date out of range, in the form schedules are kept in.
        let late = ChangeRequest(
            event: .update, contentState: try JSONValue(parsing: #"{"status": "late", "etaMinutes": 1}"#),
            staleDate: Date(timeIntervalSinceReferenceDate: 1_000_000))
        let request = try JSONValue(
            parsing: try ScheduledRequest.change(late).stored().serializedString.replacingOccurrences(of: "1000000", with: "1e19"))
        try await store.insertSchedule(
            // As a database of an earlier release holds it: for no app yet, until the server adopts it.
            ScheduleRecord(id: "sch_bad", bundleID: "", key: "order-1", action: .update, request: request, dueAt: now - 1, createdAt: now - 60),
            context: WriteContext())
        try await withDeadline(.seconds(60)) {
            let server = try await ServeProcess.start(["serve", "--data-dir", dataDir, "--http-port", "0"])
            try await eventually { try await store.schedule(id: "sch_bad")?.state == .failed }
            // It fails with its reason (here: its key was never started), and the server stays up.
            #expect(try await store.schedule(id: "sch_bad")?.result != nil)
            #expect(try await server.call(.GET, "/v1/health", key: nil).status == 200)
            #expect(server.process.isRunning)
            #expect(await server.stop() == 0)
        }
    }

    @Test(arguments: [
        (["push", "update", "--content-state", "{}", "--stale-date", "+1e300d"], "stale-date: must be a date between"),
        (["push", "update", "--content-state", "{}", "--stale-date=-1e300d"], "stale-date: must be a date between"),
        (["push", "end", "--content-state", "{}", "--dismissal-date", "+1e30s"], "dismissal-date: must be a date between"),
        (["push", "update", "--content-state", "{}", "--expiration", "+1e300d"], "apns-expiration: must be a date between"),
        (["push", "update", "--content-state", "{}", "--timestamp", "99999999999999999999999"], "timestamp"),
    ])
    func aDateOutOfRangeOnTheCommandLineExits64(arguments: [String], message: String) async throws {
        let result = try await liverelay(arguments + ["--token", String(repeating: "ab", count: 80), "--bundle-id", "com.example.app", "--dry-run"])
        #expect(result.status == 64)
        #expect(result.stderr.contains(message), "\(result.stderr)")
    }

    @Test(arguments: [
        (#"{"budget": {"priority10PerHour": 1e19}}"#, "budget.priority10PerHour: must be a whole number from 0 to 100000"),
        (#"{"budget": {"frequentPriority10PerHour": -1}}"#, "budget.frequentPriority10PerHour"),
        (#"{"budget": {"priority10PerHour": 2.5}}"#, "budget.priority10PerHour"),
        (#"{"contracts": [{"name": "T", "attributes": {}, "contentState": {"n": "Integer"}}]}"#, "contracts[0].contentState.n: unknown type"),
        (#"{"apns": {"keyfile": "k.p8"}}"#, "apns.keyfile: is not a field of this request (did you mean \"keyFile\"?)"),
        (
            #"{"apps": [{"bundleID": "com.a", "keyFile": "/nonexistent.p8", "keyID": "KEYID00001", "teamID": "TEAMID0001"}]}"#,
            "apps[0].keyFile: cannot be read at /nonexistent.p8"
        ),
        (#"{"apps": [{"bundleID": "com.a", "keyfile": "k.p8"}]}"#, "apps[0].keyfile: is not a field of this request"),
    ])
    func aBadConfigFileExits64NamingTheField(config: String, message: String) async throws {
        let directory = try TestFiles.folder("serve")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try config.write(toFile: directory + "/config.json", atomically: true, encoding: .utf8)
        let result = try await liverelay(["serve", "--data-dir", directory + "/data", "--http-port", "0", "--config", directory + "/config.json"])
        #expect(result.status == 64)
        #expect(result.stderr.contains(message), "\(result.stderr)")
    }

    @Test func invalidUTF8InAJSONArgumentIsRefusedNotRepaired() async throws {
        // Foundation's Process passes only valid UTF-8, so a shell makes the byte 0xFF.
        let result = try await liverelayFromShell(
            #"exec "$0" push update --token $(printf 'ab%.0s' $(seq 80)) --bundle-id com.example.app --dry-run --content-state "$(printf '{"s":"\377"}')""#
        )
        #expect(result.status == 64, "\(result.stdout)")
        #expect(result.stderr.contains("content-state: is not valid UTF-8"), "\(result.stderr)")
    }
}
