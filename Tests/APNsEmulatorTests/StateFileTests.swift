import Crypto
import Foundation
import LiveActivityKit
import LiveRelayTesting
import SimulatedDevices
import Testing

@testable import APNsEmulator

/// The state file: the devices and what APNs knows of them (keys, tokens and their states,
/// channels) outlive the emulator's process; a file it cannot read is set aside, never lost.
@Suite struct StateFileTests {
    @Test func whatAPNsKnowsIsKeptWithTheDevices() async throws {
        let folder = try TestFiles.folder("emulator-state")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/devices.json"
        try await withDeadline(.seconds(30)) {
            let first = try await APNsEmulator.start(.init(stateFile: file))
            let key = P256.Signing.PrivateKey().publicKey
            first.registry.register(
                EmulatorKey(keyID: "KEY0000001", teamID: "TEAM000001", publicKey: key, environments: [.production], scope: .topics(["com.example.a"]))
            )
            let token = String(repeating: "ab", count: 40)
            let since = Date(timeIntervalSince1970: 1_795_000_000)
            first.registry.register(EmulatorToken(hex: token, bundleID: "com.example.a", environment: .production))
            first.registry.unregister(token: token, since: since)
            let channel = try #require(first.registry.createChannel(bundleID: "com.example.a", environment: .sandbox, storagePolicy: 1))
            try first.devices.addDevice(id: "iphone", model: .iPad)
            try first.devices.install(SimulatedApp(bundleID: "com.example.a"), on: "iphone")
            try first.devices.withDevice("iphone") { device, now in
                try device.setSharedData(bundleID: "com.example.a", kind: "score", value: .object([("home", .number("1e0"))]))
                return ((), try device.placeWidget(bundleID: "com.example.a", kind: "score", family: "systemSmall", at: now))
            }
            let widgetToken = try #require(try first.devices.device("iphone").surfaces["com.example.a"]?.widgetToken)
            first.clock.advance(by: 3600)
            // Written by the running emulator soon after the change, and at its end.
            let running = Task { try await first.run() }
            try await eventually { FileManager.default.fileExists(atPath: file) }
            running.cancel()
            try await running.value

            let second = try await APNsEmulator.start(.init(stateFile: file))
            let kept = try #require(second.registry.keys.first)
            #expect(second.registry.keys.count == 1 && kept.keyID == "KEY0000001" && kept.teamID == "TEAM000001")
            #expect(
                kept.publicKey.rawRepresentation == key.rawRepresentation && kept.environments == [.production]
                    && kept.scope == .topics(["com.example.a"]))
            #expect(
                second.registry.token(token)
                    == EmulatorToken(hex: token, bundleID: "com.example.a", environment: .production, state: .unregistered(since: since)))
            #expect(second.registry.allChannels() == [channel])
            #expect(second.devices.deviceIDs == ["iphone"])
            #expect(try second.devices.device("iphone").model == .iPad)
            let surfaces = try #require(try second.devices.device("iphone").surfaces["com.example.a"])
            #expect(surfaces.widgetToken == widgetToken && surfaces.widgets.map(\.kind) == ["score"])
            #expect(surfaces.sharedData["score"]?.serializedString == #"{"home":1e0}"#, "the value's literal is kept")
            #expect(second.registry.token(widgetToken)?.pushType == .widgets)
            #expect(second.clock.advanced == 3600)
            await second.shutdown()
        }
    }

    @Test func aFileThatCannotBeReadIsSetAsideAndTheEmulatorStartsAfresh() async throws {
        let folder = try TestFiles.folder("emulator-state")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = folder + "/devices.json"
        try #"{"devices": "from another version"}"#.write(toFile: file, atomically: true, encoding: .utf8)
        let emulator = try await APNsEmulator.start(.init(stateFile: file))
        #expect(emulator.devices.count == 0)
        #expect(!FileManager.default.fileExists(atPath: file))
        #expect(try String(contentsOfFile: file + ".unreadable", encoding: .utf8).contains("from another version"))
        await emulator.shutdown()
    }
}
