import Foundation
import LiveRelayKit
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
