import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Testing

/// What a backend hears by reading the event log (`GET /v1/events`), from a real server whose
/// simulated iPhones report through LiveRelayKit.
struct EventsEndToEndTests {
    func events(_ relay: RelayHarness, _ query: String) async throws -> (events: [JSONValue], next: String) {
        let page = try await relay.get("/v1/events?" + query)
        #expect(page.status == 200, "\(page.json)")
        return (page.json["events"]?.arrayElements ?? [], page.json["next"]?.stringValue ?? "")
    }

    @Test func aBackendHearsTheActivityStartOnTheIPhoneAndThePersonDismissIt() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("order-1", on: ["iphone-1"])
            let activity = try #require(try relay.activity(on: "iphone-1"))
            try relay.emulator.devices.withDevice("iphone-1") { device, now in ((), device.dismissByPerson(activityID: activity.id, at: now)) }
            try await relay.eventually { try await self.events(relay, "key=order-1").events.count == 3 }

            let (page, next) = try await events(relay, "key=order-1")
            #expect(page.map { $0["type"]?.stringValue ?? "" } == ["activity.started", "activity.ended", "activity.ended"])
            #expect(page[0]["deviceID"] == .string("iphone-1") && page[0]["environment"] == .string("sandbox"))
            #expect(page[0]["data"]?["activityID"] == .string(activity.id) && page[0]["data"]?["via"] == .string("token"))
            #expect(page[1]["data"]?["cause"] == .string("dismissed") && page[1]["data"]?["state"] == .string("dismissed"))
            #expect(page[2]["deviceID"] == nil && page[2]["data"]?["allDevices"] == .bool(true))
            #expect(page.allSatisfy { $0["bundleID"] == .string(harnessApp) && $0["id"]?.stringValue?.hasPrefix("evt_") == true })

            // Read on from `next`: nothing new, and the same place to read on from.
            #expect(try await events(relay, "key=order-1&after=\(next)") == ([], next))
            // The backend ends another key: heard as its end, by the backend.
            _ = try await relay.post("/v1/activities/order-2/start", startBody(key: "order-2"))
            try await relay.dispatch()
            try await relay.waitForToken("order-2", device: "iphone-1")
            _ = try await relay.post("/v1/activities/order-2/end", .object([("contentState", content("delivered", 0))]))
            let ends = try await events(relay, "after=\(next)&type=activity.ended")
            #expect(ends.events.map { $0["data"]?["cause"] } == [.string("backend")], "\(ends.events)")
        }
    }

    /// `auto` falls to priority 5 once a device's budget is spent: the backend hears it once an
    /// hour per key, not once per update.
    @Test func aKeyOverItsPriority10BudgetIsHeardOnceAnHour() async throws {
        try await withRelayHarness(configure: { configuration, _ in
            configuration.budget = BudgetPolicy(priority10PerHour: 1, frequentPriority10PerHour: 1)
        }) { relay in
            try await relay.startActivity("order-1", on: ["iphone-1"])
            func update(_ eta: Int) async throws -> String? {
                let answer = try await relay.post("/v1/activities/order-1/update", .object([("contentState", content("on the way", eta))]))
                #expect(answer.status == 200, "\(answer.json)")
                try await relay.dispatch()
                return try await relay.store.deliveries(DeliveryQuery(key: "order-1", limit: 1)).first?.priorityReason
            }
            #expect(try await update(20)?.hasPrefix("within budget") == true)
            for eta in [15, 10] { #expect(try await update(eta)?.hasPrefix("over budget") == true) }
            var heard = try await events(relay, "type=budget.exhausted").events
            #expect(heard.count == 1, "\(heard)")
            #expect(heard.first?["key"] == .string("order-1"))
            #expect(heard.first?["data"] == json(#"{"targetsOverBudget": 1, "targets": 1, "priority10PerHour": 1}"#))
            // An hour on, the budget is whole again; spent again, it is heard again.
            try await relay.advance(by: 3601)
            #expect(try await update(5)?.hasPrefix("within budget") == true)
            #expect(try await update(4)?.hasPrefix("over budget") == true)
            heard = try await events(relay, "type=budget.exhausted").events
            #expect(heard.count == 2)
        }
    }

    @Test func aDeadTokenAndAFailedPushAreEvents() async throws {
        try await withRelayHarness { relay in
            _ = try await relay.failedUpdate("order-1", answered: .unregistered)
            let (page, _) = try await events(relay, "type=token.invalidated,push.failed")
            #expect(page.map { $0["type"]?.stringValue ?? "" } == ["token.invalidated"], "\(page)")
            #expect(page.first?["data"]?["reason"] == .string("Unregistered") && page.first?["deviceID"] == .string("iphone-1"))

            // Bad input is refused naming the parameter; an app's client key may not read the log.
            let wrongType = try await relay.get("/v1/events?type=activity.started,nope")
            #expect(wrongType.status == 400 && wrongType.json["error"]?["field"] == .string("type"), "\(wrongType.json)")
            let wrongPlace = try await relay.get("/v1/events?after=-1")
            #expect(wrongPlace.status == 400 && wrongPlace.json["error"]?["field"] == .string("after"))
            // A key no key can hold (PostgreSQL's text holds no NUL): refused, here as for deliveries.
            for route in ["events", "deliveries"] {
                let nul = try await relay.get("/v1/\(route)?key=a%00b")
                #expect(nul.status == 400 && nul.json["error"]?["field"] == .string("key"), "\(route): \(nul.json)")
            }
            #expect(try await relay.get("/v1/events", scope: .client).status == 403)
            #expect(try await relay.get("/v1/events", scope: .admin).status == 200)
        }
    }

    /// The silent start: an iOS update killed the iPhone's push-to-start token, APNs still
    /// answers 200, nothing appears. After the window the backend hears the start was not
    /// confirmed; switching Live Activities off and on gives a token that works again.
    @Test func aStartTheIPhoneDroppedSilentlyIsUnconfirmedAfterTheWindow() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            try relay.emulator.devices.perform(.updateOS(), on: "iphone-1")
            #expect(try await relay.post("/v1/activities/order-1/start", startBody(key: "order-1")).status == 201)
            try await relay.dispatch()
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "order-1")).map(\.status) == [.sent], "APNs answered 200")
            #expect(try relay.activity(on: "iphone-1") == nil)
            #expect(try relay.emulator.devices.device("iphone-1").log.last?.message.contains("predates the iOS update") == true)

            try await relay.advance(by: 60)
            #expect(try await events(relay, "type=activity.start_unconfirmed").events.isEmpty, "within the window")
            try await relay.advance(by: 61)
            let (unconfirmed, _) = try await events(relay, "type=activity.start_unconfirmed")
            #expect(unconfirmed.map { $0["deviceID"] } == [.string("iphone-1")], "\(unconfirmed)")
            #expect(unconfirmed.first?["key"] == .string("order-1") && unconfirmed.first?["data"]?["waitedSeconds"] == .integer(120))
            try await relay.advance(by: 120)
            #expect(try await events(relay, "type=activity.start_unconfirmed").events.count == 1, "once per key and device")
            // The dashboard flags the key, and lists what the backend heard.
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let page = try await browser.get("/dashboard/activity?app=\(harnessApp)&key=order-1").text
            #expect(page.contains("Start not confirmed on iphone-1") && page.contains("<code>activity.start_unconfirmed</code>"))

            // Live Activities off and on: a new push-to-start token, and a start that shows.
            let killed = try await relay.store.pushToStartTokens(deviceID: "iphone-1").map(\.token)
            for enabled in [false, true] {
                try relay.emulator.devices.perform(.setLiveActivities(bundleID: harnessApp, enabled: enabled), on: "iphone-1")
            }
            try await relay.eventually {
                let tokens = try await relay.store.pushToStartTokens(deviceID: "iphone-1").map(\.token)
                return tokens.count == 1 && tokens != killed
            }
            #expect(try await relay.post("/v1/activities/order-2/start", startBody(key: "order-2")).status == 201)
            try await relay.dispatch()
            try await relay.waitForToken("order-2", device: "iphone-1")
        }
    }
}
