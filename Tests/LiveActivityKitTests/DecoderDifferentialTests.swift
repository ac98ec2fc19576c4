import Foundation
import JSONDecoderDifferential
import LiveActivityKit
import PropertyBased
import Testing

/// The contract checks (the server's `422`, the simulated iPhones' drops, `push --contract`)
/// accept a JSON text for a schema if and only if `JSONDecoder` decodes it into the real Swift
/// type the schema stands for. Each case is decided both ways in this process, by
/// swift-foundation's decoder, the one a widget runs.
@Suite struct DecoderDifferentialTests {
    /// A case: a random schema (up to three fields, nested three levels) and a text for it.
    static let cases = Generator<DifferentialCase, Shrink.None<DifferentialCase>>(run: { random in
        DifferentialCase(seed: random.next())
    })

    @Test func randomSchemasDecideAsJSONDecoder() async throws {
        await propertyCheck(count: 6000, input: Self.cases) { item in
            let verdicts = try DecoderVerdicts(item.text, as: item.schema)
            #expect(verdicts.agree, "\(item): \(verdicts)")
            #expect(item.readerIsRight(verdicts), "\(item): \(verdicts)")
        }
    }

    /// Every kind of type alone, required and optional, so each meets its edges often.
    static let leaves: [SwiftType] =
        SwiftType.scalars + [
            SwiftType.twinStringEnum, SwiftType.twinIntEnum, .array(.int), .array(.optional(.double)), .optional(.optional(.int)),
            .structure(SwiftStruct("Twin", [])),
        ]

    @Test(arguments: leaves)
    func eachTypeDecidesAsJSONDecoder(_ leaf: SwiftType) async throws {
        for field in [leaf, .optional(leaf)] {
            let schema = SwiftType.structure(SwiftStruct("Twin", [.init("a", field)]))
            let documents = Generator<DifferentialCase, Shrink.None<DifferentialCase>>(run: { random in
                DifferentialCase(seed: random.next(), schema: schema)
            })
            await propertyCheck(count: 1500, input: documents) { item in
                let verdicts = try DecoderVerdicts(item.text, as: item.schema)
                #expect(verdicts.agree, "\(item): \(verdicts)")
                #expect(item.readerIsRight(verdicts), "\(item): \(verdicts)")
                #expect(item.readerIsRight(verdicts), "\(item): \(verdicts)")
            }
        }
    }

    /// The generator makes what it should: texts both accept and texts both refuse, for every kind
    /// of type, so agreement is not agreement on nothing.
    @Test func theCasesHoldAcceptancesAndRefusals() throws {
        var accepted = 0
        var refused = 0
        for seed in 0..<2000 as Range<UInt64> {
            let item = DifferentialCase(seed: seed)
            let verdicts = try DecoderVerdicts(item.text, as: item.schema)
            if verdicts.decoder == nil { accepted += 1 } else { refused += 1 }
        }
        #expect(accepted > 400 && refused > 400, "accepted \(accepted), refused \(refused)")
    }

    /// Every generated schema survives its contract JSON, as an app registers it: `Int` raw values
    /// past 2^53 (`Level.maximum`) were read through `Double` and came back changed.
    @Test func eachSchemaSurvivesItsContractJSON() throws {
        for seed in 0..<500 as Range<UInt64> {
            guard case .structure(let state) = DifferentialCase(seed: seed).schema else { continue }
            let contract = ActivityContract(
                attributesType: "Twin", attributes: SwiftStruct("Twin", []), contentState: SwiftStruct("ContentState", state.fields))
            #expect(try ActivityContract(json: contract.json) == contract, "\(contract.json.serializedString)")
        }
        let exact = try ActivityContract(
            json: try JSONValue(parsing: #"{"name":"T","attributes":{},"contentState":{"l":{"enum":[9007199254740993]}}}"#))
        #expect(exact.contentState.fields.first?.type == .intEnum([9_007_199_254_740_993]))
    }

    /// Each disagreement the differential test found, decided by JSONDecoder as written here.
    struct Found: Sendable, CustomTestStringConvertible {
        var schema: SwiftType
        var text: String
        var decodes: Bool
        var testDescription: String { "\(schema.contractJSON) ← \(text)" }
    }

    static func field(_ type: SwiftType) -> SwiftType { .structure(SwiftStruct("Twin", [.init("a", type)])) }

    static let found: [Found] = [
        // A struct without fields decodes from any value, null included; only a missing key fails.
        Found(schema: field(.structure(SwiftStruct("Twin", []))), text: #"{"a":5}"#, decodes: true),
        Found(schema: field(.structure(SwiftStruct("Twin", []))), text: #"{"a":null}"#, decodes: true),
        Found(schema: field(.structure(SwiftStruct("Twin", []))), text: #"{"a":[]}"#, decodes: true),
        Found(schema: field(.structure(SwiftStruct("Twin", []))), text: #"{}"#, decodes: false),
        Found(schema: .structure(SwiftStruct("Twin", [])), text: "null", decodes: true),
        // Int: a number that is not plainly an integer goes through Double, and past 2^53 through Decimal.
        Found(schema: field(.int), text: #"{"a":9.2e18}"#, decodes: true),
        Found(schema: field(.int), text: #"{"a":9223372036854775807.0}"#, decodes: false),
        Found(schema: field(.int), text: #"{"a":-9223372036854775808.0}"#, decodes: false),
        Found(schema: field(.int), text: #"{"a":9007199254740993.5}"#, decodes: true),
        Found(schema: field(.int), text: #"{"a":1e-400}"#, decodes: true),
        Found(schema: field(.int), text: #"{"a":1.5}"#, decodes: false),
        // Double and Date: a number that rounds to infinity or to zero (but is not zero) is refused.
        Found(schema: field(.double), text: #"{"a":1e-400}"#, decodes: false),
        Found(schema: field(.double), text: #"{"a":2e-324}"#, decodes: false),
        Found(schema: field(.double), text: #"{"a":0e-400}"#, decodes: true),
        Found(schema: field(.date), text: #"{"a":1.7976931348623159e308}"#, decodes: false),
        Found(schema: field(.double), text: #"{"a":4e-324}"#, decodes: true),
        // The decoder's own scan for a true zero refuses some: `0e1` and `0.000e1`, not `0e0` or `0.0e1`.
        Found(schema: field(.date), text: #"{"a":0e4}"#, decodes: false),
        Found(schema: field(.double), text: #"{"a":0.000e1}"#, decodes: false),
        Found(schema: field(.double), text: #"{"a":0.0e1}"#, decodes: true),
        Found(schema: field(.int), text: #"{"a":0e4}"#, decodes: true),
        // A fraction too small for Double, written without an exponent: not zero, so refused.
        Found(schema: field(.double), text: #"{"a":0.\#(String(repeating: "0", count: 400))1}"#, decodes: false),
        Found(schema: field(.double), text: #"{"a":-0.000}"#, decodes: true),
        // The text: one byte-order mark before it is allowed.
        Found(schema: field(.string), text: "\u{FEFF}{\"a\":\"x\"}", decodes: true),
        Found(schema: field(.string), text: "\u{FEFF}\u{FEFF}{\"a\":\"x\"}", decodes: false),
        Found(schema: field(.string), text: " \u{FEFF}{\"a\":\"x\"}", decodes: false),
    ]

    @Test(arguments: found)
    func eachFoundDisagreementIsDecidedAsJSONDecoder(_ item: Found) throws {
        let verdicts = try DecoderVerdicts(Array(item.text.utf8), as: item.schema)
        #expect((verdicts.decoder == nil) == item.decodes, "JSONDecoder itself: \(verdicts)")
        #expect(verdicts.agree, "\(verdicts)")
    }

    /// Texts `JSONDecoder` takes that the JSON reader refuses by design (the server answers `400`):
    /// a key twice (the decoder reads the first), a trailing comma, and what is not JSON in a value
    /// the type never reads (the decoder checks a value only when it reads it).
    @Test(arguments: [
        #"{"a":1,"\u0061":2}"#, #"{"a":1,}"#, #"{"a":1,"b":[1,]}"#, #"{"a":1,"b":1e}"#, #"{"a":1,"b":01}"#, #"{"a":1,"b":"\x"}"#,
        #"{"a":1,"b":"\ud800"}"#, "{\"a\":1,\"b\":\"\n\"}",
    ])
    func whatIsNotJSONIsRefusedByTheReaderAlone(_ text: String) throws {
        let verdicts = try DecoderVerdicts(Array(text.utf8), as: Self.field(.int))
        #expect(verdicts.decoder == nil, "JSONDecoder itself: \(verdicts)")
        #expect(verdicts.readerRefusal != nil)
        #expect(text.contains("u0061") == (verdicts.readerRefusal?.duplicateKey == "a"))
    }
}
