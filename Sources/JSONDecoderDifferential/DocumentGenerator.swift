import Foundation
import LiveActivityKit

/// Random schemas that have a real twin, and random JSON texts for them: mostly what the type
/// expects, spelled in every way JSON allows, with values at the edges of what decodes (numbers at
/// the edges of `Int` and `Double`, in fractions and exponents, strings with escapes, nulls, keys
/// missing, added or twice) and now and then text that is not JSON at all.
public struct DocumentGenerator {
    public var random: SplitMix64
    /// The chance of a value of another kind than the type expects.
    public var mutationRate = 0.12

    /// Whether the last document is JSON (RFC 8259): false once a piece that is not JSON went in,
    /// nil when that is not known (the text was cut short).
    public private(set) var isJSON: Bool? = true
    /// Whether the last document has an object with a key twice.
    public private(set) var hasKeyTwice = false

    public init(random: SplitMix64) { self.random = random }

    // MARK: Schemas

    /// A struct of up to three fields, nesting up to `depth` more levels.
    public mutating func schema(depth: Int = 3) -> SwiftType {
        let count = Int.random(in: 0...3, using: &random)
        let fields = SwiftType.twinFieldNames.prefix(count).map { SwiftStruct.Field($0, fieldType(depth: depth)) }
        return .structure(SwiftStruct("Twin", fields))
    }

    private mutating func fieldType(depth: Int) -> SwiftType {
        let type = type(depth: depth)
        return chance(0.35) ? .optional(type) : type
    }

    private mutating func type(depth: Int) -> SwiftType {
        let leaves: [SwiftType] = SwiftType.scalars + [SwiftType.twinStringEnum, SwiftType.twinIntEnum]
        guard depth > 0, chance(0.3) else { return leaves.randomElement(using: &random)! }
        switch Int.random(in: 0..<3, using: &random) {
        case 0: return .array(chance(0.25) ? .optional(type(depth: depth - 1)) : type(depth: depth - 1))
        case 1: return .optional(type(depth: depth - 1))
        default: return schema(depth: depth - 1)
        }
    }

    // MARK: Documents

    /// A JSON text (UTF-8 bytes, not always valid) for `type`.
    public mutating func document(for type: SwiftType) -> [UInt8] {
        isJSON = true
        hasKeyTwice = false
        var out: [UInt8] = []
        if chance(0.02) { out += [0xEF, 0xBB, 0xBF] }
        if chance(0.05) { out += Array(whitespace().utf8) }
        value(for: type, into: &out)
        if chance(0.05) { out += Array(whitespace().utf8) }
        if chance(0.02) { notJSON(pick(Self.textAfter), into: &out) }
        if chance(0.02), !out.isEmpty {
            out.removeLast(Int.random(in: 1...out.count, using: &random))
            isJSON = nil
        }
        return out
    }

    private mutating func value(for type: SwiftType, into out: inout [UInt8]) {
        if chance(mutationRate) { return anyValue(into: &out, depth: 2) }
        switch type {
        case .string: string(into: &out)
        case .int: out += Array(intLiteral().utf8)
        case .integer: out += Array((chance(0.3) ? pick(Self.widthEdges) : intLiteral()).utf8)
        case .float: out += Array((chance(0.3) ? pick(Self.floatEdges) : doubleLiteral()).utf8)
        case .decimal: out += Array((chance(0.2) ? pick(Self.decimalEdges) : doubleLiteral()).utf8)
        case .data: quoted(pick(Self.base64Texts), into: &out)
        case .uuid: quoted(pick(Self.uuidTexts), into: &out)
        case .double, .date:
            if type == .date, chance(0.05) { return out += Array(pick(Self.dateStrings).utf8) }
            out += Array(doubleLiteral().utf8)
        case .bool: out += Array((chance(0.5) ? "true" : "false").utf8)
        case .closedRangeOfDate:
            let count = chance(0.85) ? 2 : Int.random(in: 0...3, using: &random)
            var bounds = (0..<count).map { _ in doubleLiteral() }
            if count == 2, chance(0.6), let lower = Double(bounds[0]), let upper = Double(bounds[1]), lower > upper { bounds.swapAt(0, 1) }
            out.append(UInt8(ascii: "["))
            for (index, bound) in bounds.enumerated() {
                if index > 0 { separator(",", into: &out) }
                out += Array(bound.utf8)
            }
            out.append(UInt8(ascii: "]"))
        case .url: quoted(pick(Self.urls), into: &out)
        case .stringEnum(let cases):
            quoted(
                chance(0.8) ? cases.randomElement(using: &random)! : pick(["Preparing", "cafe\\u0301", "", "caf\\u00e9", "delivering "]), into: &out)
        case .intEnum(let cases):
            out += Array(
                (chance(0.7)
                    ? String(cases.randomElement(using: &random)!) : pick(["2", "1.0", "1e0", "-1.0", "0.5", "9.223372036854775807e18", "-0"])).utf8)
        case .array(let element):
            out.append(UInt8(ascii: "["))
            let count = Int.random(in: 0...3, using: &random)
            for index in 0..<count {
                if index > 0 { separator(",", into: &out) }
                value(for: element, into: &out)
            }
            if count > 0, chance(0.01) { notJSON(",", into: &out) }
            out.append(UInt8(ascii: "]"))
        case .optional(let wrapped):
            if chance(0.3) { out += Array("null".utf8) } else { value(for: wrapped, into: &out) }
        case .structure(let type):
            var members: [Member] = []
            for field in type.fields where !chance(field.type.isOptional ? 0.3 : 0.06) {
                members.append(.field(key: field.name, field.type))
            }
            if chance(0.15) { members.append(.other(key: pick(Self.otherKeys))) }
            if chance(0.04), case .field(let key, let type)? = members.randomElement(using: &random) {
                // The same key again, as written or escaped (`\u0061` is `a`).
                let escaped = "\\u00" + String(key.utf8.first!, radix: 16)
                members.append(.field(key: pick([key, escaped]), type))
                hasKeyTwice = true
            }
            members.shuffle(using: &random)
            out.append(UInt8(ascii: "{"))
            for (index, member) in members.enumerated() {
                if index > 0 { separator(",", into: &out) }
                switch member {
                case .field(let key, let type):
                    quoted(key, into: &out)
                    separator(":", into: &out)
                    value(for: type, into: &out)
                case .other(let key):
                    quoted(key, into: &out)
                    separator(":", into: &out)
                    anyValue(into: &out, depth: 1)
                }
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private enum Member {
        case field(key: String, SwiftType)
        case other(key: String)
    }

    /// Any JSON value at all: the wrong kind for the type, most of the time.
    private mutating func anyValue(into out: inout [UInt8], depth: Int) {
        switch Int.random(in: 0..<(depth > 0 ? 8 : 6), using: &random) {
        case 0: out += Array("null".utf8)
        case 1: out += Array((chance(0.5) ? "true" : "false").utf8)
        case 2: out += Array(intLiteral().utf8)
        case 3: out += Array(doubleLiteral().utf8)
        case 4: string(into: &out)
        case 5: notJSON(pick(Self.notJSON), into: &out)
        case 6:
            out.append(UInt8(ascii: "["))
            for index in 0..<Int.random(in: 0...2, using: &random) {
                if index > 0 { separator(",", into: &out) }
                anyValue(into: &out, depth: depth - 1)
            }
            out.append(UInt8(ascii: "]"))
        default:
            out.append(UInt8(ascii: "{"))
            quoted(pick(["a", "b", "c"] + Self.otherKeys), into: &out)
            separator(":", into: &out)
            anyValue(into: &out, depth: depth - 1)
            out.append(UInt8(ascii: "}"))
        }
    }

    private mutating func separator(_ mark: String, into out: inout [UInt8]) {
        if chance(0.1) { out += Array(whitespace().utf8) }
        out += Array(mark.utf8)
        if chance(0.1) { out += Array(whitespace().utf8) }
    }

    private mutating func whitespace() -> String {
        let space = pick([" ", "\n", "\t", "\r\n", "  ", "\u{0C}", "\u{A0}", "\u{0B}"])
        // JSON's whitespace is space, tab, line feed and carriage return only.
        if space.unicodeScalars.contains(where: { !" \t\n\r".unicodeScalars.contains($0) }) { isJSON = false }
        return space
    }

    /// A piece that makes the text not JSON.
    private mutating func notJSON(_ piece: String, into out: inout [UInt8]) {
        out += Array(piece.utf8)
        isJSON = false
    }

    // MARK: Scalars

    /// The body of a string literal, already escaped as JSON (or deliberately not).
    private mutating func string(into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        for _ in 0..<Int.random(in: 0...4, using: &random) {
            if chance(0.03) {
                out += pick(Self.brokenStringBytes)
                isJSON = false
            } else {
                out += Array(pick(Self.stringPieces).utf8)
            }
        }
        out.append(UInt8(ascii: "\""))
    }

    private func quoted(_ escapedBody: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        out += Array(escapedBody.utf8)
        out.append(UInt8(ascii: "\""))
    }

    private mutating func intLiteral() -> String {
        if chance(0.5) { return pick(Self.integerEdges) }
        let magnitude = pick([9, 99_999, 1 << 40, 1 << 53, Int.max])
        let value = Int.random(in: -magnitude...magnitude, using: &random)
        switch Int.random(in: 0..<5, using: &random) {
        case 0: return "\(value).0"
        case 1: return "\(value)e0"
        case 2: return "\(value).\(Int.random(in: 0...99, using: &random))"
        case 3: return value == 0 ? "0e-1" : "\(value)0e-1"
        default: return String(value)
        }
    }

    private mutating func doubleLiteral() -> String {
        if chance(0.5) { return pick(Self.doubleEdges) }
        let value = Double.random(in: -1e9...1e9, using: &random)
        switch Int.random(in: 0..<4, using: &random) {
        case 0: return "\(value)".replacingOccurrences(of: "e+", with: "E+")
        case 1: return "\(Int.random(in: -9...9, using: &random))e\(Int.random(in: -330...330, using: &random))"
        case 2: return "0.\(String(repeating: "0", count: Int.random(in: 0...330, using: &random)))\(Int.random(in: 0...9, using: &random))"
        default: return "\(value)"
        }
    }

    // MARK: Choices

    private mutating func chance(_ probability: Double) -> Bool { Double.random(in: 0..<1, using: &random) < probability }
    private mutating func pick<T>(_ choices: [T]) -> T { choices.randomElement(using: &random)! }

    static let integerEdges = [
        "0", "-0", "1", "-1", "0.0", "-0.0", "1.0", "1.5", "-1.5", "1e2", "1E2", "1e+2", "1e-2", "100e-2", "0.1e1", "0e0",
        "1e-400", "0e-400", "0.000e99999", "1e99999", "-1e99999",
        "9223372036854775807", "-9223372036854775808", "9223372036854775808", "-9223372036854775809",
        "9223372036854775807.0", "-9223372036854775808.0", "9.223372036854775807e18", "-9.223372036854775808e18",
        "9.2e18", "-9.2e18", "9.3e18", "9223372036854775806.5", "9223372036854774784", "9223372036854774784.5",
        "9007199254740992", "9007199254740993", "9007199254740993.0", "9007199254740993.5", "-9007199254740993.5",
        "9007199254740993.0000", "12345678901234567.89", "1.8446744073709551615e19", "18446744073709551616",
        "900719925474099300000000000000000000000000000e-29", "9.0071992547409930000000000000000000000001e15",
        "123456789012345678901234567890", "1e19", "1e308", "1e309", "4.9e-324",
    ]

    static let doubleEdges = [
        "0", "-0", "0.0", "-0.0", "0e0", "0e1", "0e4", "0.000e1", "0.0e1", "0e-400", "0.000e99999", "1", "-1", "0.5", "1e2", "1E-2", "1e+2",
        "1.7976931348623157e308", "1.7976931348623158e308", "1.7976931348623159e308", "-1.7976931348623159e308",
        "1e308", "1e309", "-1e309", "1e99999", "2.2250738585072014e-308", "2.225073858507201e-308", "4.9e-324",
        "5e-324", "2.4703282292062328e-324", "2.4703282292062327e-324", "2e-324", "1e-400", "-1e-400",
        "0.0000000000000000000000000000000000000000000000000000000000000000000000000000001",
        "123456789012345678901234567890", "785000000", "785000000.5", "1700000000", "1700000000000",
        "9007199254740993", "-9223372036854775809",
    ]

    /// The ends of the integer types besides `Int`.
    static let widthEdges = [
        "127", "128", "-128", "-129", "255", "256", "32767", "32768", "-32769", "65535", "65536", "2147483647", "2147483648",
        "-2147483649", "4294967295", "4294967296", "18446744073709551615", "18446744073709551616", "-1", "255.0", "2.55e2", "1e3",
    ]

    static let floatEdges = [
        "3.4028235e38", "3.4028236e38", "3.40282356779733661637539395458142568448e38", "3.5e38", "-3.5e38", "1.17549435e-38",
        "1.4e-45", "1e-45", "7e-46", "1e-46", "0.1", "16777217", "1e39",
    ]

    static let decimalEdges = [
        "1e127", "1e128", "1e200", "-1e200", "1e-127", "1e-200", "0.1", "123456789012345678901234567890123456789012",
        "3.14159265358979323846264338327950288419", "1e-130",
    ]

    static let base64Texts = [
        "", "AQID", "AQI=", "AQ==", "AQI", "A", "@@@@", "AQ ID", "AQID\\n", "YWJj ", "YW Jj", "YWJj====", "_-_-", "+/+/",
    ]

    static let uuidTexts = [
        "E621E1F8-C36C-495A-93FC-0C247A3E6E5F", "e621e1f8-c36c-495a-93fc-0c247a3e6e5f", "E621E1F8C36C495A93FC0C247A3E6E5F",
        "{E621E1F8-C36C-495A-93FC-0C247A3E6E5F}", "", "E621E1F8-C36C-495A-93FC-0C247A3E6E5", "G621E1F8-C36C-495A-93FC-0C247A3E6E5F",
        " E621E1F8-C36C-495A-93FC-0C247A3E6E5F",
    ]

    static let dateStrings = [#""2026-11-27T10:00:00Z""#, #""785000000""#, #""""#]

    static let urls = [
        "https://example.com/a?b=c#d", "", "a b", "http://exa mple.com", "%zz", "\\u00e9", "http://[::1]:80", "//x", ":",
        "mailto:a@b.c", "http://example.com:99999", "http://[::1", "file:///tmp/x", "\\u0000", "#", "http://",
        "https://ex\\u00e4mple.com/", "\\\\", "http://a\\tb", " https://example.com",
    ]

    static let otherKeys = ["d", "A", "a ", "", "\\u0000", "aa", "caf\\u00e9", "cafe\\u0301"]

    static let stringPieces = [
        "a", "Z", "0", " ", "\\n", "\\t", "\\\"", "\\\\", "\\/", "\\b", "\\f", "\\r", "\\u00e9", "\\u00E9", "\\u0000", "\\u001f",
        "\\ud83d\\ude00", "\\uD83D\\uDE00", "é", "e\u{301}", "😀", "\u{7F}", "\u{FEFF}", "\u{2028}", "\\uFFFF", "\\uffff",
    ]

    /// Bytes that make a string not JSON, or not UTF-8.
    static let brokenStringBytes: [[UInt8]] = [
        // Each stays broken whatever piece follows (`\\u12` before `ae` would be `\\u12ae`).
        Array("\\ud800 ".utf8), Array("\\udc00".utf8), Array("\\ud800\\u0041".utf8), Array("\\ud83d\\ud83d".utf8),
        Array("\\x".utf8), Array("\\u12g".utf8), Array("\\U00e9".utf8), [0x0A], [0x00], [0x1F], [0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80],
        [0xE2, 0x82], [0xF4, 0x90, 0x80, 0x80],
    ]

    static let notJSON = ["NaN", "Infinity", "-Infinity", "+1", ".5", "1.", "01", "-", "1e", "0x10", "nul", "True", "'a'", "[,]", "{,}", "1_0"]

    static let textAfter = [",", "x", "}", "]", "\u{0}", " 1", "//", "\u{FEFF}"]
}

extension SwiftType {
    var isOptional: Bool {
        if case .optional = self { true } else { false }
    }
}
