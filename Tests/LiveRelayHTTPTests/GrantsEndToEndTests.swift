import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import SimulatedDevices
import Testing

/// Who may report under a key: the client key every app ships is public, so a device's update
/// token is taken only from a device the key's start went to, or with the backend's grant.
struct GrantsEndToEndTests {
    /// A token report of `device` under `key`, with the client key.
    func report(
        _ relay: RelayHarness, key: String, device: String, environment: PushEnvironment = .production, grant: String? = nil,
        token seed: UInt8 = 0xCD
    ) async throws -> RelayHarness.Answer {
        var body: JSONValue.Members = [
            ("deviceID", .string(device)), ("attributesType", .string("DeliveryAttributes")),
            ("token", .string(String(repeating: String(format: "%02x", seed), count: 32))), ("environment", .string(environment.rawValue)),
        ]
        if let grant { body.append(("grant", .string(grant))) }
        return try await relay.post("/v1/activities/\(key)/tokens", .object(body), scope: .client)
    }

    @Test func anotherInstallWithTheSameClientKeyCannotReceiveSomeoneElsesActivity() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1", environment: .production)
            _ = try await relay.post("/v1/activities/order-42/start", startBody(key: "order-42"))
            try await relay.dispatch()
            try await relay.waitForToken("order-42", device: "iphone-1")

            // The attacker's install: the same app, the same client key, a guessed key.
            let stolen = try await report(relay, key: "order-42", device: "attacker")
            #expect(stolen.status == 403, "\(stolen.json)")
            #expect(stolen.json["error"]?["code"] == .string("grant_required") && stolen.json["error"]?["field"] == .string("grant"))
            let listening = try await relay.post(
                "/v1/activities/order-42/listening",
                .object([("deviceID", .string("attacker")), ("environment", .string("production"))]), scope: .client)
            #expect(listening.status == 403, "\(listening.json)")
            _ = try await relay.post("/v1/activities/order-42/update", .object([("contentState", content("on the way", 10))]))
            try await relay.dispatch()
            let pushes = try await relay.store.deliveries(DeliveryQuery(key: "order-42"))
            #expect(pushes.allSatisfy { $0.target.deviceID == "iphone-1" }, "\(pushes.map(\.target))")
            #expect(try await relay.store.activityTokens(app: harnessApp, key: "order-42").map(\.deviceID) == ["iphone-1"])
            // The device the start went to rotates its token without a grant.
            #expect(try await report(relay, key: "order-42", device: "iphone-1", token: 0xEE).status == 201)
        }
    }

    @Test func anActivityTheAppRequestedItselfIsTakenWithTheBackendsGrantForItsKey() async throws {
        try await withRelayHarness { relay in
            #expect(try await report(relay, key: "own-1", device: "iphone-1").status == 403)
            let issued = try await relay.post("/v1/grants", .object([("key", .string("own-1")), ("expiresIn", .integer(600))]))
            #expect(issued.status == 201, "\(issued.json)")
            let grant = try #require(issued.json["grant"]?.stringValue)
            #expect(try await report(relay, key: "own-1", device: "iphone-1", grant: grant).status == 201)
            #expect(try await relay.store.activityTokens(app: harnessApp, key: "own-1").map(\.deviceID) == ["iphone-1"])

            // Another key's grant, a grant tampered with, an expired one: refused, naming why.
            let other = try await report(relay, key: "own-2", device: "iphone-2", grant: grant)
            #expect(other.json["error"]?["code"] == .string("grant_refused"), "\(other.json)")
            #expect(other.json["error"]?["message"]?.stringValue?.contains("another key") == true)
            var forged = Array(grant)
            forged[forged.count - 3] = forged[forged.count - 3] == "A" ? "B" : "A"
            let tampered = try await report(relay, key: "own-1", device: "iphone-3", grant: String(forged))
            #expect(tampered.status == 403 && tampered.json["error"]?["code"] == .string("grant_refused"), "\(tampered.json)")
            try await relay.advance(by: 601)
            let expired = try await report(relay, key: "own-1", device: "iphone-4", grant: grant)
            #expect(expired.json["error"]?["message"]?.stringValue?.contains("expired") == true, "\(expired.json)")
            // The client key cannot ask for a grant.
            #expect(try await relay.post("/v1/grants", .object([("key", .string("own-1"))]), scope: .client).status == 403)
        }
    }

    @Test func sandboxReportsNeedNoGrantUntilTheOperatorSaysOtherwise() async throws {
        try await withRelayHarness { relay in
            #expect(try await report(relay, key: "dev-1", device: "simulator", environment: .sandbox).status == 201)
            let strict = try BundleID("com.example.liverelay.strict")
            let key = TestSigningKey()
            let clientKey = try await relay.addApp(strict, key: key)
            var registration = key.app(strict)
            registration.ungrantedReports = []
            _ = try await relay.relay.registerApp(registration)
            let shown = try await relay.get("/v1/apps/\(strict.value)", scope: .admin)
            #expect(shown.json["ungrantedReports"] == .array([]), "\(shown.json)")
            let refused = try await relay.call(
                .POST, "/v1/activities/dev-2/tokens",
                .object([
                    ("deviceID", .string("simulator")), ("attributesType", .string("DeliveryAttributes")),
                    ("token", .string(String(repeating: "ab", count: 32))), ("environment", .string("sandbox")),
                ]), secret: clientKey)
            #expect(refused.status == 403 && refused.json["error"]?["code"] == .string("grant_required"), "\(refused.json)")
        }
    }
}
