import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import SimulatedDevices
import Testing

/// A fleet runs several versions of an app at once, each with its own `ContentState`: every
/// version registers its own contract (LiveRelayKit sends the app's version), and each push is
/// checked against the contract of the version on each of its devices.
struct AppVersionsEndToEndTests {
    /// Version 2 made the ETA optional: an update without one decodes on version 2 only.
    static let second = ActivityAttributesType(
        name: "DeliveryAttributes", attributes: deliveryType.contract!.attributes,
        contentState: SwiftStruct("ContentState", [.init("status", .string), .init("etaMinutes", .optional(.int))]))
    static let withoutETA = JSONValue.object([("status", .string("late"))])

    /// Two production phones, on versions 1 and 2, each running LiveRelayKit, with `order-7`
    /// started on both.
    func fleet(_ relay: RelayHarness) async throws {
        try relay.addDevice("iphone-v1", types: [deliveryType], environment: .production, appVersion: "1.0 (1)")
        try relay.addDevice("iphone-v2", types: [Self.second], environment: .production, appVersion: "2.0 (7)")
        try await relay.eventually {
            let versions = try await relay.store.contracts().filter { $0.attributesType == "DeliveryAttributes" }.map(\.appVersion)
            return Set(versions) == ["1.0 (1)", "2.0 (7)"]
        }
        // Each phone's token, not only the last one's: they report on their own.
        for device in ["iphone-v1", "iphone-v2"] {
            try await relay.eventually { try await relay.store.pushToStartTokens(deviceID: device).count == 1 }
        }
        let started = try await relay.post("/v1/activities/order-7/start", startBody(key: "order-7"))
        #expect(started.status == 201 && started.json["deliveries"] == .integer(2), "\(started.json)")
        #expect(started.json["warnings"] == nil, "both versions decode the start")
        try await relay.dispatch()
        try await relay.waitForToken("order-7", device: "iphone-v1")
        try await relay.waitForToken("order-7", device: "iphone-v2")
        let tokens = try await relay.store.activityTokens(app: harnessApp, key: "order-7")
        #expect(tokens.map(\.appVersion) == ["1.0 (1)", "2.0 (7)"])
    }

    @Test func anUpdateOneVersionCannotDecodeIsSentWithAWarningOrOnlyToTheVersionsThatDecodeIt() async throws {
        try await withRelayHarness { relay in
            try await fleet(relay)
            let warned = try await relay.post("/v1/activities/order-7/update", .object([("contentState", Self.withoutETA)]))
            #expect(warned.status == 200 && warned.json["deliveries"] == .integer(2), "\(warned.json)")
            let warning = try #require(warned.json["warnings"]?.arrayElements?.first?.stringValue)
            #expect(warning.hasPrefix("app version 1.0 (1) (1 device) cannot decode it: contentState.etaMinutes:"), "\(warning)")
            #expect(warning.hasSuffix("their devices drop it"))
            try await relay.dispatch()
            #expect(try relay.activity(on: "iphone-v2")?.content.state == Self.withoutETA)
            #expect(try relay.activity(on: "iphone-v1")?.content.state == content("preparing", 30), "version 1 dropped it, as warned")

            let decodable = try await relay.post(
                "/v1/activities/order-7/update", .object([("contentState", Self.withoutETA), ("versions", .string("decodable"))]))
            #expect(decodable.status == 200 && decodable.json["deliveries"] == .integer(1), "\(decodable.json)")
            #expect(decodable.json["warnings"]?.arrayElements?.first?.stringValue?.hasSuffix("not sent to them (versions: decodable)") == true)
            let newest = try await relay.store.deliveries(DeliveryQuery(key: "order-7", limit: 1))
            #expect(newest.map(\.target.deviceID) == ["iphone-v2"])

            // Neither decodes a number for a String: refused, naming both versions, nothing written.
            let before = try await relay.store.deliveries(DeliveryQuery(key: "order-7")).count
            let refused = try await relay.post(
                "/v1/activities/order-7/update", .object([("contentState", json(#"{"status": 5, "etaMinutes": 1}"#))]))
            #expect(refused.status == 422 && refused.json["error"]?["field"] == .string("contentState.status"), "\(refused.json)")
            let message = refused.json["error"]?["message"]?.stringValue ?? ""
            #expect(message.contains("no app version decodes it: app version 1.0 (1) (1 device), app version 2.0 (7) (1 device)"), "\(message)")
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "order-7")).count == before)

            // An update both decode goes to both, without a word.
            let both = try await relay.post("/v1/activities/order-7/update", .object([("contentState", content("here", 0))]))
            #expect(both.json["deliveries"] == .integer(2) && both.json["warnings"] == nil, "\(both.json)")
            // The activity's page says which versions its devices run.
            let page = try await relay.get("/v1/activities/order-7")
            #expect(page.json["tokens"]?.arrayElements?.compactMap { $0["appVersion"]?.stringValue } == ["1.0 (1)", "2.0 (7)"])
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let shown = try await browser.get("/dashboard/activity?app=\(harnessApp)&key=order-7").text
            #expect(shown.contains("<dt>App versions</dt><dd>2.0 (7): 1 device · 1.0 (1): 1 device</dd>"), "\(shown)")
            #expect(shown.contains(#"<td data-label="app version:">2.0 (7)</td>"#))
        }
    }

    /// The client key ships in every app: it adds its own version's contract and never replaces
    /// one, so it cannot make the backend's pushes fail; the backend can replace, pin and retire.
    @Test func aClientKeyAddsItsOwnVersionsContractAndTheBackendManagesThem() async throws {
        try await withRelayHarness { relay in
            try await fleet(relay)
            func register(_ version: String?, _ contentState: String, environment: String = "production", scope: APIKeyScope = .client)
                async throws -> RelayHarness.Answer
            {
                var body: JSONValue.Members = [
                    ("attributes", json(#"{"activityKey": "String", "orderNumber": "Int"}"#)), ("contentState", json(contentState)),
                    ("environment", .string(environment)),
                ]
                if let version { body.append(("appVersion", .string(version))) }
                return try await relay.call(.PUT, "/v1/contracts/DeliveryAttributes", .object(body), scope: scope)
            }
            let hostile = #"{"status": "Int", "etaMinutes": "Int"}"#
            let replaced = try await register("2.0 (7)", hostile)
            #expect(replaced.status == 403 && replaced.json["error"]?["code"] == .string("contract_version_kept"), "\(replaced.json)")
            #expect(replaced.json["error"]?["field"] == .string("appVersion"))
            // Launching again with the same types is no change.
            #expect(try await register("2.0 (7)", #"{"status": "String", "etaMinutes": "Int?"}"#).status == 200)
            // Saying it is a development build unlocks nothing a production build registered,
            // not even after registering the same types as one.
            #expect(try await register("2.0 (7)", hostile, environment: "sandbox").status == 403)
            #expect(try await register("2.0 (7)", #"{"status": "String", "etaMinutes": "Int?"}"#, environment: "sandbox").status == 200)
            #expect(try await register("2.0 (7)", hostile, environment: "sandbox").status == 403)
            // A development build changes under one version all day: its contract may change.
            #expect(try await register("3.0 (1)", hostile, environment: "sandbox").status == 200)
            #expect(try await register("3.0 (1)", #"{"status": "String"}"#, environment: "sandbox").status == 200)
            // Only the backend pins.
            #expect(
                try await relay.call(
                    .PUT, "/v1/contracts/DeliveryAttributes", json(#"{"attributes": {}, "contentState": {}, "appVersion": "4", "pinned": true}"#),
                    scope: .client
                ).status == 403)
            let updates = try await relay.post("/v1/activities/order-7/update", .object([("contentState", content("on the way", 5))]))
            #expect(updates.status == 200 && updates.json["warnings"] == nil, "\(updates.json)")

            let pinned = try await relay.call(
                .PUT, "/v1/contracts/DeliveryAttributes",
                json(
                    #"{"attributes": {"activityKey": "String", "orderNumber": "Int"}, "contentState": {"status": "String"}, "appVersion": "1.0 (1)", "pinned": true}"#
                ),
                scope: .server)
            #expect(pinned.status == 200 && pinned.json["pinned"] == .bool(true) && pinned.json["appVersion"] == .string("1.0 (1)"), "\(pinned.json)")
            let one = try await relay.get("/v1/contracts/DeliveryAttributes?appVersion=1.0%20(1)")
            #expect(one.json["contentState"] == json(#"{"status": "String"}"#), "\(one.json)")
            let retired = try await relay.call(.DELETE, "/v1/contracts/DeliveryAttributes?appVersion=3.0%20(1)", nil, scope: .server)
            #expect(retired.status == 200 && retired.json["appVersion"] == .string("3.0 (1)"), "\(retired.json)")
            #expect(try await relay.call(.DELETE, "/v1/contracts/DeliveryAttributes?appVersion=3.0%20(1)", nil, scope: .server).status == 404)
            #expect(try await relay.call(.DELETE, "/v1/contracts/DeliveryAttributes?appVersion=2.0%20(7)", nil, scope: .client).status == 403)
            let listed = try await relay.get("/v1/contracts").json["contracts"]?.arrayElements?.compactMap { $0["appVersion"]?.stringValue }
            #expect(listed == ["1.0 (1)", "2.0 (7)"])
        }
    }

    /// An app updated on a phone says so at its next launch: the phone's tokens are the new
    /// version's, and its pushes are checked against that version's contract.
    @Test func anAppUpdatedOnAPhoneIsCheckedAsItsNewVersion() async throws {
        try await withRelayHarness { relay in
            try await fleet(relay)
            try relay.addDevice("iphone-v1", types: [Self.second], environment: .production, appVersion: "2.0 (7)")
            try await relay.eventually {
                try await relay.store.activityTokens(app: harnessApp, key: "order-7").allSatisfy { $0.appVersion == "2.0 (7)" }
            }
            #expect(try await relay.store.pushToStartTokens(deviceID: "iphone-v1").map(\.appVersion) == ["2.0 (7)"])
            let update = try await relay.post("/v1/activities/order-7/update", .object([("contentState", Self.withoutETA)]))
            #expect(update.json["deliveries"] == .integer(2) && update.json["warnings"] == nil, "\(update.json)")
        }
    }

    /// A start reaches the devices of its audience by their version too.
    @Test func aStartOnlyVersionTwoDecodesGoesToVersionTwoAloneWhenAskedSo() async throws {
        try await withRelayHarness { relay in
            try await fleet(relay)
            var body = startBody(key: "order-8")
            body.set("contentState", Self.withoutETA)
            body.set("versions", .string("decodable"))
            let started = try await relay.post("/v1/activities/order-8/start", body)
            #expect(started.status == 201 && started.json["deliveries"] == .integer(1), "\(started.json)")
            try await relay.dispatch()
            try await relay.waitForToken("order-8", device: "iphone-v2")
            #expect(try await relay.store.activityTokens(app: harnessApp, key: "order-8").map(\.deviceID) == ["iphone-v2"])
        }
    }
}
