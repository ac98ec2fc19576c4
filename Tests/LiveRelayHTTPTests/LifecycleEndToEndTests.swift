import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Testing

/// The seeds' whole flow through the real server, the real APNs client and the emulator with its
/// simulated iPhones, on loopback.
@Suite(.timeLimit(.minutes(2)))
struct LifecycleEndToEndTests {
    @Test func pushToStartUpdatesWithAlertStaleDateAndRelevanceThenEndWithADismissalDate() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            try await relay.addRegisteredDevice("iphone-2")

            // Push-to-start to everyone with a token for the type; each app reports its update token.
            let started = try await relay.post("/v1/activities/order-42/start", startBody(key: "order-42"))
            #expect(started.status == 201)
            #expect(started.json["deliveries"] == .integer(2))
            try await relay.dispatch()
            for device in ["iphone-1", "iphone-2"] {
                let activity = try #require(try relay.activity(on: device))
                #expect(activity.state == .active)
                #expect(activity.content.state == content("preparing", 30))
                #expect(activity.attributes["activityKey"] == .string("order-42"))
                try await relay.waitForToken("order-42", device: device)
            }

            // An alerting update with a stale date and a relevance score reaches both devices.
            relay.emulator.clock.advance(by: 60)
            let staleDate = relay.emulator.clock.now + 15 * 60
            let update = try await relay.post(
                "/v1/activities/order-42/update",
                .object([
                    ("contentState", content("on the way", 10)),
                    ("alert", json(#"{"title": "On the way", "body": "Your driver is 10 minutes away"}"#)),
                    ("staleDate", .integer(unixSeconds(staleDate))), ("relevanceScore", .integer(75)),
                ]))
            #expect(update.status == 200)
            #expect(update.json["deliveries"] == .integer(2))
            try await relay.dispatch()
            let presentation = try relay.emulator.devices.presentation(of: "iphone-1")
            guard case .expanded(let shown, let alert) = presentation.dynamicIsland else {
                Issue.record("the alerting update should expand the island, got \(String(describing: presentation.dynamicIsland))")
                return
            }
            #expect(alert.title == "On the way")
            #expect(shown.content == content("on the way", 10))
            #expect(shown.relevanceScore == 75)
            let updated = try #require(try relay.activity(on: "iphone-2"))
            #expect(updated.content.staleDate.map(unixSeconds) == unixSeconds(staleDate))

            // Past the stale date the device shows it stale; the next update makes it current again.
            try await relay.advance(by: 16 * 60)
            #expect(try relay.activity(on: "iphone-1")?.state == .stale)
            _ = try await relay.post("/v1/activities/order-42/update", .object([("contentState", content("around the corner", 2))]))
            try await relay.dispatch()
            #expect(try relay.activity(on: "iphone-1")?.state == .active)

            // The end with a dismissal date keeps it on the Lock Screen until then.
            relay.emulator.clock.advance(by: 60)
            let dismissal = relay.emulator.clock.now + 30 * 60
            let end = try await relay.post(
                "/v1/activities/order-42/end",
                .object([
                    ("contentState", content("delivered", 0)), ("dismissalDate", .integer(unixSeconds(dismissal))),
                ]))
            #expect(end.status == 200)
            #expect(end.json["state"] == .string("ended"))
            try await relay.dispatch()
            let ended = try #require(try relay.activity(on: "iphone-1"))
            #expect(ended.state == .ended)
            #expect(ended.content.state == content("delivered", 0))
            #expect(try relay.emulator.devices.presentation(of: "iphone-1").lockScreen.map(\.activityID) == [ended.id])

            try await relay.advance(by: 31 * 60)
            #expect(try relay.emulator.devices.presentation(of: "iphone-1").lockScreen.isEmpty)
            try await relay.eventually {
                try await relay.store.activityTokens(app: harnessApp, key: "order-42").allSatisfy { $0.state == .dismissed }
            }

            // The key is over: a late update is refused and nothing is queued.
            let late = try await relay.post("/v1/activities/order-42/update", .object([("contentState", content("late", 0))]))
            #expect(late.status == 409)
            #expect(late.json["error"]?["code"] == .string("activity_ended"))

            let key = try await relay.get("/v1/activities/order-42")
            #expect(key.json["state"] == .string("ended"))
            #expect(key.json["tokens"]?[0]?["lastDelivery"]?["status"] == .integer(200))
            let deliveries = try await relay.get("/v1/deliveries?key=order-42")
            #expect(deliveries.json["deliveries"]?.arrayElements?.count == 8)
            #expect(deliveries.json["deliveries"]?.arrayElements?.map { $0["status"]?.stringValue ?? "" } == Array(repeating: "sent", count: 8))
        }
    }

    /// An end with an alert has one priority for every push, so the store writes it to each live
    /// token itself: it must still reach the devices whose tokens the end ends.
    @Test func anEndWithAnAlertReachesEveryDevice() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            try await relay.addRegisteredDevice("iphone-2")
            #expect(try await relay.post("/v1/activities/order-42/start", startBody(key: "order-42")).status == 201)
            try await relay.dispatch()
            for device in ["iphone-1", "iphone-2"] { try await relay.waitForToken("order-42", device: device) }

            let end = try await relay.post(
                "/v1/activities/order-42/end",
                .object([
                    ("contentState", content("delivered", 0)), ("alert", json(#"{"title": "Delivered", "body": "Enjoy"}"#)),
                ]))
            #expect(end.status == 200 && end.json["deliveries"] == .integer(2))
            try await relay.dispatch()
            for device in ["iphone-1", "iphone-2"] {
                let ended = try #require(try relay.activity(on: device))
                #expect(ended.state == .ended && ended.content.state == content("delivered", 0), "on \(device)")
            }
        }
    }

    @Test func everyPushOfARequestCarriesItsTimestampAndTheNextOneIsNewer() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("k", on: ["iphone-1"])
            // Two updates in the same second: the second must still be newer on the device.
            let first = try await relay.post("/v1/activities/k/update", .object([("contentState", content("a", 1))]))
            let second = try await relay.post("/v1/activities/k/update", .object([("contentState", content("b", 2))]))
            let firstStamp = try #require(first.json["timestamp"]?.doubleValue)
            let secondStamp = try #require(second.json["timestamp"]?.doubleValue)
            #expect(secondStamp > firstStamp)
            try await relay.dispatch()
            #expect(try relay.activity(on: "iphone-1")?.content.state == content("b", 2))
            // The first was still queued when the second came: it was dropped, not sent.
            let statuses = try await relay.store.deliveries(DeliveryQuery(key: "k")).filter { $0.event == .update }.map(\.status)
            #expect(statuses == [.sent, .superseded])
        }
    }
}
