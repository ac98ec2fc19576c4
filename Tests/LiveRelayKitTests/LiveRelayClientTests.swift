import Foundation
import Testing

@_spi(Adapter) @testable import LiveRelayKit

/// What the set-up finds by itself: the activity's key, the app's APNs environment, the device.
struct LiveRelayClientTests {
    struct Attributes: Codable {
        var activityKey: String?
        var orderNumber: Int
    }

    @Test func anActivitysKeyIsItsAttributeOrElseItsID() {
        let client = LiveRelayClient(
            server: URL(string: "http://127.0.0.1:1")!, clientKey: "k", bundleID: "b", environment: .sandbox, deviceID: "d",
            storage: MemoryReportStorage())
        #expect(client.activityKey(of: Attributes(activityKey: "order-42", orderNumber: 1), activityID: "A1") == "order-42")
        #expect(client.activityKey(of: Attributes(activityKey: nil, orderNumber: 1), activityID: "A1") == "A1")
        let byNumber = LiveRelayClient(
            server: URL(string: "http://127.0.0.1:1")!, clientKey: "k", activityKeyAttribute: "orderNumber", bundleID: "b", environment: .sandbox,
            deviceID: "d", storage: MemoryReportStorage())
        #expect(byNumber.activityKey(of: Attributes(activityKey: nil, orderNumber: 42), activityID: "A1") == "42")
    }

    @Test func theEnvironmentIsTheProvisioningProfilesApsEnvironment() {
        func profile(_ value: String) -> Data {
            Data("garbage\u{0}<plist><dict><key>aps-environment</key>\n\t\t<string>\(value)</string></dict></plist>\u{1}".utf8)
        }
        #expect(PushEnvironment.environment(inProfile: profile("development")) == .sandbox)
        #expect(PushEnvironment.environment(inProfile: profile("production")) == .production)
        #expect(PushEnvironment.environment(inProfile: Data("no entitlement".utf8)) == .production)
        // No profile: an App Store build (production), or a Simulator build (the sandbox).
        #expect(PushEnvironment.environment(profile: nil, isSimulator: false) == .production)
        #expect(PushEnvironment.environment(profile: nil, isSimulator: true) == .sandbox)
        #expect(PushEnvironment.environment(profile: profile("development"), isSimulator: false) == .sandbox)
    }

    @Test func theDeviceIDIsMadeOnceAndKeptAndOneThatCannotBeReadIsNeverReplaced() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("liverelaykit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let first = try #require(LiveRelayClient.installationID(in: folder))
        #expect(LiveRelayClient.installationID(in: folder) == first && UUID(uuidString: first) != nil)
        let file = folder.appendingPathComponent("device-id").path
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int == 0o600)

        // There, but not readable now (as on a locked phone): no id, and none made over it.
        let locked = FileManager.default.temporaryDirectory.appendingPathComponent("liverelaykit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: locked) }
        try FileManager.default.createDirectory(at: locked.appendingPathComponent("device-id"), withIntermediateDirectories: true)
        #expect(LiveRelayClient.installationID(in: locked) == nil)
        var isFolder: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: locked.appendingPathComponent("device-id").path, isDirectory: &isFolder) && isFolder.boolValue)

        // Garbage is replaced; many processes starting at once (an app and its widget
        // extension in one app group) agree on one id.
        try Data().write(to: URL(fileURLWithPath: file))
        let replaced = try #require(LiveRelayClient.installationID(in: folder))
        #expect(replaced != first && LiveRelayClient.installationID(in: folder) == replaced)
        let shared = FileManager.default.temporaryDirectory.appendingPathComponent("liverelaykit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: shared) }
        let made = Locked<Set<String>>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            if let id = LiveRelayClient.installationID(in: shared) { made.withLock { _ = $0.insert(id) } }
        }
        #expect(made.withLock { $0 } == [try #require(LiveRelayClient.installationID(in: shared))])
    }

    /// A widget extension reporting for its app keeps a backlog of its own beside the app's:
    /// two processes never write one file.
    @Test func anExtensionKeepsItsOwnBacklogBesideTheApps() {
        #expect(LiveRelayClient.backlogName(running: "com.example.app", app: "com.example.app") == "backlog.json")
        #expect(LiveRelayClient.backlogName(running: nil, app: "com.example.app") == "backlog.json")
        #expect(LiveRelayClient.backlogName(running: "com.example.app.widgets", app: "com.example.app") == "backlog-com.example.app.widgets.json")
    }
}
