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

    /// Any install could claim a user id and be started with that user's activities: in
    /// production a push-to-start token is kept with a user only with the backend's grant for them.
    @Test func aPushToStartTokenNamesAUserOnlyWithTheBackendsGrantForThem() async throws {
        try await withRelayHarness { relay in
            func register(_ device: String, user: String, grant: String?) async throws -> RelayHarness.Answer {
                var body: JSONValue.Members = [
                    ("deviceID", .string(device)), ("attributesType", .string("DeliveryAttributes")),
                    ("token", .string(String(repeating: "ef", count: 32))), ("environment", .string("production")), ("userID", .string(user)),
                ]
                if let grant { body.append(("grant", .string(grant))) }
                return try await relay.post("/v1/push-to-start-tokens", .object(body), scope: .client)
            }
            let claimed = try await register("attacker", user: "alice", grant: nil)
            #expect(claimed.status == 403 && claimed.json["error"]?["code"] == .string("grant_required"), "\(claimed.json)")
            let keyGrant = try #require(
                try await relay.post("/v1/grants", .object([("key", .string("order-42"))])).json["grant"]?.stringValue)
            let wrongKind = try await register("attacker", user: "alice", grant: keyGrant)
            #expect(wrongKind.json["error"]?["code"] == .string("grant_refused"), "\(wrongKind.json)")
            let issued = try await relay.post("/v1/grants", .object([("user", .string("alice"))]))
            #expect(issued.status == 201 && issued.json["user"] == .string("alice"), "\(issued.json)")
            let userGrant = try #require(issued.json["grant"]?.stringValue)
            #expect(try await register("alices-iphone", user: "alice", grant: userGrant).status == 201)
            #expect(try await relay.store.pushToStartTokens(deviceID: "alices-iphone").map(\.userID) == ["alice"])
            #expect(try await relay.store.pushToStartTokens(deviceID: "attacker").isEmpty)
            // A user's grant lets no device report under a key.
            #expect(try await report(relay, key: "own-9", device: "alices-iphone", grant: userGrant).status == 403)
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

/// What one device, or one app's client key, may make: a flood is held back without holding back
/// the app's other devices or the backend.
struct DeviceLimitsTests {
    func register(_ relay: RelayHarness, device: String, type: String = "DeliveryAttributes") async throws -> RelayHarness.Answer {
        try await relay.post(
            "/v1/push-to-start-tokens",
            .object([
                ("deviceID", .string(device)), ("attributesType", .string(type)), ("token", .string(String(repeating: "ab", count: 32))),
            ]), scope: .client)
    }

    @Test func aDeviceFloodingTheRegistryIsHeldBackAndNothingElseIs() async throws {
        try await withRelayHarness { relay in
            let burst = Int(relay.relay.configuration.deviceReports.burst)
            for _ in 0..<burst { #expect(try await register(relay, device: "looping").status == 201) }
            let held = try await register(relay, device: "looping")
            #expect(held.status == 429 && held.json["error"]?["code"] == .string("device_rate_limited"), "\(held.json)")
            #expect(held.header("Retry-After") == "1")
            #expect(relay.relay.metrics.value(.reportsThrottledTotal, ["kind": "push_to_start"]) == 1)
            // Another device of the same app, and the backend, go on.
            #expect(try await register(relay, device: "another").status == 201)
            #expect(try await relay.post("/v1/activities/k/start", startBody(key: "k")).status == 201)
            // A second on, the device may report again.
            try await relay.advance(by: 1)
            #expect(try await register(relay, device: "looping").status == 201)
        }
    }

    @Test func anAppKeepsContractsOfABoundedNumberOfTypes() async throws {
        try await withRelayHarness(configure: { relay, _ in relay.deviceReports.contractsPerApp = 2 }) { relay in
            func contract(_ type: String) async throws -> RelayHarness.Answer {
                try await relay.call(
                    .PUT, "/v1/contracts/\(type)", .object([("attributes", .object([])), ("contentState", .object([("n", .string("Int"))]))]),
                    scope: .client)
            }
            #expect(try await contract("First").status == 200)
            #expect(try await contract("Second").status == 200)
            let third = try await contract("Third")
            #expect(third.status == 409 && third.json["error"]?["code"] == .string("too_many_contracts"), "\(third.json)")
            #expect(try await contract("Second").status == 200, "a kept type's contract is replaced")
        }
    }

    /// Versions made up with the public client key, which no device runs, cannot fill the room: an
    /// hour on, a real version takes the place of one no live token has.
    @Test func madeUpVersionsCannotKeepARealVersionsContractOut() async throws {
        try await withRelayHarness(configure: { relay, _ in relay.deviceReports.contractsPerApp = 2 }) { relay in
            func contract(_ version: String) async throws -> RelayHarness.Answer {
                try await relay.call(
                    .PUT, "/v1/contracts/DeliveryAttributes",
                    .object([
                        ("attributes", .object([])), ("contentState", .object([("n", .string("Int"))])), ("appVersion", .string(version)),
                        ("environment", .string("production")),
                    ]), scope: .client)
            }
            #expect(try await contract("9.0 (1)").status == 200)
            #expect(try await contract("9.0 (2)").status == 200)
            #expect(try await contract("2.0 (7)").status == 409, "the room is full, and both were registered just now")
            try await relay.advance(by: 3_601)
            #expect(try await contract("2.0 (7)").status == 200)
            #expect(try await relay.store.contracts().map(\.appVersion).contains("2.0 (7)"))
            #expect(try await relay.store.contracts().count == 2)
        }
    }
}
