import Foundation
import LiveActivityKit
import LiveRelayTesting
import Testing

/// The Emoji Rangers attributes of the WWDC23 talk "Update Live Activities with push notifications".
struct AdventureAttributes: ActivityAttributes {
    struct ContentState: Codable, Hashable {
        var currentHealthLevel: Double
        var eventDescription: String
    }

    struct Hero: Codable, Hashable {
        var name: String
        var avatar: String
        var healthLevel: Double
        var heroType: String
        var healthRecoveryRatePerHour: Double
        var url: String
        var battleCode: String
        var level: Int
        var exp: Int
        var bio: String
    }

    var hero: Hero
}

private let talkTimestamp = Date(timeIntervalSince1970: 1_685_952_000)
private let talkLaterDate = Date(timeIntervalSince1970: 1_685_959_200)

/// Every payload shown in `shared/seeds/wwdc23-update-live-activities-with-push-notifications.txt`,
/// rebuilt from typed values.
@Suite struct GoldenPayloadTests {
    struct Golden: Sendable, CustomTestStringConvertible {
        let name: String
        let json: String
        let build: @Sendable () throws -> LiveActivityPayload
        var testDescription: String { name }
    }

    static let goldens: [Golden] = [
        Golden(
            name: "6:54 update",
            json: """
                { "aps": { "timestamp": 1685952000, "event": "update", "content-state": { "currentHealthLevel": 0.941, "eventDescription": "Power Panda found a sword!" } } }
                """
        ) {
            try .update(
                content: ActivityContent(
                    state: AdventureAttributes.ContentState(currentHealthLevel: 0.941, eventDescription: "Power Panda found a sword!"), staleDate: nil
                ), timestamp: talkTimestamp)
        },
        Golden(
            name: "14:21 alerting",
            json: """
                { "aps": { "timestamp": 1685952000, "event": "update", "content-state": { "currentHealthLevel": 0.0, "eventDescription": "Power Panda has been knocked down!" }, "alert": { "title": "Power Panda is knocked down!", "body": "Use a potion to heal Power Panda!", "sound": "default" } } }
                """
        ) {
            try .update(
                content: ActivityContent(
                    state: AdventureAttributes.ContentState(currentHealthLevel: 0, eventDescription: "Power Panda has been knocked down!"),
                    staleDate: nil),
                alert: AlertConfiguration(title: "Power Panda is knocked down!", body: "Use a potion to heal Power Panda!", sound: .default),
                timestamp: talkTimestamp)
        },
        Golden(
            name: "14:56 alert localization and 15:25 alert sound",
            json: """
                { "aps": { "timestamp": 1685952000, "event": "update", "content-state": { "currentHealthLevel": 0.0, "eventDescription": "Power Panda has been knocked down!" }, "alert": { "title": { "loc-key": "%@ is knocked down!", "loc-args": ["Power Panda"] }, "body": { "loc-key": "Use a potion to heal %@!", "loc-args": ["Power Panda"] }, "sound": "HeroDown.mp4" } } }
                """
        ) {
            try .update(
                content: ActivityContent(
                    state: AdventureAttributes.ContentState(currentHealthLevel: 0, eventDescription: "Power Panda has been knocked down!"),
                    staleDate: nil),
                alert: AlertConfiguration(
                    title: .localized(key: "%@ is knocked down!", arguments: ["Power Panda"]),
                    body: .localized(key: "Use a potion to heal %@!", arguments: ["Power Panda"]),
                    sound: .named("HeroDown.mp4")),
                timestamp: talkTimestamp)
        },
        Golden(
            name: "15:52 dismissal",
            json: """
                { "aps": { "timestamp": 1685952000, "event": "end", "dismissal-date": 1685959200, "content-state": { "currentHealthLevel": 0.23, "eventDescription": "Adventure over! Power Panda is taking a nap." } } }
                """
        ) {
            try .end(
                content: ActivityContent(
                    state: AdventureAttributes.ContentState(
                        currentHealthLevel: 0.23, eventDescription: "Adventure over! Power Panda is taking a nap."), staleDate: nil),
                dismissalPolicy: .after(talkLaterDate), timestamp: talkTimestamp)
        },
        Golden(
            name: "16:44 stale date",
            json: """
                { "aps": { "timestamp": 1685952000, "event": "update", "stale-date": 1685959200, "content-state": { "currentHealthLevel": 0.79, "eventDescription": "Egghead is in the woods and lost connection." } } }
                """
        ) {
            try .update(
                content: ActivityContent(
                    state: AdventureAttributes.ContentState(
                        currentHealthLevel: 0.79, eventDescription: "Egghead is in the woods and lost connection."), staleDate: talkLaterDate),
                timestamp: talkTimestamp)
        },
        Golden(
            name: "17:19 relevance score",
            json: """
                { "aps": { "timestamp": 1685952000, "event": "update", "relevance-score": 100, "content-state": { "currentHealthLevel": 0.941, "eventDescription": "Power Panda found a sword!" } } }
                """
        ) {
            try .update(
                content: ActivityContent(
                    state: AdventureAttributes.ContentState(currentHealthLevel: 0.941, eventDescription: "Power Panda found a sword!"),
                    staleDate: nil, relevanceScore: 100),
                timestamp: talkTimestamp)
        },
        Golden(
            name: "Apple's push-to-start example",
            json: """
                {"aps":{"timestamp":1685952000,"event":"start","content-state":{"currentHealthLevel":100,"eventDescription":"Adventure has begun!"},"attributes-type":"AdventureAttributes","attributes":{"hero":{"name":"Power Panda","avatar":"U+1F43C","healthLevel":100,"heroType":"Forest Dweller","healthRecoveryRatePerHour":0.25,"url":"game:///panda","battleCode":"game:///panda/battle","level":3,"exp":600,"bio":"..."}},"alert":{"title":{"loc-key":"%@ is on an adventure!","loc-args":["Power Panda"]},"body":{"loc-key":"%@ found a sword!","loc-args":["Power Panda"]},"sound":"chime.aiff"}}}
                """
        ) {
            try .start(
                attributes: AdventureAttributes(
                    hero: .init(
                        name: "Power Panda", avatar: "U+1F43C", healthLevel: 100, heroType: "Forest Dweller",
                        healthRecoveryRatePerHour: 0.25, url: "game:///panda", battleCode: "game:///panda/battle", level: 3, exp: 600, bio: "...")),
                content: ActivityContent(
                    state: AdventureAttributes.ContentState(currentHealthLevel: 100, eventDescription: "Adventure has begun!"), staleDate: nil),
                alert: AlertConfiguration(
                    title: .localized(key: "%@ is on an adventure!", arguments: ["Power Panda"]),
                    body: .localized(key: "%@ found a sword!", arguments: ["Power Panda"]),
                    sound: .named("chime.aiff")),
                timestamp: talkTimestamp)
        },
    ]

    @Test(arguments: goldens)
    func rebuiltFromTypedValues(_ golden: Golden) throws {
        let expected = try JSONValue(parsing: golden.json)
        let built = try golden.build()
        #expect(jsonEquivalent(built.json, expected), "built \(built.json.serializedString)")
        // And it passes our own rules for a device push.
        _ = try built.encoded(for: .device)
    }

    @Test func updateBytesAreExactlyTheTalksPayloadCompacted() throws {
        let built = try GoldenPayloadTests.goldens[0].build()
        #expect(
            built.json.serializedString
                == #"{"aps":{"timestamp":1685952000,"event":"update","content-state":{"currentHealthLevel":0.941,"eventDescription":"Power Panda found a sword!"}}}"#
        )
    }

    @Test(arguments: goldens)
    func rawJSONPassesThroughUnchanged(_ golden: Golden) throws {
        // The talk's text, compacted, is what we send when given as raw JSON: same keys, same order,
        // same number literals (0.0 stays 0.0).
        let compact = try JSONValue(parsing: golden.json).serializedString
        let payload = try LiveActivityPayload(parsing: Array(golden.json.utf8))
        #expect(String(decoding: try payload.encoded(for: .device), as: UTF8.self) == compact)
    }
}

@Suite struct DateEncodingTests {
    struct Delivery: ActivityAttributes {
        struct ContentState: Codable, Hashable {
            var driverName: String
            var estimatedDeliveryTime: ClosedRange<Date>
            var updatedAt: Date
        }
        var orderNumber: Int
    }

    @Test func contentStateIsEncodedExactlyAsFoundationsDefaultJSONEncoder() throws {
        let state = Delivery.ContentState(
            driverName: "Alex",
            estimatedDeliveryTime: Date(timeIntervalSince1970: 1_685_952_000)...Date(timeIntervalSince1970: 1_685_953_800),
            updatedAt: Date(timeIntervalSince1970: 1_685_952_000.5))
        let payload = try LiveActivityPayload.update(
            content: ActivityContent(state: state, staleDate: nil), timestamp: Date(timeIntervalSince1970: 1_685_952_000))
        let foundation = try JSONValue(parsing: Array(JSONEncoder().encode(state)))
        // Same values and number literals; key order is not stable even between two JSONEncoder runs.
        #expect(payload.aps?["content-state"]?.sortedKeys == foundation.sortedKeys)
        #expect(foundation["updatedAt"] == .number("707644800.5"))
    }

    @Test func dateIsSecondsSince2001AndRangeIsATwoElementArray() throws {
        let state = Delivery.ContentState(
            driverName: "Alex",
            estimatedDeliveryTime: Date(timeIntervalSince1970: 1_685_952_000)...Date(timeIntervalSince1970: 1_685_953_800),
            updatedAt: Date(timeIntervalSince1970: 1_685_952_000))
        let json = try JSONValue(encoding: state)
        // UNIX 1685952000 is 707644800 seconds after 2001-01-01.
        #expect(json["updatedAt"]?.doubleValue == 707_644_800)
        guard case .array(let bounds) = json["estimatedDeliveryTime"] else {
            Issue.record("a ClosedRange<Date> must encode as an array, got \(json["estimatedDeliveryTime"]?.typeName ?? "nothing")")
            return
        }
        #expect(bounds.map(\.doubleValue) == [707_644_800, 707_646_600])
    }

    @Test func apsDatesAreUNIXSeconds() throws {
        let stale = Date(timeIntervalSince1970: 1_685_959_200.9)
        let payload = try LiveActivityPayload.update(
            content: ActivityContent(state: AdventureAttributes.ContentState(currentHealthLevel: 1, eventDescription: ""), staleDate: stale),
            timestamp: Date(timeIntervalSince1970: 1_685_952_000))
        #expect(payload.aps?["timestamp"] == .number("1685952000"))
        #expect(payload.aps?["stale-date"] == .number("1685959200"))
    }

    @Test func attributesTypeIsTheBareSwiftTypeName() throws {
        let payload = try LiveActivityPayload.start(
            attributes: Delivery(orderNumber: 42),
            content: ActivityContent(state: .init(driverName: "A", estimatedDeliveryTime: Date()...Date(), updatedAt: Date()), staleDate: nil),
            alert: AlertConfiguration(title: "Order", body: "Started"), timestamp: Date(), inputPush: .token)
        #expect(payload.aps?["attributes-type"] == .string("Delivery"))
        #expect(payload.aps?["attributes"] == .object([("orderNumber", .number("42"))]))
        #expect(payload.aps?["input-push-token"] == .number("1"))
    }

    @Test func dismissalPolicies() throws {
        func dismissal(_ policy: ActivityUIDismissalPolicy) throws -> JSONValue? {
            try LiveActivityPayload.end(
                content: ActivityContent<AdventureAttributes.ContentState>?.none, dismissalPolicy: policy,
                timestamp: Date(timeIntervalSince1970: 1_685_952_000)
            ).aps?["dismissal-date"]
        }
        #expect(try dismissal(.default) == nil)
        #expect(try dismissal(.immediate) == .number("0"))
        #expect(try dismissal(.after(Date(timeIntervalSince1970: 1_685_959_200))) == .number("1685959200"))
    }
}

@Suite struct JSONValueTests {
    @Test func serialisingKeepsKeyOrderAndNumberLiterals() throws {
        let text = #"{"b":1e3,"a":0.10,"c":[true,null,"x\"y\\z\n"],"d":-0,"e":{"":12345678901234567890}}"#
        #expect(try JSONValue(parsing: text).serializedString == text)
    }

    @Test func unicodeEscapesAreDecoded() throws {
        #expect(try JSONValue(parsing: #""\u00e9\ud83d\ude00/\/""#) == .string("é😀//"))
    }

    @Test(arguments: [
        "", "{", "[1,]", "{\"a\":1,}", "01", "1.", "-", "1e", "\"\\x\"", "\"a", "{\"a\":1,\"a\":2}", "nul",
        "[1] 2", "\"\u{01}\"", "\"\\ud800\"", "{1:2}",
    ])
    func invalidJSONIsRejected(_ text: String) {
        #expect(throws: JSONParseError.self) { try JSONValue(parsing: text) }
    }
}
