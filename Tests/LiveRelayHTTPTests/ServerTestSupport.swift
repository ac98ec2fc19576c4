import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Testing

/// The delivery example of Apple's talk: a key in the attributes, a status and an ETA in the content.
let deliveryType = ActivityAttributesType(
    name: "DeliveryAttributes",
    attributes: SwiftStruct("DeliveryAttributes", [.init("activityKey", .string), .init("orderNumber", .int)]),
    contentState: SwiftStruct("ContentState", [.init("status", .string), .init("etaMinutes", .int)]))

func json(_ text: String) -> JSONValue { try! JSONValue(parsing: text) }

/// The harness's app, which the tests' keys belong to unless they say otherwise.
let harnessApp = RelayHarness.bundleID.value

func content(_ status: String, _ eta: Int) -> JSONValue {
    .object([("status", .string(status)), ("etaMinutes", .integer(eta))])
}

func startBody(key: String, audience: JSONValue = json(#"{"everyone": true}"#), extra: [(String, JSONValue)] = []) -> JSONValue {
    .object(
        [
            ("attributesType", .string("DeliveryAttributes")),
            ("attributes", .object([("activityKey", .string(key)), ("orderNumber", .integer(42))])),
            ("contentState", content("preparing", 30)),
            ("alert", json(#"{"title": "Order 42", "body": "We are preparing your order"}"#)),
            ("audience", audience),
        ] + extra)
}

extension RelayHarness {
    /// A device whose push-to-start token the server holds.
    func addRegisteredDevice(_ id: String, frequentUpdates: Bool = false, environment: PushEnvironment = .sandbox) async throws {
        try addDevice(id, types: [deliveryType], frequentUpdates: frequentUpdates, environment: environment)
        try await eventually { try await self.store.pushToStartTokens(deviceID: id).count == 1 }
    }

    /// The device's only activity.
    func activity(on device: String) throws -> SimulatedActivity? {
        try emulator.devices.device(device).activities.first
    }

    /// Registers `devices` (a push-to-start token each), starts `key` on all of them, and waits
    /// until the server holds each one's update token.
    func startActivity(_ key: String, on devices: [String]) async throws {
        for device in devices { try await addRegisteredDevice(device) }
        _ = try await post("/v1/activities/\(key)/start", startBody(key: key))
        try await dispatch()
        for device in devices { try await waitForToken(key, device: device) }
    }

    /// Starts `key` on iphone-1, then sends it an update APNs answers with `reason`: the failed
    /// push, as the store keeps it.
    func failedUpdate(_ key: String, answered reason: APNsReason) async throws -> DeliveryRecord {
        try await startActivity(key, on: ["iphone-1"])
        _ = emulator.faults.add(EmulatorFault(EmulatorFault.respond(reason)))
        #expect(try await post("/v1/activities/\(key)/update", .object([("contentState", content("late", 40))])).status == 200)
        try await dispatch()
        return try #require(try await store.deliveries(DeliveryQuery(key: key, status: .failed)).first)
    }

    /// Lets the device issue the activity's update token (a second after the start, as on
    /// iPhones) and waits until the server holds it under `key`.
    func waitForToken(_ key: String, device: String, app: String = harnessApp) async throws {
        emulator.clock.advance(by: emulator.configuration.devices.tokenIssueDelay)
        emulator.devices.advanceAll()
        try await eventually {
            try await self.store.activityTokens(app: app, key: key).contains { $0.deviceID == device && $0.state == .live }
        }
    }
}
