import Foundation
import LiveActivityKit
@_spi(Adapter) import LiveRelayKit
import Testing

/// A delivery app's types, as an app declares them for its widget.
struct DeliveryAttributes: Codable {
    struct ContentState: Codable, Hashable {
        enum Step: String, Codable, CaseIterable { case preparing, onTheWay = "on the way", delivered }
        struct Driver: Codable, Hashable {
            var name: String
            var photo: URL?
        }
        var step: Step
        var eta: ClosedRange<Date>
        var driver: Driver?
        var stops: [Int]
        var rating: Double
        var late: Bool
    }
    var activityKey: String
    var orderNumber: Int
    var placedAt: Date
}

struct Ledger: Codable {
    var entries: [String: Int]
}

struct Recursive: Codable {
    var child: [Recursive]
}

/// The contract comes from the app's Swift types, so the server checks what the widget decodes.
struct ContractDerivationTests {
    @Test func theContractIsReadFromTheAppsOwnTypes() throws {
        let shape = try ActivityContractShape(
            attributesType: "DeliveryAttributes", attributes: DeliveryAttributes.self, contentState: DeliveryAttributes.ContentState.self)
        #expect(shape.attributes == ["activityKey": .named("String"), "orderNumber": .named("Int"), "placedAt": .named("Date")])
        #expect(
            shape.contentState == [
                "step": .enumeration(["preparing", "on the way", "delivered"]), "eta": .named("ClosedRange<Date>"),
                "driver": .optional(.fields(["name": .named("String"), "photo": .optional(.named("URL"))])),
                "stops": .array(.named("Int")), "rating": .named("Double"), "late": .named("Bool"),
            ])
    }

    @Test func whatAContractCannotSayIsRefusedNamingTheField() {
        #expect(throws: UnsupportedContractType(path: "entries", reason: "a dictionary: a contract names each field")) {
            try ActivityContractShape(attributesType: "Ledger", attributes: Ledger.self, contentState: Ledger.self)
        }
        // A recursive type stops at the nesting limit instead of recursing for ever.
        let recursive = #expect(throws: UnsupportedContractType.self) {
            try ActivityContractShape(attributesType: "Recursive", attributes: Recursive.self, contentState: Recursive.self)
        }
        #expect(recursive?.reason.contains("nested more than 32 levels") == true)
        #expect(recursive?.path.hasPrefix("child.[].child.[]") == true)
    }
}

/// Every kind of field `JSONDecoder` decodes, as other people's apps declare them.
struct Gauge: Codable, Hashable {
    enum Level: Int, Codable, CaseIterable { case low = 1, high = 2 }
    var progress: Float
    var total: Decimal
    var id: UUID
    var thumbnail: Data
    var link: URL
    var at: Date
    var tiny: Int8
    var small: Int16
    var medium: Int32
    var large: Int64
    var count: UInt
    var byte: UInt8
    var port: UInt16
    var flags: UInt32
    var huge: UInt64
    var level: Level
    var samples: [Float]?
    var note: String?
}

/// An enum of raw values that lists no cases: its contract cannot name them.
struct Tagged: Codable {
    enum Tag: String, Codable { case new, old }
    var tag: Tag
}

/// A type that decodes itself from a value of its own type (by hand, in one value).
struct Looping: Codable {
    init(from decoder: any Decoder) throws { self = try decoder.singleValueContainer().decode(Looping.self) }
    func encode(to encoder: any Encoder) throws {}
}

struct EveryKindTests {
    /// The contract names each type; the server's check (LiveActivityKit's, which the differential
    /// test holds to `JSONDecoder`) takes what `JSONEncoder` writes of a real value and refuses
    /// what the widget would drop.
    @Test func aTypeWithEveryKindOfFieldGetsAContractTheServerChecksAsJSONDecoderDoes() throws {
        let shape = try ActivityContractShape(attributesType: "Gauge", attributes: Gauge.self, contentState: Gauge.self)
        #expect(shape.contentState["progress"] == .named("Float"))
        #expect(shape.contentState["total"] == .named("Decimal"))
        #expect(shape.contentState["id"] == .named("UUID"))
        #expect(shape.contentState["thumbnail"] == .named("Data"))
        #expect(shape.contentState["huge"] == .named("UInt64"))
        #expect(shape.contentState["samples"] == .optional(.array(.named("Float"))))
        // Optional through the decoder's own overload for String: optional in the contract too.
        #expect(shape.contentState["note"] == .optional(.named("String")))
        #expect(shape.contentState["level"] == .integerEnumeration([1, 2]))
        // As LiveRelayKit registers it (`PUT /v1/contracts/Gauge`) and the server reads it.
        let sent = try JSONValue(parsing: Array(try JSONEncoder().encode(shape)))
        let contract = try ActivityContract(
            json: .object([("attributes", try #require(sent["attributes"])), ("contentState", try #require(sent["contentState"]))]), name: "Gauge")
        let gauge = Gauge(
            progress: 0.25, total: Decimal(string: "12.50")!, id: UUID(), thumbnail: Data([1, 2, 3]), link: URL(string: "https://example.com")!,
            at: Date(timeIntervalSinceReferenceDate: 800_000_000), tiny: -128, small: 300, medium: -70_000, large: 1 << 40, count: 7, byte: 255,
            port: 443, flags: 1 << 31, huge: .max, level: .high, samples: [0.5], note: nil)
        let encoded = try JSONValue(parsing: Array(try JSONEncoder().encode(gauge)))
        try contract.checkContentState(encoded)
        func refused(_ field: String, _ value: JSONValue) -> DecodingFailure? {
            let members = (encoded.objectMembers ?? []).map { $0.key == field ? ($0.key, value) : $0 }
            do throws(DecodingFailure) {
                try contract.checkContentState(.object(members))
                return nil
            } catch {
                return error
            }
        }
        #expect(refused("progress", .number("3.5e38"))?.path == "progress")
        #expect(refused("byte", .integer(256))?.path == "byte")
        #expect(refused("count", .integer(-1))?.path == "count")
        #expect(refused("id", .string("not-a-uuid"))?.path == "id")
        #expect(refused("thumbnail", .string("@@@"))?.path == "thumbnail")
        #expect(refused("total", .string("12.50"))?.path == "total")
    }

    @Test func whatNoContractCanSayIsRefusedWithItsReasonNeverATrap() {
        let tagged = #expect(throws: UnsupportedContractType.self) {
            try ActivityContractShape(attributesType: "Tagged", attributes: Tagged.self, contentState: Tagged.self)
        }
        #expect(tagged?.path == "tag" && tagged?.reason.contains("not CaseIterable") == true, "\(String(describing: tagged))")
        let looping = #expect(throws: UnsupportedContractType.self) {
            try ActivityContractShape(attributesType: "Looping", attributes: Looping.self, contentState: Looping.self)
        }
        #expect(looping?.reason.contains("decodes itself from a value of its own type") == true, "\(String(describing: looping))")
    }
}
