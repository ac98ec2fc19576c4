import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import SimulatedDevices
import Testing

/// One server, two apps (each with its own team's key) in both environments: keys, tokens and
/// pushes of one app never reach the other, and each push reaches only its own environment.
@Suite struct AppsEndToEndTests {
    static let scores = try! BundleID("com.example.scores")

    @Test func twoAppsInTwoEnvironmentsEachReachOnlyTheirOwnDevices() async throws {
        try await withRelayHarness { relay in
            let scoresClient = try await relay.addApp(Self.scores, key: TestSigningKey(keyID: "SCOREKEY01", teamID: "SCORETEAM1"))
            // Every pair of app and environment, on devices of its own; one phone has both apps.
            try await relay.addRegisteredDevice("dev-phone", environment: .sandbox)
            try await relay.addRegisteredDevice("store-phone", environment: .production)
            try relay.addDevice("dev-phone", types: [deliveryType], environment: .sandbox, app: Self.scores, clientKey: scoresClient)
            try relay.addDevice("fan-phone", types: [deliveryType], environment: .production, app: Self.scores, clientKey: scoresClient)
            try await relay.eventually {
                let devPhone = try await relay.store.pushToStartTokens(deviceID: "dev-phone").count
                let fanPhone = try await relay.store.pushToStartTokens(deviceID: "fan-phone").count
                return devPhone == 2 && fanPhone == 1
            }

            // The same key in both apps: two activities, each on its app's devices, started by a
            // backend that serves both.
            let everyApp = try await relay.relay.createAPIKey(name: "backend of every app", scope: .server).secret
            for app in [harnessApp, Self.scores.value] {
                let started = try await relay.call(
                    .POST, "/v1/activities/order-42/start?app=\(app)", startBody(key: "order-42"), scope: nil, secret: everyApp)
                #expect(started.status == 201, "\(started.text)")
                #expect(started.json["deliveries"] == .integer(2), "\(app)")
            }
            try await relay.dispatch()
            for (device, app) in [
                ("dev-phone", harnessApp), ("store-phone", harnessApp), ("dev-phone", Self.scores.value), ("fan-phone", Self.scores.value),
            ] {
                try await relay.waitForToken("order-42", device: device, app: app)
            }
            let update = try await relay.call(
                .POST, "/v1/activities/order-42/update?app=\(Self.scores.value)", .object([("contentState", content("2-1", 80))]), scope: nil,
                secret: everyApp)
            #expect(update.json["deliveries"] == .integer(2))
            try await relay.dispatch()
            let onDev = try relay.emulator.devices.device("dev-phone").activities.map { ($0.bundleID, $0.content.state) }
            #expect(onDev.first { $0.0 == Self.scores.value }?.1 == content("2-1", 80))
            #expect(onDev.first { $0.0 == harnessApp }?.1 == content("preparing", 30), "the other app's activity is untouched")
            #expect(try relay.activity(on: "fan-phone")?.content.state == content("2-1", 80))

            // Each push went to its own environment, with its own app's topic.
            let pushes = relay.emulator.journal.requests.filter { $0.path.hasPrefix("/3/device/") }
            #expect(pushes.allSatisfy { $0.status == 200 }, "\(pushes.map(\.outcome))")
            let pairs = Set(
                pushes.map {
                    "\($0.header("apns-topic")?.split(separator: ".").dropLast(2).joined(separator: ".") ?? "?") \($0.environment.rawValue)"
                })
            #expect(
                pairs == [
                    "\(harnessApp) sandbox", "\(harnessApp) production", "\(Self.scores.value) sandbox", "\(Self.scores.value) production",
                ])
            let listed = try await relay.call(.GET, "/v1/deliveries?app=\(Self.scores.value)", scope: nil, secret: everyApp)
            #expect(listed.json["deliveries"]?.arrayElements?.allSatisfy { $0["bundleID"] == .string(Self.scores.value) } == true)
        }
    }

    /// Adding an app breaks nothing that worked: the first start's server key is the first app's.
    /// A key for every app names the app of a new key, and need not for a key one app holds.
    @Test func aKeyActsOnlyForItsAppAndAnAllAppsKeyNamesOneWhereTheKeyDoesNotTell() async throws {
        try await withRelayHarness { relay in
            #expect(try await relay.post("/v1/activities/first/start", startBody(key: "first")).status == 201)
            let scoresClient = try await relay.addApp(Self.scores, key: TestSigningKey(keyID: "SCOREKEY01", teamID: "SCORETEAM1"))
            // The first start's server key goes on as before.
            #expect(try await relay.post("/v1/activities/first/update", .object([("contentState", content("on the way", 10))])).status == 200)
            #expect(try await relay.post("/v1/activities/second/start", startBody(key: "second")).status == 201)

            let everyApp = try await relay.relay.createAPIKey(name: "backend of every app", scope: .server).secret
            let unnamed = try await relay.call(.POST, "/v1/activities/k/start", startBody(key: "k"), scope: nil, secret: everyApp)
            #expect(unnamed.status == 400)
            #expect(unnamed.json["error"]?["field"] == .string("app"))
            let held = try await relay.call(
                .POST, "/v1/activities/first/update", .object([("contentState", content("close", 2))]), scope: nil, secret: everyApp)
            #expect(held.status == 200, "a key one app holds names its app: \(held.text)")
            #expect(try await relay.call(.GET, "/v1/activities/first", scope: nil, secret: everyApp).status == 200)
            let unknown = try await relay.call(
                .POST, "/v1/activities/k/start?app=com.example.nope", startBody(key: "k"), scope: nil, secret: everyApp)
            #expect(unknown.status == 404 && unknown.json["error"]?["field"] == .string("app"))
            let empty = try await relay.get("/v1/deliveries?app=")
            #expect(empty.status == 400 && empty.json["error"]?["field"] == .string("app"))

            // A client key's bodies may leave its app out.
            let ownToken = try await relay.call(
                .POST, "/v1/push-to-start-tokens",
                .object([("deviceID", .string("d")), ("attributesType", .string("T")), ("token", .string(String(repeating: "cd", count: 32)))]),
                scope: nil, secret: scoresClient)
            #expect(ownToken.status == 201)
            #expect(try await relay.store.pushToStartTokens(deviceID: "d").map(\.bundleID) == [Self.scores.value])
            // null says the same, as the document allows.
            let nullApp = try await relay.call(
                .POST, "/v1/push-to-start-tokens",
                .object([
                    ("deviceID", .string("e")), ("bundleID", .null), ("attributesType", .string("T")),
                    ("token", .string(String(repeating: "ce", count: 32))),
                ]),
                scope: nil, secret: scoresClient)
            #expect(nullApp.status == 201)
            #expect(try await relay.store.pushToStartTokens(deviceID: "e").map(\.bundleID) == [Self.scores.value])

            // A server key for one app acts for it without naming it, and for no other.
            let made = try await relay.post(
                "/v1/api-keys",
                .object([("name", .string("scores backend")), ("scope", .string("server")), ("bundleID", .string(Self.scores.value))]),
                scope: .admin)
            #expect(made.status == 201 && made.json["bundleID"] == .string(Self.scores.value))
            let scoresServer = try #require(made.json["secret"]?.stringValue)
            let own = try await relay.call(.POST, "/v1/activities/k/start", startBody(key: "k"), scope: nil, secret: scoresServer)
            #expect(own.status == 201, "\(own.text)")
            let other = try await relay.call(.POST, "/v1/activities/k/start?app=\(harnessApp)", startBody(key: "k"), scope: nil, secret: scoresServer)
            #expect(other.status == 403 && other.json["error"]?["code"] == .string("other_app"))
            let foreign = try await relay.call(.GET, "/v1/activities/k?app=\(harnessApp)", scope: nil, secret: scoresServer)
            #expect(foreign.status == 403)

            // A client key registers tokens for its app only.
            let token = String(repeating: "ab", count: 32)
            let wrongApp = try await relay.call(
                .POST, "/v1/push-to-start-tokens",
                .object([("deviceID", .string("d")), ("bundleID", .string(harnessApp)), ("attributesType", .string("T")), ("token", .string(token))]),
                scope: nil, secret: scoresClient)
            #expect(wrongApp.status == 403 && wrongApp.json["error"]?["field"] == .string("bundleID"))
            // A client key is for one app; an admin key for every app.
            let clientForAll = try await relay.post("/v1/api-keys", json(#"{"name": "app", "scope": "client"}"#), scope: .admin)
            #expect(clientForAll.status == 400 && clientForAll.json["error"]?["field"] == .string("bundleID"))
            let apps = try await relay.get("/v1/apps", scope: .admin)
            #expect(apps.json["apps"]?.arrayElements?.compactMap { $0["bundleID"]?.stringValue } == [Self.scores.value, harnessApp].sorted())
            #expect(apps.text.contains("PRIVATE KEY") == false, "a signing key is never shown")
        }
    }

    @Test func anAppIsRegisteredThroughTheAdminAPIAndABadKeyIsRefusedNamingTheField() async throws {
        try await withRelayHarness { relay in
            let key = TestSigningKey(keyID: "NEWKEY0001", teamID: "NEWTEAM001")
            let body = JSONValue.object([
                ("teamID", .string("NEWTEAM001")), ("keyID", .string("NEWKEY0001")), ("signingKey", .string(key.pem)),
            ])
            let put = try await relay.call(.PUT, "/v1/apps/com.example.new", body, scope: .admin)
            #expect(put.status == 201 && put.json["keyID"] == .string("NEWKEY0001"))
            // The harness's server sends to its emulator, whose devices it draws, and says so.
            #expect(put.json["warnings"]?[0]?.stringValue?.contains("built-in emulator") == true)
            #expect(try await relay.call(.PUT, "/v1/apps/com.example.new", body, scope: .admin).status == 200, "re-keyed")
            #expect(try await relay.get("/v1/apps/com.example.new", scope: .admin).json["teamID"] == .string("NEWTEAM001"))
            let bad = try await relay.call(.PUT, "/v1/apps/com.example.bad", body.setting("signingKey", .string("not a key")), scope: .admin)
            #expect(bad.status == 400 && bad.json["error"]?["field"] == .string("signingKey"))
            let badID = try await relay.call(.PUT, "/v1/apps/com.example.bad", body.setting("keyID", .string("short")), scope: .admin)
            #expect(badID.status == 400 && badID.json["error"]?["field"] == .string("keyID"))
            let badBundle = try await relay.call(.PUT, "/v1/apps/not%20a%20bundle", body, scope: .admin)
            #expect(badBundle.status == 400 && badBundle.json["error"]?["field"] == .string("bundleID"))
            #expect(try await relay.call(.PUT, "/v1/apps/com.example.new", body, scope: .server).status == 403)
        }
    }
}
