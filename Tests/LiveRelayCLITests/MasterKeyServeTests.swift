import APNsEmulator
import Crypto
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import SimulatedDevices
import Testing

/// The apps' signing keys at rest, through `serve` and `keys rotate-master` as an operator runs
/// them: sealed in the database, readable from none of its files, opened only with the master key.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct MasterKeyServeTests {
    @Test func aSigningKeyIsSealedAtRestAWrongMasterKeyStopsServeAndARotatedOneSigns() async throws {
        let directory = try TestFiles.folder("master-key")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withDeadline(.seconds(120)) {
            let setup = try await CrashSetup.start(in: directory, devices: ["iphone-1"])
            defer { setup.reporter.cancel() }
            let (emulator, keys) = (setup.emulator, setup.keys)
            var server = setup.server
            let dataDir = directory + "/data"
            let masterKeyFile = dataDir + "/master.key"
            #expect(server.printed.contains("made a master key at \(masterKeyFile)"))
            #expect(try FileManager.default.attributesOfItem(atPath: masterKeyFile)[.posixPermissions] as? Int == 0o600)
            let firstKey = try MasterKey(base64: String(contentsOfFile: masterKeyFile, encoding: .utf8))
            let stored = try await setup.outbox.apps()
            #expect(stored.map(\.bundleID) == [ServeCommandTests.bundleID])
            #expect(stored.allSatisfy { $0.sealedSigningKey.hasPrefix("sealed:v1:\(firstKey.id):") })
            let pem = try String(contentsOfFile: directory + "/key.p8", encoding: .utf8)

            try await startOrder(server, keys.server)
            // A webhook endpoint's secret is sealed too (its owner: the endpoint).
            let made = try await server.call(
                .POST, "/v1/webhooks", key: keys.server, body: .object([("url", .string("https://93.184.216.34/hooks"))]))
            #expect(made.status == 201, "\(made.json)")
            let webhookSecret = try #require(made.json["secret"]?.stringValue)
            let endpoints = try await setup.outbox.webhookEndpoints(app: nil)
            #expect(endpoints.count == 1 && endpoints.allSatisfy { $0.secret.hasPrefix("sealed:v1:\(firstKey.id):") })
            #expect(try firstKey.open(endpoints[0].secret, for: endpoints[0].id) == webhookSecret)
            func status() throws -> JSONValue? { try emulator.devices.device("iphone-1").activities.first?.content.state["status"] }
            try await eventually { try status() == .string("preparing") }
            // The activity's update token, issued a moment later and reported, for the update after the rotation.
            emulator.clock.advance(by: emulator.configuration.devices.tokenIssueDelay)
            emulator.devices.advanceAll()
            try await eventually { try await setup.outbox.counts().liveActivityTokens == 1 }
            // Rotating beside the running server is refused: it would go on sealing with the old key.
            let beside = try await liverelay(["keys", "rotate-master", "--data-dir", dataDir])
            #expect(beside.status == 64 && beside.stderr.contains("a server is running on"), "\(beside.status) \(beside.stderr)")
            #expect(try MasterKey(base64: String(contentsOfFile: masterKeyFile, encoding: .utf8)).id == firstKey.id)
            #expect(try await setup.outbox.apps().allSatisfy { $0.sealedSigningKey.hasPrefix("sealed:v1:\(firstKey.id):") })
            #expect(await server.stop() == 0)
            try await expectNoKeyMaterial(of: pem, inFilesOf: dataDir)
            try await expectNotInFiles(Data(webhookSecret.utf8), of: dataDir)

            // Another master key: `serve` stops at once, naming both keys, and sends nothing.
            let wrongFile = directory + "/wrong.key"
            try (MasterKey.generate().base64 + "\n").write(toFile: wrongFile, atomically: true, encoding: .utf8)
            let wrong = try await liverelay(setup.arguments + ["--master-key-file", wrongFile])
            #expect(wrong.status != 0)
            #expect(wrong.stderr.contains("\(ServeCommandTests.bundleID)'s signing key is sealed with master key \(firstKey.id)"), "\(wrong.stderr)")
            #expect(!wrong.stdout.contains("LiveRelay server:"))

            // Rotated, the data directory's key is the new one, and the key still signs.
            let rotated = try await liverelay(["keys", "rotate-master", "--data-dir", dataDir])
            #expect(rotated.status == 0, "\(rotated.stderr)")
            let secondKey = try MasterKey(base64: String(contentsOfFile: masterKeyFile, encoding: .utf8))
            #expect(secondKey.id != firstKey.id)
            #expect(
                rotated.stdout.contains("2 signing key(s) and webhook secret(s) re-sealed under master key \(secondKey.id) (was \(firstKey.id))"),
                "\(rotated.stdout)")
            #expect(!FileManager.default.fileExists(atPath: masterKeyFile + ".next"))
            // The old key is kept until a server has started with the new one.
            #expect(try MasterKey(base64: String(contentsOfFile: masterKeyFile + ".old", encoding: .utf8)).id == firstKey.id)
            #expect(try await setup.outbox.apps().allSatisfy { $0.sealedSigningKey.hasPrefix("sealed:v1:\(secondKey.id):") })
            #expect(try await setup.outbox.webhookEndpoints(app: nil).allSatisfy { $0.secret.hasPrefix("sealed:v1:\(secondKey.id):") })
            // The old key opens nothing now.
            let stale = try await liverelay([
                "keys", "rotate-master", "--data-dir", dataDir, "--master-key-file", wrongFile, "--new-master-key-file", directory + "/third.key",
            ])
            #expect(stale.status != 0 && stale.stderr.contains("sealed with master key \(secondKey.id)"), "\(stale.stderr)")

            server = try await ServeProcess.start(setup.arguments)
            #expect(!server.printed.contains("made a master key"))
            #expect(!FileManager.default.fileExists(atPath: masterKeyFile + ".old"))
            let update = try await server.call(
                .POST, "/v1/activities/order-1/update", key: keys.server,
                body: .object([("contentState", ServeCommandTests.content("on the way", 10))]))
            #expect(update.status == 200, "\(update.json)")
            try await eventually { try status() == .string("on the way") }
            #expect(await server.stop() == 0)
            try await expectNoKeyMaterial(of: pem, inFilesOf: dataDir)
            await emulator.shutdown()
        }
    }

    /// A database of an earlier release holds its apps' keys in plain text: the first start seals
    /// them, and nothing of the plain text is left in the database's files.
    @Test func theKeysAnEarlierReleaseStoredInPlainTextAreSealedOnTheFirstStart() async throws {
        let directory = try TestFiles.folder("master-key")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let dataDir = directory + "/data"
        try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
        let pems = (1...3).map { ("com.example.older\($0)", P256.Signing.PrivateKey().pemRepresentation) }
        do {
            let store = try await SQLiteStore.open(path: dataDir + "/liverelay.sqlite")
            try await store.migrate()
            let at = Date()
            try await store.saveApps(
                pems.map {
                    AppRecord(bundleID: $0.0, teamID: "OLDTEAM001", keyID: "OLDKEY0001", sealedSigningKey: $0.1, createdAt: at, updatedAt: at)
                })
            // In the database file itself, as in one that has run for a while (not only in its log).
            try await store.checkpointWholly()
        }
        try await withDeadline(.seconds(60)) {
            let server = try await ServeProcess.start(["serve", "--data-dir", dataDir, "--http-port", "0"])
            #expect(server.printed.contains("signing keys stored in plain text are sealed now"), "\(server.printed)")
            #expect(await server.stop() == 0)
        }
        let key = try MasterKey(base64: String(contentsOfFile: dataDir + "/master.key", encoding: .utf8))
        // Open while its files are read: its last connection's close removes the log files, which
        // a read then missed.
        let reopened = try await SQLiteStore.open(path: dataDir + "/liverelay.sqlite")
        let apps = try await reopened.apps()
        for (bundleID, pem) in pems {
            let app = try #require(apps.first { $0.bundleID == bundleID })
            #expect(try key.open(app.sealedSigningKey, for: bundleID) == pem)
            try await expectNoKeyMaterial(of: pem, inFilesOf: dataDir)
        }
        withExtendedLifetime(reopened) {}
    }

    /// The store itself: re-sealed in place, a key's old bytes are zeroed, not left beside the new
    /// value (SQLite's `secure_delete`; without it a dozen apps leave most of their PEMs behind).
    @Test func aResealedKeyLeavesNothingOfItsOldValueInTheDatabaseFile() async throws {
        let directory = try TestFiles.folder("master-key")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/liverelay.sqlite"
        let pems = (1...12).map { ("com.example.app\($0)", P256.Signing.PrivateKey().pemRepresentation) }
        let store = try await SQLiteStore.open(path: path)
        try await store.migrate()
        let at = Date()
        try await store.saveApps(
            pems.map { AppRecord(bundleID: $0.0, teamID: "TEAM000001", keyID: "KEY0000001", sealedSigningKey: $0.1, createdAt: at, updatedAt: at) })
        try await store.checkpointWholly()
        let key = MasterKey.generate()
        #expect(try await RelayService.resealSecrets(in: store, from: key, to: key) == pems.count)
        try await store.checkpointWholly()
        for (_, pem) in pems { try await expectNoKeyMaterial(of: pem, inFilesOf: directory) }
    }

    func startOrder(_ server: ServeProcess, _ key: String) async throws {
        let start = try await server.call(
            .POST, "/v1/activities/order-1/start", key: key,
            body: .object([
                ("attributesType", .string("DeliveryAttributes")),
                ("attributes", .object([("activityKey", .string("order-1")), ("orderNumber", .integer(1))])),
                ("contentState", ServeCommandTests.content("preparing", 30)),
                ("alert", .object([("title", .string("Order 1")), ("body", .string("Preparing"))])),
                ("audience", .object([("everyone", .bool(true))])),
            ]))
        #expect(start.status == 201, "\(start.json)")
    }
}

/// No file of the database in `dataDir` holds the key: not a line of its PEM, not its DER, not its scalar.
func expectNoKeyMaterial(of pem: String, inFilesOf dataDir: String) async throws {
    let files = try FileManager.default.contentsOfDirectory(atPath: dataDir).filter { $0.hasPrefix("liverelay.sqlite") }
    #expect(files.contains("liverelay.sqlite"))
    try await expectNoKeyMaterial(of: pem, in: files.map { dataDir + "/" + $0 })
}

/// None of `files` holds the key.
func expectNoKeyMaterial(of pem: String, in files: [String]) async throws {
    let key = try P256.Signing.PrivateKey(pemRepresentation: pem)
    var needles = [Data(key.rawRepresentation), Data(key.derRepresentation)]
    for line in pem.split(separator: "\n") where !line.hasPrefix("-----") && line.count >= 16 { needles.append(Data(line.utf8)) }
    for needle in needles { try await expectNotIn(files, needle) }
}

/// No file of the database in `dataDir` holds `secret`.
func expectNotInFiles(_ secret: Data, of dataDir: String) async throws {
    let files = try FileManager.default.contentsOfDirectory(atPath: dataDir).filter { $0.hasPrefix("liverelay.sqlite") }
    try await expectNotIn(files.map { dataDir + "/" + $0 }, secret)
}

func expectNotIn(_ files: [String], _ needle: Data) async throws {
    for file in files {
        // Read by another process: closing a descriptor of the database here would drop every
        // lock this process's SQLite connections hold on it (POSIX locks are per process).
        let cat = try ChildProcess.start("/bin/cat", [file], environment: [:])
        let data = await readAll(cat.output)
        #expect(await cat.exitCode() == 0)
        #expect(data.range(of: needle) == nil, "\(file) holds a secret")
    }
}
