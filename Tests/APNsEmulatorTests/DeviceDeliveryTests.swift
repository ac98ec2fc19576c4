import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelayTesting
import SimulatedDevices
import Testing

/// Our client → the emulator's APNs layer → a simulated iPhone, whose activity changes as
/// ActivityKit's rules say.
@Suite struct DeviceDeliveryTests {
    struct DeliveryAttributes: ActivityAttributes {
        struct ContentState: Codable, Hashable {
            var step: String
            var eta: Int
        }
        var orderNumber: Int
    }

    static let bundle = "com.example.delivery"
    static let type = ActivityAttributesType(
        name: "DeliveryAttributes",
        attributes: SwiftStruct("DeliveryAttributes", [.init("orderNumber", .int)]),
        contentState: SwiftStruct("ContentState", [.init("step", .string), .init("eta", .int)]))

    /// An emulator with one device and one app, and a client on the emulator's clock.
    func withDevice(_ body: @escaping @Sendable (APNsEmulator, APNsClient) async throws -> Void) async throws {
        try await withEmulatorAndClient { emulator, client in
            try emulator.devices.addDevice(id: "iphone")
            try emulator.devices.install(SimulatedApp(bundleID: Self.bundle, attributeTypes: [Self.type]), on: "iphone")
            try await body(emulator, client)
        }
    }

    func device(_ emulator: APNsEmulator) throws -> SimulatedDevice { try emulator.devices.device("iphone") }

    func tick(_ emulator: APNsEmulator, _ seconds: TimeInterval = 1) {
        emulator.clock.advance(by: seconds)
        emulator.devices.advanceAll()
    }

    @Test func pushToStartThenUpdateThenEndAndTheTokenIsGone() async throws {
        try await withDevice { emulator, client in
            let bundle = try BundleID(Self.bundle)
            let pushToStart = try #require(try device(emulator).apps[Self.bundle]?.pushToStartTokens["DeliveryAttributes"])
            let start = try LiveActivityPayload.start(
                attributes: DeliveryAttributes(orderNumber: 42),
                content: ActivityContent(state: .init(step: "preparing", eta: 30), staleDate: nil),
                alert: AlertConfiguration(title: "Order 42", body: "Being prepared"), timestamp: emulator.clock.now, inputPush: .token)
            try await client.send(start, to: DeviceToken(pushToStart), topic: bundle)
            let started = try #require(try device(emulator).activities.first)
            #expect(started.state == .active && started.attributes == .object([("orderNumber", .number("42"))]))

            tick(emulator)
            let token = try #require(try device(emulator).activity(started.id)?.pushToken, "the update token arrives after a start")
            let update = try LiveActivityPayload.update(
                content: ActivityContent(state: DeliveryAttributes.ContentState(step: "delivering", eta: 5), staleDate: nil),
                timestamp: emulator.clock.now)
            try await client.send(update, to: DeviceToken(token), topic: bundle)
            #expect(try device(emulator).activity(started.id)?.content.state["step"] == .string("delivering"))

            // A push whose content does not decode is accepted by APNs and dropped by the device.
            tick(emulator)
            try await client.send(
                LiveActivityPayload(
                    parsing: Array(
                        #"{"aps":{"event":"update","timestamp":\#(Int(emulator.clock.now.timeIntervalSince1970)),"content-state":{"step":3}}}"#.utf8)),
                to: DeviceToken(token), topic: bundle)
            #expect(try device(emulator).log.last?.message.contains("does not decode") == true)

            tick(emulator)
            let end = try LiveActivityPayload.end(
                content: ActivityContent(state: DeliveryAttributes.ContentState(step: "delivered", eta: 0), staleDate: nil),
                dismissalPolicy: .immediate, timestamp: emulator.clock.now)
            try await client.send(end, to: DeviceToken(token), topic: bundle)
            #expect(try device(emulator).activity(started.id) == nil, "ended and dismissed at once")

            tick(emulator)
            let gone = await #expect(throws: APNsError.self) { try await client.send(update, to: DeviceToken(token), topic: bundle) }
            #expect(gone?.status == 410 && gone?.reason == .unregistered)
            #expect(gone?.timestamp != nil)
        }
    }

    @Test func aBroadcastReachesTheSubscribedActivityAndAStoredOneWaitsForAnOfflineDevice() async throws {
        try await withDevice { emulator, client in
            let bundle = try BundleID(Self.bundle)
            let channel = try await client.createChannel(bundleID: bundle, storagePolicy: .mostRecentMessageStored)
            let activityID = try emulator.devices.withDevice("iphone") { device, now in
                try device.request(
                    bundleID: Self.bundle, attributesType: "DeliveryAttributes", attributes: .object([("orderNumber", .number("1"))]),
                    content: ActivityContentState(state: .object([("step", .string("kick-off")), ("eta", .number("0"))])),
                    pushType: .channel(channel), at: now)
            }
            tick(emulator)
            func broadcast(_ step: String) async throws {
                let payload = try LiveActivityPayload.update(
                    content: ActivityContent(state: DeliveryAttributes.ContentState(step: step, eta: 0), staleDate: nil),
                    timestamp: emulator.clock.now)
                try await client.broadcast(
                    payload, channelID: channel, bundleID: bundle,
                    options: BroadcastOptions(priority: .immediate, expiration: .at(emulator.clock.now + 3600)))
            }
            try await broadcast("first half")
            #expect(try device(emulator).activity(activityID)?.content.state["step"] == .string("first half"))

            try emulator.devices.withDevice("iphone") { device, now in ((), device.setOnline(false, at: now)) }
            tick(emulator)
            try await broadcast("second half")
            #expect(try device(emulator).activity(activityID)?.content.state["step"] == .string("first half"))
            tick(emulator)
            try emulator.devices.withDevice("iphone") { device, now in ((), device.setOnline(true, at: now)) }
            #expect(
                try device(emulator).activity(activityID)?.content.state["step"] == .string("second half"),
                "a Most-Recent-Message-Stored channel keeps the latest for offline devices")
        }
    }
}
