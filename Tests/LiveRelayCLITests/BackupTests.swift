import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import SimulatedDevices
import Testing

/// `liverelay backup` and `restore` as an operator runs them, on a server in the middle of a fan-out.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct BackupTests {
    /// A backup taken while a fan-out is half sent holds everything accepted before it; the
    /// server restored from it (the original lost) sends what was still to send, and nothing twice.
    @Test func aBackupTakenDuringAFanOutRestoresToAServerThatSendsWhatWasStillQueued() async throws {
        let directory = try TestFiles.folder("backup")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let devices = (1...20).map { "iphone-\($0)" }
        try await withDeadline(.seconds(150)) {
            let setup = try await CrashSetup.start(in: directory, devices: devices)
            defer { setup.reporter.cancel() }
            let (emulator, keys, outbox) = (setup.emulator, setup.keys, setup.outbox)
            var server = setup.server

            // APNs hangs after 10 pushes: 10 of the two starts' 40 reach devices; the other 30 are
            // to send when the backup is taken.
            emulator.faults.add(EmulatorFault(.stall, scope: .bundleID(ServeCommandTests.bundleID), skip: 10, count: nil))
            for key in ["first", "second"] {
                let start = try await server.call(
                    .POST, "/v1/activities/\(key)/start", key: keys.server,
                    body: .object([
                        ("attributesType", .string("DeliveryAttributes")),
                        ("attributes", .object([("activityKey", .string(key)), ("orderNumber", .integer(1))])),
                        ("contentState", ServeCommandTests.content("preparing", 30)),
                        ("alert", .object([("title", .string("Order")), ("body", .string("Preparing"))])),
                        ("audience", .object([("everyone", .bool(true))])),
                    ]))
                #expect(start.status == 201 && start.json["deliveries"] == .integer(20), "\(start.json)")
            }
            func started(_ key: String) throws -> Int {
                try devices.filter { try emulator.devices.device($0).activities.contains { $0.attributes["activityKey"] == .string(key) } }.count
            }
            try await eventually { try await outbox.deliveryCounts()[.sent] == 10 }
            // Which 10 depends on the order the dispatcher took them in.
            #expect(try started("first") + started("second") == 10)

            let backupFile = directory + "/liverelay-backup.sqlite"
            let backup = try await liverelay(["backup", "--data-dir", directory + "/data", "--to", backupFile])
            #expect(backup.status == 0, "\(backup.stderr)")
            #expect(backup.stdout.contains("30 push(es) still to send in it"), "\(backup.stdout)")
            #expect(try FileManager.default.attributesOfItem(atPath: backupFile)[.posixPermissions] as? Int == 0o600)
            // The backup holds the signing key sealed only.
            try await expectNoKeyMaterial(of: String(contentsOfFile: directory + "/key.p8", encoding: .utf8), in: [backupFile])

            // The server and its database are lost; APNs recovers.
            await server.kill()
            emulator.faults.removeAll()
            let restoredDir = directory + "/restored"
            let restore = try await liverelay(["restore", "--data-dir", restoredDir, "--from", backupFile])
            #expect(restore.status == 0, "\(restore.stderr)")
            #expect(restore.stdout.contains("30 push(es) to send when the server starts"), "\(restore.stdout)")
            // Restoring over a database is refused.
            let over = try await liverelay(["restore", "--data-dir", restoredDir, "--from", backupFile])
            #expect(over.status == 64 && over.stderr.contains("restore never overwrites one"), "\(over.stderr)")
            var arguments = setup.arguments
            arguments[arguments.firstIndex(of: "--data-dir")! + 1] = restoredDir
            // Without its master key, the restored server says which one it needs, and makes none.
            let keyless = try await liverelay(arguments)
            #expect(keyless.status != 0 && keyless.stderr.contains("the database's signing keys are sealed with master key"), "\(keyless.stderr)")
            #expect(!FileManager.default.fileExists(atPath: restoredDir + "/master.key"))
            // The master key is kept apart from backups, and brought back beside the restored database.
            try FileManager.default.copyItem(atPath: directory + "/data/master.key", toPath: restoredDir + "/master.key")

            server = try await ServeProcess.start(arguments)
            let restored = try await SQLiteStore.open(path: restoredDir + "/liverelay.sqlite")
            try await eventually { try await restored.deliveryCounts() == [.sent: 40] }
            try await eventually { try started("first") == 20 && started("second") == 20 }
            // Nothing was started twice on a device.
            for device in devices { #expect(try emulator.devices.device(device).activities.count == 2, "\(device)") }
            #expect(await server.stop() == 0)
            await emulator.shutdown()
        }
    }

    /// A database restored into a new data directory, on the embedded default: the server starts
    /// with its demo iPhone (its app given a client key of its own), the old server's keys still
    /// work, and the banner says which keys this directory does not keep instead of a shell line
    /// that reads them from a file restore never makes.
    @Test func aRestoredDemoServerHasItsDemoIPhoneAndSaysWhichKeysItDoesNotKeep() async throws {
        let directory = try TestFiles.folder("backup")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withDeadline(.seconds(120)) {
            let original = directory + "/data"
            var server = try await ServeProcess.start(["serve", "--data-dir", original, "--http-port", "0"])
            let keys = try initialKeys(dataDir: original)
            #expect(await server.stop() == 0)
            let backupFile = directory + "/backup.sqlite"
            #expect(try await liverelay(["backup", "--data-dir", original, "--to", backupFile]).status == 0)
            let restoredDir = directory + "/restored"
            #expect(try await liverelay(["restore", "--data-dir", restoredDir, "--from", backupFile]).status == 0)
            try FileManager.default.copyItem(atPath: original + "/master.key", toPath: restoredDir + "/master.key")

            server = try await ServeProcess.start(["serve", "--data-dir", restoredDir, "--http-port", "0"])
            let printed = server.printed
            #expect(printed.contains("demo device:        demo-iphone"), "\(printed)")
            #expect(printed.contains("keys not kept here: server, admin"), "\(printed)")
            let shell = try #require(printed.split(separator: "\n").first { $0.hasPrefix("shell:") })
            #expect(shell.contains(" C=$(jq -r .client") && !shell.contains(" S=") && !shell.contains(" A="), "\(shell)")
            let restored = try await SQLiteStore.open(path: restoredDir + "/liverelay.sqlite")
            try await eventually { try await restored.pushToStartTokens(deviceID: "demo-iphone").count == 1 }
            #expect(try await server.call(.GET, "/v1/activities", key: keys.server).status == 200)
            #expect(await server.stop() == 0)
        }
    }
}
