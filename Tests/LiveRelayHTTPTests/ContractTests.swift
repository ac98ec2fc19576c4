import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import SimulatedDevices
import Testing

/// An app's contract says what its widget decodes: the server refuses what would be dropped on
/// the iPhone, in the iPhone's words, before anything is written.
@Suite struct ContractTests {
    /// A start of `key` for nobody, of `type` with no attributes.
    static func start(of type: String, key: String, contentState: String) -> JSONValue {
        var start = startBody(key: key, audience: json(#"{"devices": ["nobody"]}"#))
        start.set("attributesType", .string(type))
        start.set("attributes", json("{}"))
        start.set("contentState", json(contentState))
        return start
    }

    @Test func theAppRegistersItsContractAndAnUpdateTheWidgetWouldDropIsRefusedWithTheFieldAndTheReason() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("order-42", on: ["iphone-1"])
            // The simulated app registered its contract with its push-to-start token.
            let listed = try await relay.get("/v1/contracts")
            #expect(listed.json["contracts"]?[0]?["name"] == .string("DeliveryAttributes"))
            #expect(listed.json["contracts"]?[0]?["contentState"]?["etaMinutes"] == .string("Int"))
            let before = try await relay.store.deliveryCounts()

            let wrong = json(#"{"status": "on the way", "etaMinutes": "ten"}"#)
            let refused = try await relay.post("/v1/activities/order-42/update", .object([("contentState", wrong)]))
            #expect(refused.status == 422)
            #expect(refused.json["error"]?["code"] == .string("content_does_not_decode"))
            #expect(refused.json["error"]?["field"] == .string("contentState.etaMinutes"))
            #expect(refused.json["error"]?["message"] == .string("expected a number for Int, found a string"))
            // In the words of the iPhone, which would have dropped it.
            let device = #expect(throws: DecodingFailure.self) { try deliveryType.checkContentState(wrong) }
            #expect(device?.path == "etaMinutes" && device?.message == "expected a number for Int, found a string")
            #expect(try await relay.store.deliveryCounts() == before, "nothing was queued")

            let missing = try await relay.post("/v1/activities/order-42/update", .object([("contentState", json(#"{"status": "late"}"#))]))
            #expect(missing.status == 422)
            #expect(missing.json["error"]?["field"] == .string("contentState.etaMinutes"))

            let right = try await relay.post("/v1/activities/order-42/update", .object([("contentState", content("on the way", 10))]))
            #expect(right.status == 200)
            #expect(right.json["warnings"] == nil)
            try await relay.dispatch()
            #expect(try relay.activity(on: "iphone-1")?.content.state == content("on the way", 10))
        }
    }

    @Test func aStartIsCheckedAttributesAndContentBeforeAnythingIsWritten() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            var body = startBody(key: "order-7")
            body.set("attributes", json(#"{"activityKey": "order-7", "orderNumber": 7.5}"#))
            let refused = try await relay.post("/v1/activities/order-7/start", body)
            #expect(refused.status == 422)
            #expect(refused.json["error"]?["field"] == .string("attributes.orderNumber"))
            #expect(try await relay.store.activity(app: harnessApp, key: "order-7") == nil)
        }
    }

    /// A table of broken inputs, one per rule of the schema language: the server's verdict is the
    /// simulated device's for the same JSON, field and reason.
    @Test(arguments: [
        (#"{"text": 1}"#, "text"),
        (#"{"count": 1.5}"#, "count"),
        (#"{"count": 1e30}"#, "count"),
        (#"{"ratio": "half"}"#, "ratio"),
        (#"{"done": "yes"}"#, "done"),
        (#"{"when": "2026-11-21T10:00:00Z"}"#, "when"),
        (#"{"window": [5, 1]}"#, "window"),
        (#"{"window": [1]}"#, "window[1]"),
        (#"{"link": 5}"#, "link"),
        (#"{"step": "lost"}"#, "step"),
        (#"{"level": 4}"#, "level"),
        (#"{"stops": ["a", 2]}"#, "stops[1]"),
        (#"{"driver": {"name": null}}"#, "driver.name"),
        (#"{"driver": {}}"#, "driver.name"),
        (#"{"note": 5}"#, "note"),
    ])
    func everyRuleRefusesAsTheDeviceWouldDecide(state: String, field: String) async throws {
        try await withRelayHarness { relay in
            let contract = json(
                #"""
                {"bundleID": "com.example.liverelay.tests", "attributes": {},
                 "contentState": {"text": "String?", "count": "Int?", "ratio": "Double?", "done": "Bool?", "when": "Date?",
                                  "window": "ClosedRange<Date>?", "link": "URL?", "step": {"optional": {"enum": ["ready", "gone"]}},
                                  "level": {"optional": {"enum": [1, 2]}}, "stops": "[String]?",
                                  "driver": {"optional": {"fields": {"name": "String"}}}, "note": "String?"}}
                """#)
            #expect(try await relay.call(.PUT, "/v1/contracts/Everything", contract, scope: .admin).status == 200)
            let start = Self.start(of: "Everything", key: "k", contentState: "{}")
            #expect(try await relay.post("/v1/activities/k/start", start).status == 201)
            // Whatever the server says, the device says for the same JSON.
            let stored = try ActivityContract(json: contract.removing("bundleID"), name: "Everything")
            let broken = try JSONValue(parsing: state)
            let device = try #require(#expect(throws: DecodingFailure.self) { try ActivityAttributesType(stored).checkContentState(broken) })
            let answer = try await relay.post("/v1/activities/k/update", .object([("contentState", broken)]))
            #expect(answer.status == 422)
            #expect(answer.json["error"]?["field"] == .string("contentState." + device.path))
            #expect(answer.json["error"]?["message"]?.stringValue?.hasPrefix(device.message) == true)
            #expect(device.path == field, "the input breaks the rule it is listed for")
        }
    }

    @Test func aDateInTheWrongUnitGetsAHintAndAChangedContractAppliesAtOnce() async throws {
        try await withRelayHarness { relay in
            let contract = json(#"{"bundleID": "com.example.liverelay.tests", "attributes": {}, "contentState": {"arrives": "Date"}}"#)
            #expect(try await relay.call(.PUT, "/v1/contracts/Trip", contract, scope: .admin).status == 200)
            let start = Self.start(of: "Trip", key: "trip", contentState: #"{"arrives": 816948000}"#)
            let started = try await relay.post("/v1/activities/trip/start", start)
            #expect(started.status == 201)
            // It reached nobody: the answer says so.
            #expect(started.json["warnings"]?[0]?.stringValue?.contains("no device in the audience") == true)

            let iso = try await relay.post("/v1/activities/trip/update", .object([("contentState", json(#"{"arrives": "2026-11-21T10:00:00Z"}"#))]))
            #expect(iso.status == 422)
            #expect(
                iso.json["error"]?["message"]?.stringValue?.contains("seconds since 2001-01-01T00:00:00Z: for 2026-11-21T10:00:00Z send 816948000")
                    == true)
            let unix = try await relay.post("/v1/activities/trip/update", .object([("contentState", json(#"{"arrives": 1795255200}"#))]))
            #expect(unix.status == 200)
            #expect(
                unix.json["warnings"]?.arrayElements?.contains {
                    $0.stringValue?.hasPrefix("contentState.arrives:") == true && $0.stringValue?.contains("UNIX seconds") == true
                } == true)

            // The contract changes; the next request is checked against the new one.
            let loose = json(#"{"bundleID": "com.example.liverelay.tests", "attributes": {}, "contentState": {"arrives": "String"}}"#)
            #expect(try await relay.call(.PUT, "/v1/contracts/Trip", loose, scope: .admin).status == 200)
            #expect(try await relay.post("/v1/activities/trip/update", .object([("contentState", json(#"{"arrives": "soon"}"#))])).status == 200)
        }
    }

    @Test func aContractIsRefusedForAnotherAppOrWithABrokenSchemaAndOnlyClientServerAndAdminKeysRegister() async throws {
        try await withRelayHarness { relay in
            let other = json(#"{"bundleID": "com.example.other", "attributes": {}, "contentState": {}}"#)
            let wrongApp = try await relay.call(.PUT, "/v1/contracts/T", other, scope: .client)
            #expect(wrongApp.status == 403 && wrongApp.json["error"]?["field"] == .string("bundleID"))
            #expect(wrongApp.json["error"]?["code"] == .string("other_app"))
            // The operator may register for any app the server has, and no other.
            let unknownApp = try await relay.call(.PUT, "/v1/contracts/T", other, scope: .admin)
            #expect(unknownApp.status == 404 && unknownApp.json["error"]?["field"] == .string("bundleID"))
            let badType = json(#"{"bundleID": "com.example.liverelay.tests", "attributes": {}, "contentState": {"n": "Integer"}}"#)
            let unknown = try await relay.call(.PUT, "/v1/contracts/T", badType, scope: .client)
            #expect(unknown.status == 400 && unknown.json["error"]?["field"] == .string("contentState.n"))
            // An object type has exactly one kind, and a name only beside fields.
            for (schema, field) in [
                (#"{"n": {"array": "Int", "optional": "Int"}}"#, "contentState.n"), (#"{"n": {"name": "N"}}"#, "contentState.n"),
                (#"{"n": {"fields": {}, "name": 5}}"#, "contentState.n.name"),
            ] {
                let body = json(#"{"bundleID": "com.example.liverelay.tests", "attributes": {}, "contentState": \#(schema)}"#)
                let refused = try await relay.call(.PUT, "/v1/contracts/T", body, scope: .client)
                #expect(refused.status == 400 && refused.json["error"]?["field"] == .string(field), "\(schema)")
            }
            let good = json(#"{"bundleID": "com.example.liverelay.tests", "attributes": {}, "contentState": {}}"#)
            let viewer = try await relay.relay.createAPIKey(name: "support", scope: .viewer).secret
            #expect(try await relay.call(.PUT, "/v1/contracts/T", good, scope: nil, secret: viewer).status == 403)
            #expect(try await relay.call(.PUT, "/v1/contracts/T", good, scope: .client).status == 200)
            #expect(try await relay.call(.PUT, "/v1/contracts/T", good, scope: .server).status == 200)
            #expect(try await relay.get("/v1/contracts/T").json["name"] == .string("T"))
            #expect(try await relay.get("/v1/contracts/Nope").status == 404)
        }
    }

    /// Contracts come with a client key, which ships inside every app: a type string is read in one
    /// pass, and one too long or too deep is refused at once, naming the field. 60,000 `?` once
    /// took minutes of a core and then the server's stack.
    @Test func aTypeTooLongOrTooDeepIsRefusedAtOnceNamingTheField() async throws {
        try await withRelayHarness { relay in
            func contract(_ attributes: String, _ contentState: String = #"{"s": "String"}"#) -> JSONValue {
                json(#"{"bundleID": "com.example.liverelay.tests", "attributes": \#(attributes), "contentState": \#(contentState)}"#)
            }
            let clock = ContinuousClock()
            let started = clock.now
            for (attributes, field, rule) in [
                (#"{"a": "String\#(String(repeating: "?", count: 60_000))"}"#, "attributes.a", "is longer than 200 characters"),
                (
                    #"{"a": "\#(String(repeating: "[", count: 32_000))String\#(String(repeating: "]", count: 32_000))"}"#, "attributes.a",
                    "is longer than 200 characters"
                ),
                (#"{"a": "String\#(String(repeating: "?", count: 33))"}"#, "attributes.a", "nests types deeper than 32 levels"),
                (
                    #"{"a": "\#(String(repeating: "[", count: 20))String?\#(String(repeating: "]", count: 20))??????????????"}"#, "attributes.a",
                    "nests types deeper than 32 levels"
                ),
                (
                    String(repeating: #"{"a": {"fields": "#, count: 33) + "{}" + String(repeating: "}}", count: 33),
                    "attributes" + String(repeating: ".a.fields", count: 32) + ".a", "nests types deeper than 32 levels"
                ),
                (
                    #"{"a": "# + String(repeating: #"{"optional": "#, count: 33) + #""Int""# + String(repeating: "}", count: 34),
                    "attributes.a" + String(repeating: ".optional", count: 32), "nests types deeper than 32 levels"
                ),
            ] {
                let refused = try await relay.call(.PUT, "/v1/contracts/Poison", contract(attributes), scope: .client)
                #expect(refused.status == 400, "\(attributes.prefix(60))")
                #expect(refused.json["error"]?["field"] == .string(field), "\(attributes.prefix(60))")
                #expect(refused.json["error"]?["message"] == .string(rule), "\(attributes.prefix(60))")
            }
            // Refused before any work: the two long ones took 95 s and 67 s of a core before (and
            // the first then the stack); the six take a few seconds in a loaded debug run.
            #expect(clock.now - started < .seconds(30))
            #expect(try await relay.get("/v1/contracts/Poison").status == 404, "nothing was kept")

            // 32 levels in all, the field's own among them, are allowed, kept with every type, and
            // read back as registered.
            let deepest = contract(
                #"{"a": "\#(String(repeating: "[", count: 16))String\#(String(repeating: "?]", count: 15))]"}"#,
                #"{"s": \#(String(repeating: #"{"optional": "#, count: 31))"Int"\#(String(repeating: "}", count: 31))}"#)
            #expect(try await relay.call(.PUT, "/v1/contracts/Deep", deepest, scope: .client).status == 200)
            let kept = try await relay.get("/v1/contracts/Deep")
            let registered = try ActivityContract(json: deepest.removing("bundleID"), name: "Deep")
            #expect(
                try ActivityContract(json: kept.json.removing("updatedAt").removing("bundleID").removing("appVersion").removing("pinned"))
                    == registered)
        }
    }

    /// A contract kept by an older release that no longer reads is never dropped silently (its
    /// requests would go unchecked): its type's requests are refused until it is registered again.
    @Test func aStoredContractThatNoLongerReadsRefusesItsTypesRequests() async throws {
        try await withRelayHarness { relay in
            let tooDeep = json(
                #"{"attributes": {}, "contentState": {"s": \#(String(repeating: #"{"optional": "#, count: 40))"Int"\#(String(repeating: "}", count: 40))}}"#
            )
            try await relay.store.saveContract(
                ContractRecord(bundleID: harnessApp, attributesType: "Old", contract: tooDeep, updatedAt: relay.relay.currentDate))
            let start = Self.start(of: "Old", key: "old-1", contentState: #"{"s": 1}"#)
            let refused = try await relay.post("/v1/activities/old-1/start", start)
            #expect(refused.status == 409)
            #expect(refused.json["error"]?["code"] == .string("contract_unreadable"))
            #expect(refused.json["error"]?["field"] == .string("attributesType"))
            #expect(refused.json["error"]?["message"]?.stringValue?.contains("register it again with PUT /v1/contracts/Old") == true)
            #expect(try await relay.store.activity(app: harnessApp, key: "old-1") == nil)

            let again = json(#"{"bundleID": "com.example.liverelay.tests", "attributes": {}, "contentState": {"s": "Int?"}}"#)
            #expect(try await relay.call(.PUT, "/v1/contracts/Old", again, scope: .client).status == 200)
            #expect(try await relay.post("/v1/activities/old-1/start", start).status == 201)
        }
    }

    @Test func aScheduledUpdateOfAKnownKeyIsCheckedWhenItIsMade() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("order-9", on: ["iphone-1"])
            let later = ISO8601DateFormatter().string(from: relay.relay.currentDate + 600)
            let body = JSONValue.object([("contentState", json(#"{"status": "x", "etaMinutes": "soon"}"#)), ("at", .string(later))])
            #expect(try await relay.post("/v1/activities/order-9/update", body).status == 422)
        }
    }
}

extension JSONValue {
    func removing(_ key: String) -> JSONValue {
        var copy = self
        copy.remove(key)
        return copy
    }

    func setting(_ key: String, _ value: JSONValue) -> JSONValue {
        var copy = self
        copy.set(key, value)
        return copy
    }
}
