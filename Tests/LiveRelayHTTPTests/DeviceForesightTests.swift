import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import SimulatedDevices
import Testing

/// What the server refuses or flags because of what iPhones were seen to do with pushes APNs
/// accepted (spec §14.2), and ActivityKit's own limit on an activity's data (`DeviceForesight`).
@Suite struct DeviceForesightTests {
    static func date(_ date: Date) -> JSONValue { .string(ISO8601DateFormatter().string(from: date)) }

    @Test func aStartWhoseStaleDateHasPassedIsRefusedNamingItAndNothingIsQueued() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            let now = relay.emulator.clock.now
            let refused = try await relay.post("/v1/activities/late/start", startBody(key: "late", extra: [("staleDate", Self.date(now - 60))]))
            #expect(refused.status == 422, "\(refused.json)")
            #expect(refused.json["error"]?["code"] == .string("stale_on_arrival") && refused.json["error"]?["field"] == .string("staleDate"))
            #expect(refused.json["error"]?["message"]?.stringValue?.contains("never show it on the Lock Screen") == true)
            // The moment it starts counts too: a stale date of now is already stale.
            let atOnce = try await relay.post("/v1/activities/late/start", startBody(key: "late", extra: [("staleDate", Self.date(now))]))
            #expect(atOnce.status == 422)
            // A scheduled start is checked against its own time, when it is scheduled.
            let scheduled = try await relay.post(
                "/v1/activities/late/start",
                startBody(key: "late", extra: [("staleDate", Self.date(now + 300)), ("at", Self.date(now + 600))]))
            #expect(scheduled.status == 422 && scheduled.json["error"]?["field"] == .string("staleDate"), "\(scheduled.json)")
            #expect(try await relay.store.deliveries(DeliveryQuery()).isEmpty)
            #expect(try await relay.get("/v1/activities/late").status == 404)
            // A stale date after the start is the usual case.
            let fine = try await relay.post("/v1/activities/late/start", startBody(key: "late", extra: [("staleDate", Self.date(now + 60))]))
            #expect(fine.status == 201, "\(fine.json)")
        }
    }

    @Test func anUpdateWithAPassedStaleDateOrAnAlertAtPriority5IsSentWithAWarning() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("k", on: ["iphone-1"])
            let now = relay.emulator.clock.now
            let stale = try await relay.post(
                "/v1/activities/k/update", .object([("contentState", content("late", 5)), ("staleDate", Self.date(now - 1))]))
            #expect(stale.status == 200 && stale.json["deliveries"] == .integer(1))
            #expect(stale.json["warnings"]?.arrayElements?.contains { $0.stringValue?.contains("has passed") == true } == true, "\(stale.json)")
            let alert = json(#"{"title": "Late", "body": "5 minutes more"}"#)
            let quiet = try await relay.post(
                "/v1/activities/k/update", .object([("contentState", content("late", 5)), ("alert", alert), ("priority", .integer(5))]))
            #expect(quiet.status == 200)
            #expect(
                quiet.json["warnings"]?.arrayElements?.contains { $0.stringValue?.contains("alerts the person although the priority is 5") == true }
                    == true, "\(quiet.json)")
            let loud = try await relay.post(
                "/v1/activities/k/update", .object([("contentState", content("late", 6)), ("alert", alert), ("priority", .integer(10))]))
            let loudWarnings = loud.json["warnings"]?.arrayElements ?? []
            #expect(loud.status == 200 && loudWarnings.isEmpty, "\(loud.json)")
            let plain = try await relay.post("/v1/activities/k/update", .object([("contentState", content("late", 7))]))
            let plainWarnings = plain.json["warnings"]?.arrayElements ?? []
            #expect(plainWarnings.isEmpty, "\(plain.json)")
        }
    }

    /// A broadcast may carry 5 KB, but the device takes 4 KB of content state: such an update is
    /// refused before it is queued, where APNs would have taken it and every iPhone dropped it.
    @Test func contentStateOverActivityKitsLimitIsRefusedEvenWhereABroadcastWouldCarryIt() async throws {
        try await withRelayHarness { relay in
            relay.emulator.registry.setBroadcastEnabled(for: nil)
            try await relay.addRegisteredDevice("iphone-1")
            let started = try await relay.post(
                "/v1/activities/match/start", startBody(key: "match", extra: [("channel", json(#"{"storagePolicy": 0}"#))]))
            #expect(started.status == 201)
            try await relay.dispatch()
            let before = try await relay.store.deliveries(DeliveryQuery(key: "match")).count
            let big = try await relay.post(
                "/v1/activities/match/update", .object([("contentState", content(String(repeating: "a", count: 4200), 1))]))
            #expect(big.status == 413, "\(big.json)")
            #expect(big.json["error"]?["code"] == .string("activity_data_too_large") && big.json["error"]?["field"] == .string("contentState"))
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "match")).count == before)
            // At a start, the attributes and the content state count together.
            let heavy = try await relay.post(
                "/v1/activities/heavy/start",
                startBody(key: "heavy")
                    .replacing("contentState", with: content(String(repeating: "b", count: 2100), 1))
                    .replacing(
                        "attributes",
                        with: .object([
                            ("activityKey", .string("heavy")), ("orderNumber", .integer(42)), ("note", .string(String(repeating: "9", count: 2100))),
                        ])))
            #expect(heavy.status == 413 && heavy.json["error"]?["field"] == .string("attributes"), "\(heavy.json)")
        }
    }
}

extension JSONValue {
    /// This object with its member `name` replaced.
    fileprivate func replacing(_ name: String, with value: JSONValue) -> JSONValue {
        guard case .object(let members) = self else { return self }
        return .object(members.map { $0.0 == name ? ($0.0, value) : $0 })
    }
}
