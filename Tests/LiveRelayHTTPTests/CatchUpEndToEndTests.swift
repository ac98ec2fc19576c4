import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Testing

/// The start-to-token gap, end to end: simulated iPhones running LiveRelayKit report their update
/// tokens late (a second after the start, after a kill, after an outage), and each ends showing
/// the key's latest state, sent once.
struct CatchUpEndToEndTests {
    @Test func anUpdateAndAnEndBeforeTheTokenLeaveTheIPhoneShowingTheEndThenNothing() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            #expect(try await relay.post("/v1/activities/order-1/start", startBody(key: "order-1")).status == 201)
            try await relay.dispatch()
            try await relay.eventually { try relay.activity(on: "iphone-1")?.state == .active }

            // Before the app has reported its update token: held for it, not lost.
            let update = try await relay.post("/v1/activities/order-1/update", .object([("contentState", content("on the way", 10))]))
            #expect(update.json["deliveries"] == .integer(0) && update.json["held"] == .integer(1), "\(update.json)")
            #expect(update.json["warnings"] == nil, "\(update.json)")
            let dismissal = relay.emulator.clock.now + 3600
            let end = try await relay.post(
                "/v1/activities/order-1/end",
                .object([("contentState", content("delivered", 0)), ("dismissalDate", .string(dismissal.iso8601))]))
            #expect(end.json["held"] == .integer(1), "\(end.json)")
            try await relay.dispatch()
            #expect(try relay.activity(on: "iphone-1")?.content.state == content("preparing", 30))

            // The token arrives: the device is sent the end at once, with its dismissal date.
            relay.emulator.clock.advance(by: relay.emulator.configuration.devices.tokenIssueDelay)
            relay.emulator.devices.advanceAll()
            try await relay.eventually { try await !relay.store.activityTokens(app: harnessApp, key: "order-1").isEmpty }
            try await relay.dispatch()
            try await relay.eventually { try relay.activity(on: "iphone-1")?.state == .ended }
            #expect(try relay.activity(on: "iphone-1")?.content.state == content("delivered", 0))
            let caughtUp = try await relay.store.deliveries(DeliveryQuery(key: "order-1")).filter { $0.event == .end }
            #expect(caughtUp.map(\.status) == [.sent])
            #expect(caughtUp.first?.priorityReason.hasPrefix("caught up") == true, "\(caughtUp)")

            // Off the Lock Screen at the dismissal date; and no false alarm once the window passed.
            try await relay.advance(by: 3500)
            #expect(try relay.activity(on: "iphone-1")?.state == .ended, "on the Lock Screen until the dismissal date")
            try await relay.advance(by: 101)
            #expect(try relay.activity(on: "iphone-1") == nil, "gone at the dismissal date")
            try await relay.advance(by: 300)
            let events = try await relay.get("/v1/events?key=order-1").json["events"]?.arrayElements?.compactMap { $0["type"]?.stringValue } ?? []
            #expect(events.contains("activity.started") && events.contains("activity.ended"), "\(events)")
            #expect(!events.contains("activity.start_unconfirmed"), "\(events)")
        }
    }

    @Test func anAppKilledBeforeItReportsIsShownTheLastUpdateOnceWhenItLaunchesMinutesLater() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            // Killed: ActivityKit keeps going, LiveRelayKit does not run.
            try relay.emulator.reporter.setTarget(nil, deviceID: "iphone-1", bundleID: harnessApp)
            _ = try await relay.post("/v1/activities/order-2/start", startBody(key: "order-2"))
            try await relay.dispatch()
            try await relay.eventually { try relay.activity(on: "iphone-1") != nil }
            relay.emulator.clock.advance(by: 1)
            relay.emulator.devices.advanceAll()
            for (status, eta) in [("cooking", 20), ("on the way", 10)] {
                let update = try await relay.post(
                    "/v1/activities/order-2/update",
                    .object([
                        ("contentState", content(status, eta)),
                        ("alert", .object([("title", .string(status)), ("body", .string("\(eta) minutes"))])),
                    ]))
                #expect(update.json["held"] == .integer(1), "\(update.json)")
                relay.emulator.clock.advance(by: 60)
            }
            try await relay.dispatch()
            #expect(try relay.activity(on: "iphone-1")?.content.state == content("preparing", 30))

            // Launched five minutes later: it reports the activity's token, and is sent the second update.
            relay.emulator.clock.advance(by: 300)
            try relay.emulator.reporter.setTarget(
                AppReporting(url: relay.baseURL, clientKey: relay.keys[.client]), deviceID: "iphone-1", bundleID: harnessApp)
            try await relay.eventually { try await !relay.store.activityTokens(app: harnessApp, key: "order-2").isEmpty }
            try await relay.dispatch()
            try await relay.eventually { try relay.activity(on: "iphone-1")?.content.state == content("on the way", 10) }
            let updates = try await relay.store.deliveries(DeliveryQuery(key: "order-2")).filter { $0.event == .update }
            #expect(updates.count == 1, "one push, the latest state: \(updates)")
            // The alerting change is minutes old: the device shows it without the alert.
            #expect(updates.first.map { String(decoding: $0.payload, as: UTF8.self).contains("\"alert\"") } == false)
        }
    }

    @Test func twoDevicesOneReportingAtOnceAndOneAfterAnOutageEndInTheSameState() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            try await relay.addRegisteredDevice("iphone-2")
            // iphone-2's reports do not get through until its network is back.
            try relay.emulator.reporter.setTarget(nil, deviceID: "iphone-2", bundleID: harnessApp)
            _ = try await relay.post("/v1/activities/order-3/start", startBody(key: "order-3"))
            try await relay.dispatch()
            try await relay.waitForToken("order-3", device: "iphone-1")
            let update = try await relay.post(
                "/v1/activities/order-3/update",
                .object([("contentState", content("on the way", 10)), ("alert", json(#"{"title": "On the way", "body": "10 minutes"}"#))]))
            #expect(update.json["deliveries"] == .integer(1) && update.json["held"] == .integer(1), "\(update.json)")
            try await relay.dispatch()
            relay.emulator.clock.advance(by: 20)
            try relay.emulator.reporter.setTarget(
                AppReporting(url: relay.baseURL, clientKey: relay.keys[.client]), deviceID: "iphone-2", bundleID: harnessApp)
            try await relay.eventually { try await relay.store.activityTokens(app: harnessApp, key: "order-3").count == 2 }
            try await relay.dispatch()
            try await relay.eventually { try relay.activity(on: "iphone-2")?.content.state == content("on the way", 10) }
            #expect(try relay.activity(on: "iphone-1")?.content.state == content("on the way", 10))
            let pushes = try await relay.store.deliveries(DeliveryQuery(key: "order-3"))
            #expect(pushes.filter { $0.target.deviceID == "iphone-1" }.map(\.event).sorted { $0.rawValue < $1.rawValue } == [.start, .update])
            let caughtUp = try #require(pushes.first { $0.target.deviceID == "iphone-2" && $0.event == .update })
            // Twenty seconds after the alerting update: still fresh, so the late device hears it too.
            #expect(String(decoding: caughtUp.payload, as: UTF8.self).contains("\"alert\""))
            #expect(try relay.activity(on: "iphone-2")?.lastAlert != nil)
        }
    }

    @Test func aDeviceThatRegistersAfterTheStartIsNotPartOfItAndGetsNothing() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("order-4", on: ["iphone-1"])
            try await relay.addRegisteredDevice("iphone-2")
            let update = try await relay.post("/v1/activities/order-4/update", .object([("contentState", content("on the way", 10))]))
            #expect(update.json["deliveries"] == .integer(1) && update.json["held"] == .integer(0), "\(update.json)")
            try await relay.dispatch()
            #expect(try relay.activity(on: "iphone-2") == nil)
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "order-4")).allSatisfy { $0.target.deviceID == "iphone-1" })
            // A token for the ended key from a device never in its audience is refused.
            _ = try await relay.post("/v1/activities/order-4/end", .object([("contentState", content("delivered", 0))]))
            let stray = try await relay.post(
                "/v1/activities/order-4/tokens",
                .object([
                    ("deviceID", .string("iphone-2")), ("attributesType", .string("DeliveryAttributes")),
                    ("token", .string(String(repeating: "cd", count: 32))),
                ]), scope: .client)
            #expect(stray.status == 409 && stray.json["error"]?["code"] == .string("activity_ended"), "\(stray.json)")
        }
    }

    @Test func aStartWhoseAttributesNameAnotherKeyIsRefusedNamingTheField() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            var body = startBody(key: "order-6")
            body = .object(
                (body.objectMembers ?? []).map {
                    $0.key == "attributes" ? ($0.key, .object([("activityKey", .string("order-5")), ("orderNumber", .integer(5))])) : $0
                })
            let refused = try await relay.post("/v1/activities/order-6/start", body)
            #expect(refused.status == 422, "\(refused.json)")
            #expect(refused.json["error"]?["field"] == .string("attributes.activityKey"))
            #expect(refused.json["error"]?["code"] == .string("key_mismatch"))
            #expect(try await relay.store.activity(app: harnessApp, key: "order-6") == nil)
        }
    }
}
