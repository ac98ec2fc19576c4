import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelayTesting
import SimulatedDevices
import Testing

/// Our client → the emulator's APNs layer → a simulated iPhone's WidgetKit: widgets and controls
/// placed get tokens APNs routes, a reload push reloads them within the day's budget, and a
/// token withdrawn is `410`.
@Suite struct WidgetDeliveryTests {
    static let bundle = "com.example.scores"

    func withWidgets(
        budget: Int = 70, iOS: SystemVersion = SystemVersion(26), _ body: @escaping @Sendable (APNsEmulator, APNsClient) async throws -> Void
    ) async throws {
        var configuration = APNsEmulator.Configuration()
        configuration.devices = DeviceRuntimeSettings(reloadsPerDay: budget)
        try await withEmulatorAndClient(configuration) { emulator, client in
            try emulator.devices.addDevice(id: "iphone", systemVersion: iOS)
            try emulator.devices.install(SimulatedApp(bundleID: Self.bundle), on: "iphone")
            try await body(emulator, client)
        }
    }

    func surfaces(_ emulator: APNsEmulator) throws -> AppSurfaces? { try emulator.devices.device("iphone").surfaces[Self.bundle] }

    func place(_ emulator: APNsEmulator, _ kind: String, _ family: String) throws {
        try emulator.devices.withDevice("iphone") { device, now in
            ((), try device.placeWidget(bundleID: Self.bundle, kind: kind, family: family, at: now))
        }
    }

    @Test func aWidgetsPushReloadsEveryWidgetOfTheAppWithWhatItsExtensionReads() async throws {
        try await withWidgets { emulator, client in
            try place(emulator, "score", "systemSmall")
            try place(emulator, "table", "systemMedium")
            let token = try #require(try surfaces(emulator)?.widgetToken)
            #expect(emulator.registry.token(token)?.pushType == .widgets, "APNs routes it as a widget token")
            try emulator.devices.withDevice("iphone") { device, _ in
                try device.setSharedData(bundleID: Self.bundle, kind: "score", value: .object([("home", .integer(2)), ("away", .integer(1))]))
                return ((), [])
            }
            let bundle = try BundleID(Self.bundle)
            try await client.reload(.widgets, to: DeviceToken(token), topic: bundle, options: PushOptions(priority: .powerConsiderate))
            let widgets = try #require(try surfaces(emulator)?.widgets)
            #expect(widgets.map(\.reloads.count) == [1, 1])
            #expect(widgets.allSatisfy { $0.reloads.lastAt.map { abs($0.timeIntervalSince(emulator.clock.now)) < 5 } == true })
            #expect(widgets[0].reloads.value == .object([("home", .integer(2)), ("away", .integer(1))]))
            #expect(widgets[1].reloads.value == nil, "the app wrote nothing for the table")

            // The same token with a Live Activity push is not for that topic.
            let wrong = await #expect(throws: APNsError.self) {
                try await client.send(
                    LiveActivityPayload.update(content: ActivityContent(state: ["a": 1], staleDate: nil), timestamp: emulator.clock.now),
                    to: DeviceToken(token), topic: bundle)
            }
            #expect(wrong?.reason == .deviceTokenNotForTopic)

            // A rotated token: the old one is gone at APNs, the new one reloads.
            try emulator.devices.withDevice("iphone") { device, now in ((), try device.rotateWidgetToken(bundleID: Self.bundle, at: now)) }
            let rotated = try #require(try surfaces(emulator)?.widgetToken)
            #expect(rotated != token)
            let old = await #expect(throws: APNsError.self) { try await client.reload(.widgets, to: DeviceToken(token), topic: bundle) }
            #expect(old?.status == 410 && old?.reason == .unregistered)
            try await client.reload(.widgets, to: DeviceToken(rotated), topic: bundle)
            #expect(try surfaces(emulator)?.widgets.map(\.reloads.count) == [2, 2])

            // The last widget removed: WidgetKit withdraws the token, and APNs answers 410.
            for (kind, family) in [("score", "systemSmall"), ("table", "systemMedium")] {
                try emulator.devices.withDevice("iphone") { device, now in
                    ((), try device.removeWidget(bundleID: Self.bundle, kind: kind, family: family, at: now))
                }
            }
            #expect(try surfaces(emulator)?.widgetToken == nil)
            let withdrawn = await #expect(throws: APNsError.self) { try await client.reload(.widgets, to: DeviceToken(rotated), topic: bundle) }
            #expect(withdrawn?.status == 410)
        }
    }

    @Test func pastTheDaysBudgetAReloadIsDroppedAndTheLogSaysSo() async throws {
        try await withWidgets(budget: 2) { emulator, client in
            try place(emulator, "score", "systemSmall")
            let token = try DeviceToken(try #require(try surfaces(emulator)?.widgetToken))
            let bundle = try BundleID(Self.bundle)
            for _ in 0..<3 { try await client.reload(.widgets, to: token, topic: bundle) }
            #expect(try surfaces(emulator)?.widgets.first?.reloads.count == 2, "APNs took all three; the device reloaded two")
            #expect(try emulator.devices.device("iphone").log.last?.message.contains("reload budget of 2 a day is spent") == true)
            // A day later there is room again.
            emulator.clock.advance(by: 86_401)
            try await client.reload(.widgets, to: token, topic: bundle)
            #expect(try surfaces(emulator)?.widgets.first?.reloads.count == 3)
        }
    }

    @Test func aControlsPushReloadsThatControlOnly() async throws {
        try await withWidgets { emulator, client in
            for kind in ["garage", "lights"] {
                try emulator.devices.withDevice("iphone") { device, now in ((), try device.addControl(bundleID: Self.bundle, kind: kind, at: now)) }
            }
            let controls = try #require(try surfaces(emulator)?.controls)
            #expect(Set(controls.map(\.token)).count == 2, "a token per control")
            #expect(emulator.registry.token(controls[0].token)?.pushType == .controls)
            let bundle = try BundleID(Self.bundle)
            try await client.reload(.controls, to: DeviceToken(controls[0].token), topic: bundle)
            #expect(try surfaces(emulator)?.controls.map(\.reloads.count) == [1, 0])
            let widgetsTopic = await #expect(throws: APNsError.self) {
                try await client.reload(.widgets, to: DeviceToken(controls[1].token), topic: bundle)
            }
            #expect(widgetsTopic?.reason == .deviceTokenNotForTopic)
        }
    }

    @Test func beforeIOS26ThereIsNoWidgetTokenButControlsAndABodyWithoutContentChangedReloadsNothing() async throws {
        try await withWidgets(iOS: SystemVersion(18)) { emulator, _ in
            #expect(throws: SurfaceError.self) { try place(emulator, "score", "systemSmall") }
            // Controls came with iOS 18.
            try emulator.devices.withDevice("iphone") { device, now in ((), try device.addControl(bundleID: Self.bundle, kind: "garage", at: now)) }
            #expect(try surfaces(emulator)?.controls.count == 1)
        }
        try await withWidgets { emulator, client in
            try place(emulator, "score", "systemSmall")
            #expect(throws: SurfaceError.self) { try place(emulator, "score", "systemHuge") }
            let token = try #require(try surfaces(emulator)?.widgetToken)
            var request = try APNsRequest.reload(.widgets, to: DeviceToken(token), topic: BundleID(Self.bundle))
            request.body = Array(#"{"aps":{"content-available":1}}"#.utf8)
            #expect(try await client.execute(request).status == 200, "APNs does not read the body")
            #expect(try surfaces(emulator)?.widgets.first?.reloads.count == 0)
            #expect(try emulator.devices.device("iphone").log.last?.message.contains("no aps.content-changed true") == true)
        }
    }
}
