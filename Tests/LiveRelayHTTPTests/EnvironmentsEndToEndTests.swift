import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Testing

/// One server, both APNs environments: a development build's iPhone (sandbox tokens) and an App
/// Store build's (production tokens), each push reaching its own environment and only it.
@Suite struct EnvironmentsEndToEndTests {
    @Test func eachPushGoesToItsTokensEnvironmentAndReachesItsDevice() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("dev-phone", environment: .sandbox)
            try await relay.addRegisteredDevice("store-phone", environment: .production)
            let tokens = try await relay.store.pushToStartTokens(deviceID: "store-phone")
            #expect(tokens.map(\.environment) == [.production])

            let started = try await relay.post("/v1/activities/order-42/start", startBody(key: "order-42"))
            #expect(started.json["deliveries"] == .integer(2))
            try await relay.dispatch()
            for device in ["dev-phone", "store-phone"] { try await relay.waitForToken("order-42", device: device) }
            let described = try await relay.get("/v1/activities/order-42")
            #expect(described.json["tokens"]?.arrayElements?.map { $0["environment"] } == [.string("sandbox"), .string("production")])

            let updated = try await relay.post("/v1/activities/order-42/update", .object([("contentState", content("on the way", 10))]))
            #expect(updated.json["deliveries"] == .integer(2))
            try await relay.dispatch()
            for device in ["dev-phone", "store-phone"] {
                #expect(try relay.activity(on: device)?.content.state == content("on the way", 10), "\(device)")
            }
            // Every push was accepted, each by the listener of its token's environment.
            let pushes = relay.emulator.journal.requests.filter { $0.path.hasPrefix("/3/device/") }
            #expect(pushes.count == 4)
            #expect(pushes.allSatisfy { $0.status == 200 })
            let listed = try await relay.get("/v1/deliveries?key=order-42")
            for delivery in listed.json["deliveries"]?.arrayElements ?? [] {
                let device = try #require(delivery["deviceID"]?.stringValue)
                #expect(delivery["environment"] == .string(device == "store-phone" ? "production" : "sandbox"))
            }
            let byEnvironment = Dictionary(grouping: pushes, by: \.environment).mapValues(\.count)
            #expect(byEnvironment == [.sandbox: 2, .production: 2])
        }
    }

    @Test func aChannelBoundStartSpanningBothEnvironmentsGetsAChannelInEachAndAnUpdateBroadcastsOnBoth() async throws {
        try await withRelayHarness { relay in
            relay.emulator.registry.setBroadcastEnabled(for: nil)
            try await relay.addRegisteredDevice("dev-phone", environment: .sandbox)
            try await relay.addRegisteredDevice("store-phone", environment: .production)
            let started = try await relay.post(
                "/v1/activities/match-7/start", startBody(key: "match-7", extra: [("channel", json(#"{"storagePolicy": 1}"#))]))
            #expect(started.status == 201)
            #expect(started.json["channelID"] == nil, "two channels: no single one")
            let sandbox = try #require(started.json["channels"]?["sandbox"]?.stringValue)
            let production = try #require(started.json["channels"]?["production"]?.stringValue)
            #expect(relay.emulator.registry.channel(sandbox)?.environment == .sandbox)
            #expect(relay.emulator.registry.channel(production)?.environment == .production)
            try await relay.dispatch()

            let update = try await relay.post("/v1/activities/match-7/update", .object([("contentState", content("1-0", 60))]))
            #expect(update.json["deliveries"] == .integer(2))
            try await relay.dispatch()
            for device in ["dev-phone", "store-phone"] {
                #expect(try relay.activity(on: device)?.content.state == content("1-0", 60), "\(device)")
            }
            let broadcasts = relay.emulator.journal.requests.filter { $0.path.hasPrefix("/4/broadcasts/") }
            #expect(broadcasts.map(\.environment).sorted { $0.rawValue < $1.rawValue } == [.production, .sandbox])
            #expect(broadcasts.allSatisfy { $0.status == 200 })
            let channels = try await relay.get("/v1/channels", scope: .admin)
            #expect(Set(channels.json["channels"]?.arrayElements?.compactMap { $0["environment"]?.stringValue } ?? []) == ["sandbox", "production"])

            _ = try await relay.post("/v1/activities/match-7/end", .object([("contentState", content("2-1", 0))]))
            try await relay.dispatch()
            try await relay.advance(by: 8 * 3600 + 1)
            for id in [sandbox, production] { #expect(try await relay.store.channel(id: id)?.deletedAt != nil) }
            #expect(relay.emulator.registry.channel(sandbox) == nil)
            #expect(relay.emulator.registry.channel(production) == nil)
        }
    }

    @Test func aTokenOfAnEnvironmentTheServerDoesNotSendToIsRefusedNamingTheField() async throws {
        try await withRelayHarness(environments: [.sandbox]) { relay in
            let refused = try await relay.post(
                "/v1/push-to-start-tokens",
                .object([
                    ("deviceID", .string("store-phone")), ("bundleID", .string(RelayHarness.bundleID.value)),
                    ("attributesType", .string("DeliveryAttributes")), ("token", .string(String(repeating: "ab", count: 32))),
                    ("environment", .string("production")),
                ]),
                scope: .client)
            #expect(refused.status == 400)
            #expect(refused.json["error"]?["field"] == .string("environment"))
            #expect(refused.json["error"]?["message"]?.stringValue?.contains("sandbox only") == true)
        }
    }
}
