import Foundation

/// A JSON document that keeps what it was given: object keys stay in their order and numbers keep
/// their literal text, so raw JSON passes through parse and serialise without any value changing
/// (`0.941` stays `0.941`, `1e3` stays `1e3`, `1685952000` never becomes `1.685952e9`).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    /// The number's literal text, exactly as written (validated against the JSON grammar).
    case number(String)
    case string(String)
    case array([JSONValue])
    /// Members in document order. Duplicate keys are rejected when parsing.
    case object(Members)

    /// An object's members. Built as this type, not as `[(String, JSONValue)]`: an array of
    /// unlabelled pairs is converted to it element by element, at run time.
    public typealias Members = [(key: String, value: JSONValue)]

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a == b
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)):
            a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let b): hasher.combine(b)
        case .number(let n): hasher.combine(n)
        case .string(let s): hasher.combine(s)
        case .array(let a): hasher.combine(a)
        case .object(let members):
            for member in members {
                hasher.combine(member.key)
                hasher.combine(member.value)
            }
        }
    }
}

// MARK: - Building and reading

extension JSONValue {
    /// The same document with every object's members sorted by key: two documents that differ
    /// only in member order (which no decoder sees) compare equal in this form.
    public var sortingKeys: JSONValue {
        switch self {
        case .array(let elements): .array(elements.map(\.sortingKeys))
        case .object(let members): .object(members.sorted { $0.key < $1.key }.map { ($0.key, $0.value.sortingKeys) })
        default: self
        }
    }

    /// A number from an integer.
    public static func integer<I: BinaryInteger>(_ value: I) -> JSONValue {
        // `Int64`'s own description is several times faster than the generic conversion.
        .number(Int64(exactly: value)?.description ?? String(value))
    }

    /// A number from a `Double`, written the way `JSONEncoder` writes it (`100` for 100.0, `0.941`
    /// for 0.941). Non-finite values have no JSON form.
    public static func double(_ value: Double) -> JSONValue? {
        guard value.isFinite else { return nil }
        if value == value.rounded(.towardZero), abs(value) < 1e15 {
            return .number(String(Int64(value)))
        }
        return .number("\(value)")
    }

    /// The value of `key` if this is an object that has it.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.first { $0.key == key }?.value
    }

    /// The element at `index` if this is an array long enough.
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    /// The elements if this is an array.
    public var arrayElements: [JSONValue]? {
        if case .array(let elements) = self { return elements } else { return nil }
    }

    /// The members if this is an object.
    public var objectMembers: JSONValue.Members? {
        if case .object(let members) = self { return members } else { return nil }
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s } else { return nil }
    }

    /// The number as a `Double`, if this is a number.
    public var doubleValue: Double? {
        if case .number(let literal) = self { return Double(literal) } else { return nil }
    }

    /// A short name of the JSON type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// Sets `key` to `value`, keeping the key's position if it already exists, else appending it.
    /// Does nothing unless this is an object.
    public mutating func set(_ key: String, _ value: JSONValue) {
        guard case .object(var members) = self else { return }
        if let index = members.firstIndex(where: { $0.key == key }) {
            members[index].value = value
        } else {
            members.append((key, value))
        }
        self = .object(members)
    }

    /// Removes `key` if this is an object that has it.
    public mutating func remove(_ key: String) {
        guard case .object(var members) = self else { return }
        members.removeAll { $0.key == key }
        self = .object(members)
    }
}

// MARK: - Encodable values

extension JSONValue {
    /// The JSON Foundation's `JSONEncoder` with default strategies produces for `value`: what
    /// ActivityKit's default `JSONDecoder` expects (`Date` as seconds since 2001-01-01,
    /// `ClosedRange<Date>` as a two-element array, property names unchanged). Keys are sorted:
    /// the default key order on Linux changes from run to run, and order means nothing to the
    /// decoder, while the same push should give the same bytes.
    public init<Value: Encodable>(encoding value: Value) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = .sortedKeys
        let data = try encoder.encode(value)
        self = try JSONValue(parsing: data)
    }

    /// The value a default `JSONDecoder` makes of this JSON, as ActivityKit decodes attributes
    /// and content state on the device.
    public func decoded<Value: Decodable>(as type: Value.Type) throws -> Value {
        try JSONDecoder().decode(Value.self, from: Data(serialized))
    }
}

// MARK: - Serialising

extension JSONValue {
    /// The compact UTF-8 serialisation: no insignificant whitespace, keys in stored order,
    /// numbers as their literal text, `/` not escaped.
    public var serialized: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        write(to: &out)
        return out
    }

    public var serializedString: String { String(decoding: serialized, as: UTF8.self) }

    public func write(to out: inout [UInt8]) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let b): out.append(contentsOf: (b ? "true" : "false").utf8)
        case .number(let literal): out.append(contentsOf: literal.utf8)
        case .string(let s): Self.writeString(s, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                element.write(to: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let members):
            out.append(UInt8(ascii: "{"))
            for (i, member) in members.enumerated() {
                if i > 0 { out.append(UInt8(ascii: ",")) }
                Self.writeString(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(to: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    private static func writeString(_ s: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var s = s
        // Contiguous UTF-8 (made so if it was bridged): runs that need no escape are copied whole.
        s.withUTF8 { bytes in
            var runStart = 0
            for (index, byte) in bytes.enumerated() where byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                runStart = index + 1
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: [0x5C, 0x22])
                case UInt8(ascii: "\\"): out.append(contentsOf: [0x5C, 0x5C])
                case 0x0A: out.append(contentsOf: [0x5C, UInt8(ascii: "n")])
                case 0x0D: out.append(contentsOf: [0x5C, UInt8(ascii: "r")])
                case 0x09: out.append(contentsOf: [0x5C, UInt8(ascii: "t")])
                case 0x08: out.append(contentsOf: [0x5C, UInt8(ascii: "b")])
                case 0x0C: out.append(contentsOf: [0x5C, UInt8(ascii: "f")])
                default:
                    let hex = Array("0123456789abcdef".utf8)
                    out.append(contentsOf: [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]])
                }
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }
}

// MARK: - Parsing

/// Why a JSON text could not be parsed, with the byte offset where parsing stopped.
public struct JSONParseError: Error, Hashable, CustomStringConvertible {
    public var offset: Int
    public var problem: String
    /// The key an object has twice, when that is the problem.
    public var duplicateKey: String?
    public var description: String { "invalid JSON at byte \(offset): \(problem)" }
}

extension JSONValue {
    /// Parses one JSON text (RFC 8259). Whitespace around it (and a byte-order mark before it) is
    /// allowed; anything else after it is an error. Nesting deeper than 512 levels is refused.
    public init(parsing data: some Collection<UInt8>) throws(JSONParseError) {
        var parser = JSONParser(bytes: Array(data))
        self = try parser.parseDocument()
    }

    public init(parsing text: String) throws(JSONParseError) {
        try self.init(parsing: Array(text.utf8))
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    var depth = 0

    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        // A byte-order mark first is allowed (RFC 8259 §8.1; JSONDecoder skips one too).
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw fail("unexpected data after the JSON value") }
        return value
    }

    func fail(_ problem: String) -> JSONParseError { JSONParseError(offset: index, problem: problem) }

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw fail("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expectLiteral("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expectLiteral("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expectLiteral("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw fail("unexpected character '\(Character(Unicode.Scalar(bytes[index])))'")
        }
    }

    mutating func expectLiteral(_ literal: String) throws(JSONParseError) {
        let utf8 = Array(literal.utf8)
        guard bytes.count - index >= utf8.count, Array(bytes[index..<index + utf8.count]) == utf8 else {
            throw fail("expected '\(literal)'")
        }
        index += utf8.count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > 512 { throw fail("nesting deeper than 512 levels") }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: JSONValue.Members = []
        var seen = Set<String>()
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw fail("expected a string key") }
            let keyOffset = index
            let key = try parseString()
            guard seen.insert(key).inserted else {
                throw JSONParseError(offset: keyOffset, problem: "duplicate key \"\(key)\"", duplicateKey: key)
            }
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw fail("expected ':'") }
            index += 1
            skipWhitespace()
            members.append((key, try parseValue()))
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input in an object") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(members)
            }
            throw fail("expected ',' or '}'")
        }
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw fail("unexpected end of input in an array") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
                continue
            }
            if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            }
            throw fail("expected ',' or ']'")
        }
    }

    mutating func parseNumber() throws(JSONParseError) -> String {
        let start = index
        func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw fail("expected a digit") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw fail("leading zero in a number") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("expected a digit after '.'") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw fail("expected a digit in the exponent") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        return String(decoding: bytes[start..<index], as: UTF8.self)
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1  // opening quote
        var out: [UInt8] = []
        while true {
            guard index < bytes.count else { throw fail("unterminated string") }
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let string = String(validating: out, as: UTF8.self) else {
                    throw fail("string is not valid UTF-8")
                }
                return string
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw fail("unterminated escape") }
                let escaped = bytes[index]
                index += 1
                switch escaped {
                case UInt8(ascii: "\""): out.append(0x22)
                case UInt8(ascii: "\\"): out.append(0x5C)
                case UInt8(ascii: "/"): out.append(0x2F)
                case UInt8(ascii: "b"): out.append(0x08)
                case UInt8(ascii: "f"): out.append(0x0C)
                case UInt8(ascii: "n"): out.append(0x0A)
                case UInt8(ascii: "r"): out.append(0x0D)
                case UInt8(ascii: "t"): out.append(0x09)
                case UInt8(ascii: "u"):
                    var scalar = try parseHex4()
                    if (0xD800..<0xDC00).contains(scalar) {
                        guard index + 1 < bytes.count, bytes[index] == 0x5C, bytes[index + 1] == UInt8(ascii: "u") else {
                            throw fail("unpaired surrogate in \\u escape")
                        }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw fail("unpaired surrogate in \\u escape") }
                        scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(scalar) {
                        throw fail("unpaired surrogate in \\u escape")
                    }
                    guard let unicode = Unicode.Scalar(scalar) else { throw fail("invalid \\u escape") }
                    out.append(contentsOf: Array(String(Character(unicode)).utf8))
                default: throw fail("invalid escape '\\\(Character(Unicode.Scalar(escaped)))'")
                }
            case 0x00..<0x20:
                throw fail("control character in a string")
            default:
                out.append(byte)
                index += 1
            }
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw fail("short \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt32
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(b - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(b - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(b - UInt8(ascii: "A") + 10)
            default: throw fail("invalid hex digit in \\u escape")
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }
}

extension DecodingError {
    /// The path to the value at fault, dotted with indices in brackets (`driver.eta[1]`); for a
    /// missing key, the path to where it should be.
    package var valuePath: String {
        let keys: [any CodingKey]
        switch self {
        case .keyNotFound(let key, let context): keys = context.codingPath + [key]
        case .valueNotFound(_, let context), .typeMismatch(_, let context), .dataCorrupted(let context): keys = context.codingPath
        @unknown default: keys = []
        }
        return Self.path(keys)
    }

    /// A coding path as we name fields: dotted, indices in brackets.
    package static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".").replacingOccurrences(of: ".[", with: "[")
    }
}
