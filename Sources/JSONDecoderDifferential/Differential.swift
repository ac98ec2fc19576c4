import Foundation
import LiveActivityKit

/// One JSON text decoded both ways: by `JSONDecoder` into the schema's real twin, and by our
/// checker (the JSON reader the server and the simulated iPhones read with, then the schema).
public struct DecoderVerdicts: CustomStringConvertible {
    /// `nil` when `JSONDecoder` decodes the text; its error otherwise.
    public var decoder: (any Error)?
    /// `nil` when the checker accepts the text; its reason otherwise.
    public var checker: (any Error)?

    public init(_ text: [UInt8], as schema: SwiftType) throws(TwinError) {
        let type = try schema.twin()
        decoder = decodingError(type, Data(text))
        do {
            try schema.decode(try JSONValue(parsing: text))
            checker = nil
        } catch {
            checker = error
        }
    }

    /// Whether the JSON reader took the text: when it did not, the checker never ran.
    public var readerRefusal: JSONParseError? { checker as? JSONParseError }

    /// For a text that is JSON (the reader takes it), whether both accept or both refuse. The
    /// reader's own refusals are not `JSONDecoder`'s business: it refuses every text that is not
    /// JSON (RFC 8259) and an object with a key twice, where `JSONDecoder` is lenient (it takes a
    /// trailing comma, the first of two keys, and checks a number or a string only when it reads
    /// it). APNs takes only JSON, and the server answers such a text `400`, queueing nothing.
    public var agree: Bool {
        readerRefusal != nil || (decoder == nil) == (checker == nil)
    }

    public var description: String {
        "JSONDecoder \(decoder.map { "refuses (\($0))" } ?? "accepts"); the checker \(checker.map { "refuses (\($0))" } ?? "accepts")"
    }
}

private func decodingError<T: Decodable>(_: T.Type, _ data: Data) -> (any Error)? {
    do {
        _ = try JSONDecoder().decode(T.self, from: data)
        return nil
    } catch {
        return error
    }
}

extension SwiftType {
    /// The type as a contract writes it (`{"a": "Int?"}`), for reports.
    public var contractJSON: String {
        guard case .structure(let type) = self else { return swiftName }
        let contract = ActivityContract(attributesType: type.name, attributes: SwiftStruct(type.name, []), contentState: type)
        return contract.json["contentState"]?.serializedString ?? swiftName
    }
}

extension SwiftType {
    /// Schemas with every kind of type, for texts from outside (the fuzzer's): all optional at
    /// first, so that many texts decode, then required, nested and without fields.
    public static var twinSamples: [SwiftType] {
        func twin(_ fields: [SwiftType]) -> SwiftType {
            .structure(SwiftStruct("Twin", zip(twinFieldNames, fields).map { SwiftStruct.Field($0, $1) }))
        }
        return [
            twin([.optional(.int), .optional(.double), .optional(.array(.optional(.date)))]),
            twin([.optional(.string), .optional(.url), .optional(.closedRangeOfDate)]),
            twin([.optional(.float), .optional(.decimal), .optional(.integer(.uint8))]),
            twin([.optional(.data), .optional(.uuid), .optional(.array(.integer(.int64)))]),
            twin([.optional(twinStringEnum), .optional(twinIntEnum), .optional(twin([.bool, .optional(.optional(.int)), twin([])]))]),
            twin([.int, .array(.string), twin([])]),
            twin([]),
        ]
    }
}

/// SplitMix64: a small seeded generator, so a case is made again from its seed alone.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A schema and a text made for it from one seed.
public struct DifferentialCase: Sendable, CustomStringConvertible {
    public var seed: UInt64
    public var schema: SwiftType
    public var text: [UInt8]
    /// Whether the text is JSON (RFC 8259), as it was made; nil when not known (cut short).
    public var isJSON: Bool?
    public var hasKeyTwice: Bool

    /// A random schema and a text for it.
    public init(seed: UInt64) {
        var generator = DocumentGenerator(random: SplitMix64(seed: seed))
        self.init(seed: seed, schema: generator.schema(), generator: &generator)
    }

    /// A text for `schema`.
    public init(seed: UInt64, schema: SwiftType) {
        var generator = DocumentGenerator(random: SplitMix64(seed: seed))
        self.init(seed: seed, schema: schema, generator: &generator)
    }

    private init(seed: UInt64, schema: SwiftType, generator: inout DocumentGenerator) {
        self.seed = seed
        self.schema = schema
        self.text = generator.document(for: schema)
        self.isJSON = generator.isJSON
        self.hasKeyTwice = generator.hasKeyTwice
    }

    /// Whether the JSON reader decided the text as it was made: it takes JSON, refuses a key twice
    /// and refuses what is not JSON.
    public func readerIsRight(_ verdicts: DecoderVerdicts) -> Bool {
        switch isJSON {
        case true?: hasKeyTwice ? verdicts.readerRefusal?.duplicateKey != nil : verdicts.readerRefusal == nil
        case false?: verdicts.readerRefusal != nil
        case nil: true
        }
    }

    public var description: String {
        let text = String(decoding: text, as: UTF8.self).debugDescription
        let kind = isJSON.map { $0 ? (hasKeyTwice ? "JSON with a key twice" : "JSON") : "not JSON" } ?? "cut short"
        return "seed \(seed): \(schema.contractJSON) ← \(text) (\(kind))"
    }
}
