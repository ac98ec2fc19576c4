import Foundation

/// The Swift type of a field in an app's `ActivityAttributes` or `ContentState`, as far as
/// decoding is concerned. JSON is checked against these types exactly as a default `JSONDecoder`
/// decodes into the real ones, because that is what the widget extension does: a push that does
/// not decode is dropped on the device. The simulated iPhones decode with it, the server refuses
/// with it (`ActivityContract`), and the command line checks with it before sending.
public indirect enum SwiftType: Sendable, Hashable {
    case string
    case int
    /// `Int8` to `Int64`, and `UInt` to `UInt64`: a number that fits.
    case integer(IntegerWidth)
    case double
    /// A number that fits in `Float`.
    case float
    /// `Decimal`: a number, as its text says.
    case decimal
    case bool
    /// `Date` with the default strategy: a number of seconds since 2001-01-01.
    case date
    /// `ClosedRange<Date>`: `[lower, upper]`, lower not after upper.
    case closedRangeOfDate
    case url
    /// `Data` with the default strategy: a string in Base64.
    case data
    /// `UUID`: a string in its canonical form (`E621E1F8-C36C-495A-93FC-0C247A3E6E5F`).
    case uuid
    /// A `String`-backed enum, decoded by raw value.
    case stringEnum([String])
    /// An `Int`-backed enum, decoded by raw value.
    case intEnum([Int])
    case array(SwiftType)
    case structure(SwiftStruct)
    /// An optional field: absent or `null` decodes as `nil` (synthesized `decodeIfPresent`).
    case optional(SwiftType)

    /// How it is written in Swift, for logs.
    public var swiftName: String {
        switch self {
        case .string: "String"
        case .int: "Int"
        case .integer(let width): width.rawValue
        case .double: "Double"
        case .float: "Float"
        case .decimal: "Decimal"
        case .bool: "Bool"
        case .date: "Date"
        case .closedRangeOfDate: "ClosedRange<Date>"
        case .url: "URL"
        case .data: "Data"
        case .uuid: "UUID"
        case .stringEnum: "String enum"
        case .intEnum: "Int enum"
        case .array(let element): "[\(element.swiftName)]"
        case .structure(let type): type.name
        case .optional(let wrapped): "\(wrapped.swiftName)?"
        }
    }
}

/// The integer types besides `Int`, by their Swift names.
public enum IntegerWidth: String, Sendable, Hashable, CaseIterable {
    case int8 = "Int8", int16 = "Int16", int32 = "Int32", int64 = "Int64"
    case uint = "UInt", uint8 = "UInt8", uint16 = "UInt16", uint32 = "UInt32", uint64 = "UInt64"

    /// Whether `JSONDecoder` reads the number `literal` into this type. Plain digits are read
    /// directly; anything else (a fraction, an exponent) the decoder reads in its own way, so it
    /// is asked, as for `Int`.
    func fits(_ literal: String) -> Bool {
        func reads<T: FixedWidthInteger & Decodable>(_: T.Type) -> Bool {
            T(literal) != nil || (try? JSONDecoder().decode(T.self, from: Data(literal.utf8))) != nil
        }
        switch self {
        case .int8: return reads(Int8.self)
        case .int16: return reads(Int16.self)
        case .int32: return reads(Int32.self)
        case .int64: return reads(Int64.self)
        case .uint: return reads(UInt.self)
        case .uint8: return reads(UInt8.self)
        case .uint16: return reads(UInt16.self)
        case .uint32: return reads(UInt32.self)
        case .uint64: return reads(UInt64.self)
        }
    }
}

extension SwiftType {
    /// The types a contract names by their Swift name alone. Computed, as `twinSamples`: a
    /// global holding indirect enums reads as a leak to LeakSanitizer at the fuzzer's exit.
    public static var scalars: [SwiftType] {
        [.string, .int, .double, .float, .decimal, .bool, .date, .closedRangeOfDate, .url, .data, .uuid] + IntegerWidth.allCases.map { .integer($0) }
    }
}

/// A struct with synthesized `Codable`: named fields, decoded by key; keys it does not declare are
/// ignored.
public struct SwiftStruct: Sendable, Hashable {
    public var name: String
    public var fields: [Field]

    public struct Field: Sendable, Hashable {
        public var name: String
        public var type: SwiftType

        public init(_ name: String, _ type: SwiftType) {
            self.name = name
            self.type = type
        }
    }

    public init(_ name: String, _ fields: [Field]) {
        self.name = name
        self.fields = fields
    }
}

/// Why a value did not decode, in `JSONDecoder`'s terms, with the path to the value.
public struct DecodingFailure: Error, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        case keyNotFound, valueNotFound, typeMismatch, dataCorrupted
    }

    public var kind: Kind
    /// Dotted path from the decoded root, such as `driver.eta[1]`.
    public var path: String
    /// `JSONDecoder`'s reason, in its words.
    public var message: String
    /// What the sender probably meant, when the mistake is a common one (a date in the wrong unit).
    public var hint: String?

    public init(kind: Kind, path: String, message: String, hint: String? = nil) {
        self.kind = kind
        self.path = path
        self.message = message
        self.hint = hint
    }

    public var description: String { "\(kind.rawValue) at \(path.isEmpty ? "<root>" : path): \(message)" }

    /// The path under the field that held the decoded value (`contentState.driver.eta[1]`).
    public func path(under field: String) -> String {
        path.isEmpty ? field : path.hasPrefix("[") ? field + path : "\(field).\(path)"
    }

    /// The decoder's reason, and the hint when there is one.
    public var reason: String { message + (hint.map { "; \($0)" } ?? "") }
}

extension SwiftType {
    /// Checks that `JSONDecoder()` would decode `value` into this type (`nil`: the key is absent),
    /// and throws the failure it would report otherwise.
    public func decode(_ value: JSONValue?, path: String = "") throws(DecodingFailure) {
        func fail(_ kind: DecodingFailure.Kind, _ message: String) -> DecodingFailure {
            DecodingFailure(kind: kind, path: path, message: message)
        }
        if case .optional(let wrapped) = self {
            guard let value, value != .null else { return }
            return try wrapped.decode(value, path: path)
        }
        guard let value else { throw fail(.keyNotFound, "no value for the key \"\(path.split(separator: ".").last ?? "")\"") }
        // A struct without fields reads nothing, so it decodes from any value, null included.
        if case .structure(let type) = self, type.fields.isEmpty { return }
        if value == .null { throw fail(.valueNotFound, "expected \(swiftName), found null") }
        switch self {
        case .optional:
            return
        case .string:
            guard case .string = value else { throw fail(.typeMismatch, "expected a string for String, found \(value.typeName)") }
        case .int:
            guard case .number(let literal) = value else { throw fail(.typeMismatch, "expected a number for Int, found \(value.typeName)") }
            guard Self.integer(literal) != nil else { throw fail(.dataCorrupted, "the number \(literal) does not fit in Int") }
        case .integer(let width):
            guard case .number(let literal) = value else { throw fail(.typeMismatch, "expected a number for \(swiftName), found \(value.typeName)") }
            guard width.fits(literal) else { throw fail(.dataCorrupted, "the number \(literal) does not fit in \(swiftName)") }
        case .float:
            guard case .number(let literal) = value else { throw fail(.typeMismatch, "expected a number for Float, found \(value.typeName)") }
            guard Self.float(literal) != nil else { throw fail(.dataCorrupted, "the number \(literal) does not fit in Float") }
        case .decimal:
            guard case .number(let literal) = value else { throw fail(.typeMismatch, "expected a number for Decimal, found \(value.typeName)") }
            guard Self.decimal(literal) else { throw fail(.dataCorrupted, "the number \(literal) does not fit in Decimal") }
        case .data:
            guard case .string(let text) = value else { throw fail(.typeMismatch, "expected a Base64 string for Data, found \(value.typeName)") }
            guard Data(base64Encoded: text) != nil else { throw fail(.dataCorrupted, "the string is not valid Base64") }
        case .uuid:
            guard case .string(let text) = value else { throw fail(.typeMismatch, "expected a string for UUID, found \(value.typeName)") }
            guard UUID(uuidString: text) != nil else { throw fail(.dataCorrupted, "invalid UUID string \"\(text)\"") }
        case .double, .date:
            guard case .number(let literal) = value else {
                var failure = fail(.typeMismatch, "expected a number for \(swiftName), found \(value.typeName)")
                if self == .date { failure.hint = DateUnits.hint(for: value) }
                throw failure
            }
            guard Self.double(literal) != nil else { throw fail(.dataCorrupted, "the number \(literal) does not fit in Double") }
        case .bool:
            guard case .bool = value else { throw fail(.typeMismatch, "expected true or false for Bool, found \(value.typeName)") }
        case .closedRangeOfDate:
            guard case .array(let bounds) = value else {
                throw fail(.typeMismatch, "expected [lower, upper] for ClosedRange<Date>, found \(value.typeName)")
            }
            for index in 0..<2 {
                try SwiftType.date.decode(bounds.indices.contains(index) ? bounds[index] : nil, path: "\(path)[\(index)]")
            }
            if let lower = bounds[0].doubleValue, let upper = bounds[1].doubleValue, lower > upper {
                throw fail(.dataCorrupted, "cannot initialize ClosedRange with a lowerBound (\(lower)) greater than upperBound (\(upper))")
            }
        case .url:
            guard case .string(let text) = value else { throw fail(.typeMismatch, "expected a string for URL, found \(value.typeName)") }
            guard URL(string: text) != nil else { throw fail(.dataCorrupted, "invalid URL string \"\(text)\"") }
        case .stringEnum(let cases):
            guard case .string(let raw) = value else { throw fail(.typeMismatch, "expected a string raw value, found \(value.typeName)") }
            guard cases.contains(raw) else { throw fail(.dataCorrupted, "cannot initialize the enum from invalid String value \(raw)") }
        case .intEnum(let cases):
            guard case .number(let literal) = value else { throw fail(.typeMismatch, "expected a number raw value, found \(value.typeName)") }
            guard let raw = Self.integer(literal) else { throw fail(.dataCorrupted, "the number \(literal) does not fit in Int") }
            guard cases.contains(raw) else { throw fail(.dataCorrupted, "cannot initialize the enum from invalid Int value \(raw)") }
        case .array(let element):
            guard case .array(let elements) = value else { throw fail(.typeMismatch, "expected an array for \(swiftName), found \(value.typeName)") }
            for (index, item) in elements.enumerated() {
                try element.decode(item, path: "\(path)[\(index)]")
            }
        case .structure(let type):
            guard case .object(let members) = value else { throw fail(.typeMismatch, "expected an object for \(type.name), found \(value.typeName)") }
            for field in type.fields {
                let member = members.first { $0.key == field.name }?.value
                try field.type.decode(member, path: path.isEmpty ? field.name : "\(path).\(field.name)")
            }
        }
    }

    /// Dates that decode but were probably meant in another unit (UNIX seconds or milliseconds
    /// where ActivityKit's decoder reads seconds since 2001), each with its path and a hint.
    public func dateWarnings(_ value: JSONValue?, path: String = "") -> [(path: String, hint: String)] {
        guard let value, value != .null else { return [] }
        switch self {
        case .date:
            return DateUnits.hint(for: value).map { [(path, $0)] } ?? []
        case .closedRangeOfDate:
            return (value.arrayElements ?? []).prefix(2).enumerated().flatMap {
                SwiftType.date.dateWarnings($0.element, path: "\(path)[\($0.offset)]")
            }
        case .optional(let wrapped):
            return wrapped.dateWarnings(value, path: path)
        case .array(let element):
            return (value.arrayElements ?? []).enumerated().flatMap { element.dateWarnings($0.element, path: "\(path)[\($0.offset)]") }
        case .structure(let type):
            return type.fields.flatMap { field in
                field.type.dateWarnings(value[field.name], path: path.isEmpty ? field.name : "\(path).\(field.name)")
            }
        default:
            return []
        }
    }

    /// A JSON number literal as `JSONDecoder` reads it into `Int`. Plain digits in range are read
    /// directly. Anything else (a fraction, an exponent) the decoder reads through `Double` and,
    /// from 2^53 on, through `Decimal`, with results only the decoder itself reproduces exactly
    /// (`1e-400` is 0, `9007199254740993.5` is 9007199254740993, `9223372036854775807.0` is
    /// refused), so it is asked; such numbers are rare in an integer field.
    static func integer(_ literal: String) -> Int? {
        if let exact = Int(literal) { return exact }
        return try? JSONDecoder().decode(Int.self, from: Data(literal.utf8))
    }

    /// A JSON number literal as `JSONDecoder` reads it into `Float`. Well inside `Float`'s range
    /// (normal, not near its largest) it is read as any number is; near either end the decoder's
    /// own rounding decides, so it is asked.
    static func float(_ literal: String) -> Float? {
        if let number = Double(literal), number.isFinite,
            number == 0 ? literal.allSatisfy({ $0 == "0" || $0 == "." || $0 == "-" }) : (1e-37...1e38).contains(abs(number))
        {
            return Float(number)
        }
        return try? JSONDecoder().decode(Float.self, from: Data(literal.utf8))
    }

    /// Whether `JSONDecoder` reads a JSON number literal into `Decimal`: asked, as `Decimal`'s
    /// range and parsing are its own (a number over its exponent's range is refused).
    static func decimal(_ literal: String) -> Bool {
        (try? JSONDecoder().decode(Decimal.self, from: Data(literal.utf8))) != nil
    }

    /// A JSON number literal as `JSONDecoder` reads it into `Double` (and `Date`): refused when it
    /// rounds to infinity, or to zero from a number that is not zero (`1e-400`). Zeros written
    /// plainly (`0`, `-0.00`) pass; for any other that reads as zero the decoder is asked, as its
    /// own scan for a true zero also refuses some (`0e1`, `0.000e1`, while `0e0` and `0.0e1` pass).
    static func double(_ literal: String) -> Double? {
        guard let number = Double(literal), number.isFinite else { return nil }
        guard number == 0, !literal.allSatisfy({ $0 == "0" || $0 == "." || $0 == "-" }) else { return number }
        return try? JSONDecoder().decode(Double.self, from: Data(literal.utf8))
    }
}

extension DecodingFailure {
    /// Decodes `json` into the real type with a default `JSONDecoder`, reporting a failure in the
    /// same terms as a schema.
    public static func decode<Value: Decodable>(_ type: Value.Type, from json: JSONValue) throws(DecodingFailure) {
        do {
            _ = try json.decoded(as: Value.self)
        } catch let error as DecodingError {
            let kind: Kind
            let message: String
            switch error {
            case .keyNotFound(_, let context): (kind, message) = (.keyNotFound, context.debugDescription)
            case .valueNotFound(_, let context): (kind, message) = (.valueNotFound, context.debugDescription)
            case .typeMismatch(_, let context): (kind, message) = (.typeMismatch, context.debugDescription)
            case .dataCorrupted(let context): (kind, message) = (.dataCorrupted, context.debugDescription)
            @unknown default: (kind, message) = (.dataCorrupted, "\(error)")
            }
            throw DecodingFailure(kind: kind, path: error.valuePath, message: message)
        } catch {
            throw DecodingFailure(kind: .dataCorrupted, path: "", message: "\(error)")
        }
    }
}

/// ActivityKit's widget decodes `Date` with a default `JSONDecoder`: seconds since
/// 2001-01-01T00:00:00Z (`timeIntervalSinceReferenceDate`), not the UNIX seconds APNs uses in
/// `aps`. The usual mistakes are easy to spot.
enum DateUnits {
    /// What to send instead of `value`, when it looks like a date in another unit.
    static func hint(for value: JSONValue) -> String? {
        let rule = "ActivityKit's default decoder reads a Date as seconds since 2001-01-01T00:00:00Z"
        switch value {
        case .string(let text):
            guard let date = ISO8601DateFormatter().date(from: text) else { return "\(rule), as a number" }
            return "\(rule): for \(text) send \(Self.literal(date.timeIntervalSinceReferenceDate))"
        case .number(let literal):
            guard let number = Double(literal), number.isFinite else { return nil }
            // As seconds since 2001, anything past 2048 is more likely UNIX seconds (or milliseconds).
            if number >= 1e11, number < 1e14 {
                let date = Date(timeIntervalSince1970: number / 1000)
                return "\(rule); \(literal) looks like UNIX milliseconds (\(date.iso8601)): send \(Self.literal(date.timeIntervalSinceReferenceDate))"
            }
            if number >= 1.5e9, number < 1e11 {
                let date = Date(timeIntervalSince1970: number)
                return "\(rule); \(literal) looks like UNIX seconds (\(date.iso8601)): send \(Self.literal(date.timeIntervalSinceReferenceDate))"
            }
            return nil
        default:
            return nil
        }
    }

    private static func literal(_ seconds: Double) -> String {
        seconds == seconds.rounded() && abs(seconds) < 1e15 ? String(Int64(seconds)) : String(seconds)
    }
}
