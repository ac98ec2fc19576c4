import Foundation
import LiveActivityKit
import Testing

/// Each rule of the Live Activity payload, with an input that breaks it.
@Suite struct PayloadValidationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let rule: String
        let json: String
        var destination: LiveActivityPayload.Destination = .device
        let field: String
        let code: LiveActivityValidationError.Code
        var testDescription: String { rule }
    }

    static let update = #""event":"update","timestamp":1795000000,"content-state":{"a":1}"#
    static let startBase =
        #""event":"start","timestamp":1795000000,"content-state":{"a":1},"alert":{"title":"T","body":"B"},"attributes-type":"DeliveryAttributes","attributes":{"order":1}"#

    static let cases: [Case] = [
        Case(rule: "the payload is an object", json: "[1]", field: "payload", code: .wrongType),
        Case(rule: "aps is required", json: #"{"x":1}"#, field: "aps", code: .missing),
        Case(rule: "aps is an object", json: #"{"aps":"update"}"#, field: "aps", code: .wrongType),
        Case(
            rule: "a misspelled aps key is refused with a hint", json: #"{"aps":{\#(update),"state-date":1795000000}}"#, field: "aps.state-date",
            code: .unknownKey),
        Case(rule: "custom keys go beside aps", json: #"{"aps":{\#(update),"orderID":7}}"#, field: "aps.orderID", code: .unknownKey),
        Case(rule: "event is required", json: #"{"aps":{"timestamp":1795000000,"content-state":{}}}"#, field: "aps.event", code: .missing),
        Case(
            rule: "event is a string", json: #"{"aps":{"event":1,"timestamp":1795000000,"content-state":{}}}"#, field: "aps.event", code: .wrongType),
        Case(
            rule: "event is start, update or end", json: #"{"aps":{"event":"Update","timestamp":1795000000,"content-state":{}}}"#, field: "aps.event",
            code: .invalidValue),
        Case(rule: "a broadcast cannot start", json: #"{"aps":{\#(startBase)}}"#, destination: .broadcast, field: "aps.event", code: .notAllowed),
        Case(rule: "timestamp is required", json: #"{"aps":{"event":"update","content-state":{}}}"#, field: "aps.timestamp", code: .missing),
        Case(
            rule: "timestamp is a number", json: #"{"aps":{"event":"update","timestamp":"1795000000","content-state":{}}}"#, field: "aps.timestamp",
            code: .wrongType),
        Case(
            rule: "timestamp is not milliseconds", json: #"{"aps":{"event":"update","timestamp":1795000000000,"content-state":{}}}"#,
            field: "aps.timestamp", code: .invalidValue),
        Case(
            rule: "timestamp is not seconds since 2001", json: #"{"aps":{"event":"update","timestamp":785000000,"content-state":{}}}"#,
            field: "aps.timestamp", code: .invalidValue),
        Case(
            rule: "stale-date is UNIX seconds", json: #"{"aps":{\#(update),"stale-date":"2026-11-21T14:00:00Z"}}"#, field: "aps.stale-date",
            code: .wrongType),
        Case(
            rule: "stale-date is not seconds since 2001", json: #"{"aps":{\#(update),"stale-date":785000000}}"#, field: "aps.stale-date",
            code: .invalidValue),
        Case(
            rule: "dismissal-date only on end", json: #"{"aps":{\#(update),"dismissal-date":1795000000}}"#, field: "aps.dismissal-date",
            code: .notAllowed),
        Case(
            rule: "dismissal-date is UNIX seconds", json: #"{"aps":{"event":"end","timestamp":1795000000,"dismissal-date":1795000000000}}"#,
            field: "aps.dismissal-date", code: .invalidValue),
        Case(
            rule: "content-state is required on update", json: #"{"aps":{"event":"update","timestamp":1795000000}}"#, field: "aps.content-state",
            code: .missing),
        Case(
            rule: "content-state is required on start",
            json: #"{"aps":{"event":"start","timestamp":1795000000,"alert":{"title":"T","body":"B"},"attributes-type":"A","attributes":{}}}"#,
            field: "aps.content-state", code: .missing),
        Case(
            rule: "content-state is an object", json: #"{"aps":{"event":"update","timestamp":1795000000,"content-state":"{\"a\":1}"}}"#,
            field: "aps.content-state", code: .wrongType),
        Case(
            rule: "relevance-score is a number", json: #"{"aps":{\#(update),"relevance-score":"high"}}"#, field: "aps.relevance-score",
            code: .wrongType),
        Case(
            rule: "a start needs an alert",
            json: #"{"aps":{"event":"start","timestamp":1795000000,"content-state":{},"attributes-type":"A","attributes":{}}}"#, field: "aps.alert",
            code: .missing),
        Case(rule: "alert is an object", json: #"{"aps":{\#(update),"alert":"Hello"}}"#, field: "aps.alert", code: .wrongType),
        Case(
            rule: "alert keys are title, body, sound", json: #"{"aps":{\#(update),"alert":{"title":"T","body":"B","title-loc-key":"K"}}}"#,
            field: "aps.alert.title-loc-key", code: .unknownKey),
        Case(
            rule: "an alert needs a title", json: #"{"aps":{\#(update),"alert":{"body":"B","sound":"default"}}}"#, field: "aps.alert.title",
            code: .missing),
        Case(rule: "an alert needs a body", json: #"{"aps":{\#(update),"alert":{"title":"T"}}}"#, field: "aps.alert.body", code: .missing),
        Case(
            rule: "alert title is text or loc-key", json: #"{"aps":{\#(update),"alert":{"title":7,"body":"B"}}}"#, field: "aps.alert.title",
            code: .wrongType),
        Case(
            rule: "localised text needs loc-key", json: #"{"aps":{\#(update),"alert":{"title":{"loc-args":["x"]},"body":"B"}}}"#,
            field: "aps.alert.title.loc-key", code: .missing),
        Case(
            rule: "loc-args are strings", json: #"{"aps":{\#(update),"alert":{"title":{"loc-key":"K","loc-args":[1]},"body":"B"}}}"#,
            field: "aps.alert.title.loc-args", code: .wrongType),
        Case(
            rule: "sound is a string", json: #"{"aps":{\#(update),"alert":{"title":"T","body":"B","sound":{"critical":1}}}}"#,
            field: "aps.alert.sound", code: .wrongType),
        Case(
            rule: "a start needs attributes-type",
            json: #"{"aps":{"event":"start","timestamp":1795000000,"content-state":{},"alert":{"title":"T","body":"B"},"attributes":{}}}"#,
            field: "aps.attributes-type", code: .missing),
        Case(
            rule: "attributes-type is a type name",
            json:
                #"{"aps":{"event":"start","timestamp":1795000000,"content-state":{},"alert":{"title":"T","body":"B"},"attributes-type":"Delivery Attributes","attributes":{}}}"#,
            field: "aps.attributes-type", code: .invalidValue),
        Case(
            rule: "a start needs attributes",
            json: #"{"aps":{"event":"start","timestamp":1795000000,"content-state":{},"alert":{"title":"T","body":"B"},"attributes-type":"A"}}"#,
            field: "aps.attributes", code: .missing),
        Case(
            rule: "attributes is an object",
            json:
                #"{"aps":{"event":"start","timestamp":1795000000,"content-state":{},"alert":{"title":"T","body":"B"},"attributes-type":"A","attributes":[1]}}"#,
            field: "aps.attributes", code: .wrongType),
        Case(rule: "attributes only on start", json: #"{"aps":{\#(update),"attributes":{}}}"#, field: "aps.attributes", code: .notAllowed),
        Case(
            rule: "input-push-token only on start", json: #"{"aps":{\#(update),"input-push-token":1}}"#, field: "aps.input-push-token",
            code: .notAllowed),
        Case(
            rule: "input-push-token is 1", json: #"{"aps":{\#(startBase),"input-push-token":true}}"#, field: "aps.input-push-token",
            code: .invalidValue),
        Case(
            rule: "input-push-channel is base64", json: #"{"aps":{\#(startBase),"input-push-channel":"not base64!"}}"#,
            field: "aps.input-push-channel", code: .invalidValue),
        Case(
            rule: "one push type per activity", json: #"{"aps":{\#(startBase),"input-push-token":1,"input-push-channel":"dHN0LXNyY2gtY2hubA=="}}"#,
            field: "aps.input-push-channel", code: .notAllowed),
    ]

    @Test(arguments: cases)
    func ruleIsEnforced(_ testCase: Case) throws {
        let payload = try LiveActivityPayload(parsing: Array(testCase.json.utf8))
        let error = #expect(throws: LiveActivityValidationError.self) { try payload.encoded(for: testCase.destination) }
        #expect(error?.field == testCase.field)
        #expect(error?.code == testCase.code)
    }

    @Test func misspellingsGetAHint() throws {
        for (wrong, right) in [
            ("state-date", "stale-date"), ("staleDate", "stale-date"), ("content_state", "content-state"), ("contentState", "content-state"),
            ("dismissal_date", "dismissal-date"),
        ] {
            let payload = try LiveActivityPayload(
                parsing: Array(#"{"aps":{"event":"update","timestamp":1795000000,"content-state":{},"\#(wrong)":1}}"#.utf8))
            let error = #expect(throws: LiveActivityValidationError.self) { try payload.validate(for: .device) }
            #expect(error?.message.contains("did you mean \"\(right)\"") == true, "\(wrong): \(error?.message ?? "")")
        }
    }

    /// A hint is looked for only among the keys within two characters of the key's length: a
    /// client's key of 60,000 characters is not compared with each (the corpus keeps the body
    /// libFuzzer found, which took seconds under its sanitizer).
    @Test func aKeyFarLongerThanAnyGetsNoHint() {
        let keys = ["content-state", "stale-date", "dismissal-date"]
        #expect(closestKey(to: "content-stat", in: keys) == "content-state")
        #expect(closestKey(to: "staleDate", in: keys) == "stale-date")
        #expect(closestKey(to: "content-sta" + String(repeating: "?", count: 60_000), in: keys) == nil)
        #expect(closestKey(to: String(repeating: "é", count: 15), in: keys) == nil)
    }

    @Test(arguments: [
        #"{"aps":{"event":"update","timestamp":1795000000,"content-state":{}}}"#,
        #"{"aps":{"event":"end","timestamp":1795000000}}"#,
        #"{"aps":{"event":"end","timestamp":1795000000,"dismissal-date":0,"content-state":{"a":1}}}"#,
        #"{"aps":{"event":"end","timestamp":1795000000,"stale-date":1795000600,"relevance-score":-2.5}}"#,
        #"{"aps":{"event":"start","timestamp":1795000000,"content-state":{},"alert":{"title":{"loc-key":"K"},"body":"B"},"attributes-type":"A","attributes":{},"input-push-channel":"dHN0LXNyY2gtY2hubA=="}}"#,
        #"{"aps":{"event":"update","timestamp":1795000000.5,"content-state":{},"alert":{"title":"T","body":"B","sound":"HeroDown.mp4"}},"orderID":42}"#,
    ])
    func validPayloadsPass(_ json: String) throws {
        let payload = try LiveActivityPayload(parsing: Array(json.utf8))
        try payload.validate(for: .device)
    }

    @Test func sizeIsMeasuredOnTheExactBytesSent() throws {
        func payload(totalSize: Int) throws -> LiveActivityPayload {
            let skeleton = #"{"aps":{"event":"update","timestamp":1795000000,"content-state":{"p":""}}}"#
            let padding = String(repeating: "x", count: totalSize - skeleton.utf8.count)
            let payload = try LiveActivityPayload(
                parsing: Array(#"{"aps":{"event":"update","timestamp":1795000000,"content-state":{"p":"\#(padding)"}}}"#.utf8))
            #expect(payload.json.serialized.count == totalSize)
            return payload
        }
        #expect(try payload(totalSize: 4096).encoded(for: .device).count == 4096)
        let tooLarge = #expect(throws: LiveActivityValidationError.self) { try payload(totalSize: 4097).encoded(for: .device) }
        #expect(tooLarge?.code == .tooLarge)
        #expect(try payload(totalSize: 5120).encoded(for: .broadcast).count == 5120)
        #expect(throws: LiveActivityValidationError.self) { try payload(totalSize: 5121).encoded(for: .broadcast) }
    }

    @Test func aNonFiniteRelevanceScoreIsRefused() {
        let error = #expect(throws: LiveActivityValidationError.self) {
            try LiveActivityPayload.update(
                content: ActivityContent(
                    state: AdventureAttributes.ContentState(currentHealthLevel: 1, eventDescription: ""), staleDate: nil, relevanceScore: .infinity),
                timestamp: Date())
        }
        #expect(error?.field == "aps.relevance-score")
    }
}

@Suite struct HeaderValueTests {
    @Test func tokensAreHexOfAnyEvenLength() throws {
        #expect(try DeviceToken(String(repeating: "ab", count: 80)).hex.count == 160)
        #expect(try DeviceToken(String(repeating: "AB", count: 32)).hex == String(repeating: "ab", count: 32))
        #expect(try DeviceToken("00ff").hex == "00ff")
        for bad in ["", "abc", "zz", "ab cd", "0x00ff"] {
            let error = #expect(throws: LiveActivityValidationError.self) { try DeviceToken(bad) }
            #expect(error?.field == "token")
        }
    }

    @Test func collapseIDIsAtMost64Bytes() throws {
        #expect(try CollapseID(String(repeating: "a", count: 64)).value.count == 64)
        #expect(throws: LiveActivityValidationError.self) { try CollapseID(String(repeating: "a", count: 65)) }
        // Bytes, not characters: 22 × "é" (2 bytes) + 21 × "a" = 65 bytes.
        let error = #expect(throws: LiveActivityValidationError.self) {
            try CollapseID(String(repeating: "é", count: 22) + String(repeating: "a", count: 21))
        }
        #expect(error?.field == "apns-collapse-id")
    }

    @Test func priorityIs5Or10ForDevicePushesAnd1AlsoForBroadcasts() throws {
        #expect(try APNsPriority(value: 10, for: .device) == .immediate)
        #expect(try APNsPriority(value: 5, for: .device) == .powerConsiderate)
        #expect(throws: LiveActivityValidationError.self) { try APNsPriority(value: 1, for: .device) }
        #expect(try APNsPriority(value: 1, for: .broadcast) == .low)
        for bad in [0, 3, 11] {
            #expect(throws: LiveActivityValidationError.self) { try APNsPriority(value: bad, for: .broadcast) }
        }
    }

    @Test func expirationIsAnAbsoluteTime() throws {
        #expect(try APNsExpiration(unixSeconds: 0) == .immediately)
        #expect(try APNsExpiration(unixSeconds: 1_795_000_000).headerValue == "1795000000")
        for relative in [Int64(300), 3600, -5] {
            let error = #expect(throws: LiveActivityValidationError.self) { try APNsExpiration(unixSeconds: relative) }
            #expect(error?.field == "apns-expiration")
        }
    }

    @Test func bundleIDMustNotCarryTheTopicSuffix() throws {
        #expect(try BundleID("com.example.app").liveActivityTopic == "com.example.app.push-type.liveactivity")
        let error = #expect(throws: LiveActivityValidationError.self) { try BundleID("com.example.app.push-type.liveactivity") }
        #expect(error?.message.contains("give \"com.example.app\"") == true)
        #expect(throws: LiveActivityValidationError.self) { try BundleID("com.example/app") }
    }

    @Test func aBundleIDHoldsLettersDigitsDotsHyphensAndUnderscoresOnly() throws {
        #expect(try BundleID("com.Example-1.my_app").value == "com.Example-1.my_app")
        for bad in ["com.exämple.app", "com example", "com.example.app\n", "com.example:app", "com.example.app\u{0}", "ｃom.example"] {
            let error = #expect(throws: LiveActivityValidationError.self, "\(bad.debugDescription)") { try BundleID(bad) }
            #expect(error?.message.contains("may contain only letters, digits") == true)
        }
    }

    @Test func apnsIDIsACanonicalUUID() throws {
        #expect(try APNsMessageID("123E4567-E89B-12D3-A456-426614174000").description == "123e4567-e89b-12d3-a456-426614174000")
        #expect(throws: LiveActivityValidationError.self) { try APNsMessageID("123e4567e89b12d3a456426614174000") }
    }
}
