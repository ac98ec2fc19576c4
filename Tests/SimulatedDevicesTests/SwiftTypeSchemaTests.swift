import Foundation
import LiveActivityKit
import SimulatedDevices
import Testing

/// The schema must accept exactly what `JSONDecoder()` accepts for the real Swift types; each
/// case is decoded both ways and the verdicts compared.
@Suite struct SwiftTypeSchemaTests {
    // The real types, as an app's widget extension declares them.
    enum Step: String, Codable { case preparing, delivering, delivered }
    enum Floor: Int, Codable { case ground = 0, first = 1 }
    struct Driver: Codable {
        var name: String
        var rating: Double?
        var photo: URL?
    }
    struct DeliveryState: Codable {
        var step: Step
        var eta: ClosedRange<Date>
        var itemsLeft: Int
        var driver: Driver?
        var notes: [String]
        var floor: Floor?
        var contactless: Bool
        var updatedAt: Date
    }

    // The same, as a schema.
    static let driver = SwiftStruct(
        "Driver",
        [
            .init("name", .string), .init("rating", .optional(.double)), .init("photo", .optional(.url)),
        ])
    static let schema = SwiftType.structure(
        SwiftStruct(
            "DeliveryState",
            [
                .init("step", .stringEnum(["preparing", "delivering", "delivered"])),
                .init("eta", .closedRangeOfDate),
                .init("itemsLeft", .int),
                .init("driver", .optional(.structure(driver))),
                .init("notes", .array(.string)),
                .init("floor", .optional(.intEnum([0, 1]))),
                .init("contactless", .bool),
                .init("updatedAt", .date),
            ]))

    static let valid =
        #"{"step":"delivering","eta":[785000000,785000900],"itemsLeft":2,"driver":{"name":"Alex","rating":4.9,"photo":"https://example.com/a.png"},"notes":["door"],"floor":1,"contactless":true,"updatedAt":785000000.5}"#

    /// Edits of the valid document: each replaces one member (or removes it with `nil`).
    static let edits: [(String, String?)] = [
        ("step", nil), ("step", #""Delivering""#), ("step", "1"), ("step", "null"),
        ("eta", "[785000900,785000000]"), ("eta", "[785000000]"), ("eta", "[785000000,785000000]"), ("eta", #""soon""#),
        ("eta", "[785000000,785000900,1]"), ("eta", "{}"),
        ("itemsLeft", "2.0"), ("itemsLeft", "2.5"), ("itemsLeft", "2e1"), ("itemsLeft", #""2""#), ("itemsLeft", "-0"),
        ("itemsLeft", "1e30"), ("itemsLeft", "true"), ("itemsLeft", nil),
        ("driver", nil), ("driver", "null"), ("driver", "{}"), ("driver", #"{"name":"A"}"#),
        ("driver", #"{"name":"A","rating":"5"}"#), ("driver", #"{"name":"A","photo":""}"#),
        ("driver", #"{"name":"A","photo":"not a url with spaces"}"#), ("driver", #"{"name":"A","extra":1}"#),
        ("driver", "[]"),
        ("notes", "[]"), ("notes", "[1]"), ("notes", #"["a",null]"#), ("notes", nil), ("notes", #""a""#),
        ("floor", "2"), ("floor", "0"), ("floor", "null"), ("floor", #""1""#), ("floor", "1.0"),
        ("contactless", "1"), ("contactless", #""true""#), ("contactless", "false"),
        ("updatedAt", "0"), ("updatedAt", "-1.5e3"), ("updatedAt", #""2026-11-21T10:00:00Z""#), ("updatedAt", nil),
        ("unknown", "1"),
    ]

    static var cases: [String] {
        let base = try! JSONValue(parsing: valid)
        return [valid, "[]", "null", "{}", "3"]
            + edits.map { key, replacement in
                var members = base.objectMembers!
                if let replacement {
                    let value = try! JSONValue(parsing: replacement)
                    if let index = members.firstIndex(where: { $0.key == key }) { members[index].value = value } else { members.append((key, value)) }
                } else {
                    members.removeAll { $0.key == key }
                }
                return JSONValue.object(members).serializedString
            }
    }

    @Test(arguments: cases)
    func acceptsExactlyWhatJSONDecoderAccepts(_ json: String) throws {
        let decoderAccepts = (try? JSONDecoder().decode(DeliveryState.self, from: Data(json.utf8))) != nil
        let value = try JSONValue(parsing: json)
        var failure: DecodingFailure?
        do {
            try Self.schema.decode(value)
        } catch {
            failure = error
        }
        #expect(
            decoderAccepts == (failure == nil),
            "JSONDecoder \(decoderAccepts ? "accepts" : "refuses"); schema: \(failure.map(String.init(describing:)) ?? "accepts")")
    }

    @Test func aFailureNamesThePathAndTheKind() throws {
        let json = try JSONValue(
            parsing:
                #"{"step":"delivering","eta":[785000000,785000900],"itemsLeft":2,"driver":{"name":7},"notes":[],"contactless":true,"updatedAt":0}"#)
        let failure = #expect(throws: DecodingFailure.self) { try Self.schema.decode(json) }
        #expect(failure?.kind == .typeMismatch)
        #expect(failure?.path == "driver.name")
        let missing = #expect(throws: DecodingFailure.self) { try Self.schema.decode(try JSONValue(parsing: "{}")) }
        #expect(missing?.kind == .keyNotFound && missing?.path == "step")
    }
}
