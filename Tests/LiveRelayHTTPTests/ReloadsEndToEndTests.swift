import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Testing

/// A backend reloads an app's widgets and controls through the server: simulated iPhones running
/// LiveRelayKit report their tokens, the outbox sends a reload to each, the device reloads.
struct ReloadsEndToEndTests {
    /// Two iPhones with the app's widgets and one without; each with what the app shared.
    func fleet(_ relay: RelayHarness) async throws {
        for (device, widgets) in [("iphone-1", ["order"]), ("iphone-2", ["order", "history"]), ("iphone-3", [])] {
            try await relay.addRegisteredDevice(device)
            try relay.emulator.devices.withDevice(device) { phone, now in
                try phone.setSharedData(bundleID: harnessApp, kind: "order", value: .object([("status", .string("on the way"))]))
                return ((), try widgets.flatMap { try phone.placeWidget(bundleID: harnessApp, kind: $0, family: "systemSmall", at: now) })
            }
        }
        try await relay.eventually {
            let reported = try await [relay.store.surfaceTokens(deviceID: "iphone-1"), relay.store.surfaceTokens(deviceID: "iphone-2")]
            return reported.map { $0.first?.widgets.count ?? 0 } == [1, 2]
        }
    }

    func reloads(_ relay: RelayHarness, _ device: String) throws -> [Int] {
        try relay.emulator.devices.device(device).surfaces[harnessApp]?.widgets.map(\.reloads.count) ?? []
    }

    @Test func aReloadToEveryoneReachesEachDeviceWithWidgetsAndNoOther() async throws {
        try await withRelayHarness { relay in
            try await fleet(relay)
            let answer = try await relay.post("/v1/widgets/reload", .object([("audience", .object([("everyone", .bool(true))]))]))
            #expect(answer.status == 200, "\(answer.json)")
            #expect(
                answer.json["deliveries"] == .integer(2) && answer.json["heldBack"] == .integer(0) && answer.json["pushType"] == .string("widgets"))
            try await relay.dispatch()
            try await relay.eventually { try reloads(relay, "iphone-1") == [1] && reloads(relay, "iphone-2") == [1, 1] }
            #expect(
                try relay.emulator.devices.device("iphone-1").surfaces[harnessApp]?.widgets.first?.reloads.value?["status"] == .string("on the way"))
            #expect(try relay.emulator.devices.device("iphone-3").surfaces[harnessApp]?.widgets.isEmpty == true)

            // Of one kind only: the device whose widgets are of it.
            let ofHistory = try await relay.post(
                "/v1/widgets/reload", .object([("kinds", .array([.string("history")])), ("audience", .object([("everyone", .bool(true))]))]))
            #expect(ofHistory.json["deliveries"] == .integer(1), "\(ofHistory.json)")
            // The history keeps each push, with APNs' answer.
            try await relay.dispatch()
            let pushes = try await relay.store.deliveries(DeliveryQuery(key: ""))
            #expect(pushes.count == 3 && pushes.allSatisfy { $0.event == .reload && $0.status == .sent && $0.target.kind == .widgets })
            let listed = try await relay.get("/v1/deliveries")
            let first = listed.json["deliveries"]?[0]
            #expect(
                first?["event"] == .string("reload") && first?["target"] == .string("widgets") && first?["apnsStatus"] == .integer(200),
                "\(listed.json)")

            // The dashboard: each reload in the history, leading to the device, whose page lists its tokens.
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let history = try await browser.get("/dashboard/deliveries").text
            #expect(history.contains("<td data-label=\"event:\">reload</td>") && history.contains("href=\"/dashboard/device?id=iphone-2\""))
            let device = try await browser.get("/dashboard/device?id=iphone-2").text
            let token = try #require(try relay.emulator.devices.device("iphone-2").surfaces[harnessApp]?.widgetToken)
            #expect(device.contains(DeviceToken.shortened(token)) && device.contains("history (systemSmall)"), "\(device)")
            #expect(try await browser.get("/dashboard/device").status == 400)

            // To a device without widgets: nothing, and the answer says why.
            let none = try await relay.post("/v1/widgets/reload", .object([("audience", .object([("devices", .array([.string("iphone-3")]))]))]))
            #expect(none.json["deliveries"] == .integer(0) && none.json["warnings"]?[0]?.stringValue?.contains("no device") == true, "\(none.json)")
        }
    }

    @Test func pastADevicesDayOfReloadsTheRestIsHeldBackAndTheAnswerSaysSo() async throws {
        try await withRelayHarness { relay in
            try await fleet(relay)
            let one = JSONValue.object([("audience", .object([("devices", .array([.string("iphone-1")]))]))])
            for _ in 0..<70 { #expect(try await relay.post("/v1/widgets/reload", one).json["deliveries"] == .integer(1)) }
            let over = try await relay.post("/v1/widgets/reload", one)
            #expect(over.json["deliveries"] == .integer(0) && over.json["heldBack"] == .integer(1), "\(over.json)")
            #expect(over.json["warnings"]?[0]?.stringValue?.contains("70 widgets reloads in the last 24 hours") == true)
            // The other device's day is its own.
            let other = try await relay.post("/v1/widgets/reload", .object([("audience", .object([("devices", .array([.string("iphone-2")]))]))]))
            #expect(other.json["deliveries"] == .integer(1))
        }
    }

    @Test func aTokenAPNsRefusesIsRetiredAndAFailureIsAnEvent() async throws {
        try await withRelayHarness { relay in
            try await fleet(relay)
            let token = try #require(try relay.emulator.devices.device("iphone-1").surfaces[harnessApp]?.widgetToken)
            relay.emulator.registry.unregister(token: token, since: relay.emulator.clock.now)
            let other = try #require(try relay.emulator.devices.device("iphone-2").surfaces[harnessApp]?.widgetToken)
            _ = relay.emulator.faults.add(EmulatorFault(EmulatorFault.respond(.badTopic), scope: .token(other)))
            _ = try await relay.post("/v1/widgets/reload", .object([("audience", .object([("everyone", .bool(true))]))]))
            try await relay.dispatch()
            #expect(try await relay.store.surfaceTokens(deviceID: "iphone-1").isEmpty, "410: the token is retired")
            #expect(try await relay.store.surfaceTokens(deviceID: "iphone-2").count == 1, "a refusal that is not the token's keeps it")
            let events = try await relay.store.events(EventQuery(limit: 100))
            #expect(events.contains { $0.type == .tokenInvalidated && $0.deviceID == "iphone-1" && $0.data["token"] == .string("widgets") })
            #expect(events.contains { $0.type == .reloadFailed && $0.deviceID == "iphone-2" && $0.data["reason"] == .string("BadTopic") })
        }
    }

    @Test func aControlsReloadReachesTheControlsOfThoseKinds() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            for kind in ["door", "lights"] {
                try relay.emulator.devices.withDevice("iphone-1") { phone, now in
                    ((), try phone.addControl(bundleID: harnessApp, kind: kind, at: now))
                }
            }
            try await relay.eventually { try await relay.store.surfaceTokens(deviceID: "iphone-1").count == 2 }
            let answer = try await relay.post(
                "/v1/controls/reload", .object([("kinds", .array([.string("door")])), ("audience", .object([("everyone", .bool(true))]))]))
            #expect(answer.json["deliveries"] == .integer(1) && answer.json["pushType"] == .string("controls"), "\(answer.json)")
            try await relay.dispatch()
            try await relay.eventually {
                try relay.emulator.devices.device("iphone-1").surfaces[harnessApp]?.controls.map(\.reloads.count) == [1, 0]
            }
            // The same request again under its idempotency key: replayed, not sent twice.
            let body = JSONValue.object([("audience", .object([("everyone", .bool(true))]))])
            let first = try await relay.post("/v1/controls/reload", body, headers: [("Idempotency-Key", "reload-1")])
            let again = try await relay.post("/v1/controls/reload", body, headers: [("Idempotency-Key", "reload-1")])
            #expect(first.json == again.json && first.json["deliveries"] == .integer(2))
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "")).count == 3)
        }
    }

    /// A reload with a later `at` is answered 202 with its schedule, and runs when due.
    @Test func aReloadAtALaterTimeRunsWhenDue() async throws {
        try await withRelayHarness { relay in
            try await fleet(relay)
            let at = relay.emulator.clock.now + 600
            let scheduled = try await relay.post(
                "/v1/widgets/reload",
                .object([("audience", .object([("everyone", .bool(true))])), ("at", .integer(Int64(at.timeIntervalSince1970)))]))
            #expect(
                scheduled.status == 202 && scheduled.json["action"] == .string("reload") && scheduled.json["key"] == .string(""), "\(scheduled.json)")
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "")).isEmpty)
            try await relay.advance(by: 601)
            _ = try await relay.relay.runDueSchedules()  // if the ticker has not yet
            try await relay.dispatch()
            try await relay.eventually { try reloads(relay, "iphone-1") == [1] && reloads(relay, "iphone-2") == [1, 1] }
            let id = try #require(scheduled.json["scheduleID"]?.stringValue)
            let done = try await relay.get("/v1/schedules/\(id)")
            #expect(done.json["state"] == .string("done") && done.json["result"]?["deliveries"] == .integer(2), "\(done.json)")
        }
    }

    @Test(arguments: [
        (#"{"kinds": ["order"]}"#, "audience"),
        (#"{"audience": {"everyone": true}, "priority": "auto"}"#, "priority"),
        (#"{"audience": {"everyone": true}, "priority": 1}"#, "priority"),
        (#"{"audience": {"everyone": true}, "kinds": []}"#, "kinds"),
        (#"{"audience": {"everyone": true}, "kinds": [""]}"#, "kinds[0]"),
        (#"{"audience": {"everyone": true}, "kinds": [7]}"#, "kinds"),
        (#"{"audience": {"devices": []}}"#, "audience.devices"),
        (#"{"audience": {"everyone": true}, "at": "soon"}"#, "at"),
        (#"{"audience": {"everyone": true}, "widgets": ["order"]}"#, "widgets"),
    ])
    func aBadReloadNamesItsFieldAndQueuesNothing(body: String, field: String) async throws {
        try await withRelayHarness { relay in
            let answer = try await relay.post("/v1/widgets/reload", try JSONValue(parsing: Array(body.utf8)))
            #expect(answer.status == 400, "\(answer.json)")
            #expect(answer.json["error"]?["field"] == .string(field), "\(answer.json)")
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "")).isEmpty)
        }
    }
}
