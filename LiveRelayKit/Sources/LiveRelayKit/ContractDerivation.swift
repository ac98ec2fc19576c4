import Foundation

extension ActivityContractShape {
    /// The contract of an attributes type and its content state, read from the Swift types
    /// themselves: each is decoded once from a decoder that answers every request with a
    /// placeholder and notes the field's name and type. So the contract the server checks is
    /// the code the widget decodes with. Throws `UnsupportedContractType` for a field no contract
    /// can say (a dictionary, a type that decodes itself in its own way).
    @_spi(Adapter) public init<Attributes: Decodable, ContentState: Decodable>(
        attributesType: String, attributes: Attributes.Type, contentState: ContentState.Type
    ) throws {
        self.init(
            attributesType: attributesType, attributes: try Self.fields(of: Attributes.self),
            contentState: try Self.fields(of: ContentState.self))
    }

    static func fields<T: Decodable>(of type: T.Type) throws -> [String: ContractType] {
        guard case .fields(let fields) = try ShapeReader.shapeAndPlaceholder(of: type, at: [], visiting: []).shape else {
            throw UnsupportedContractType(path: String(describing: type), reason: "a contract describes a structure with fields")
        }
        return fields
    }
}

/// A field whose type a contract cannot express.
@_spi(Adapter) public struct UnsupportedContractType: Error, Hashable, CustomStringConvertible {
    public var path: String
    public var reason: String
    public var description: String { "\(path): \(reason)" }

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }
}

/// Decodes a type once to learn its shape.
private enum ShapeReader {
    /// The deepest nesting read: deeper is a recursive type.
    static let deepest = 32

    /// A type being read at a path: met again there, it decodes itself from itself.
    struct Visit: Hashable {
        var type: ObjectIdentifier
        var path: [String]
    }

    /// The shape of `type`, and a value of it to hand back to whoever decodes it. `visiting`: the
    /// types being read around this one, each at its path.
    static func shapeAndPlaceholder<T: Decodable>(of type: T.Type, at path: [String], visiting: Set<Visit>) throws -> (
        shape: ContractType, value: T
    ) {
        let place = path.isEmpty ? String(describing: T.self) : path.joined(separator: ".")
        guard path.count <= deepest else {
            throw UnsupportedContractType(path: place, reason: "nested more than \(deepest) levels (a recursive type?)")
        }
        if let (name, value) = named(type) { return (.named(name), value) }
        if let enumeration = T.self as? any (CaseIterable & RawRepresentable).Type,
            let (shape, first) = cases(of: enumeration), let value = first as? T
        {
            return (shape, value)
        }
        let visit = Visit(type: ObjectIdentifier(T.self), path: path)
        guard !visiting.contains(visit) else {
            throw UnsupportedContractType(path: place, reason: "\(T.self) decodes itself from a value of its own type, which no contract names")
        }
        let recorder = ShapeRecorder(path: path, visiting: visiting.union([visit]))
        let value: T
        do {
            value = try T(from: ShapeDecoder(recorder: recorder, codingPath: []))
        } catch DecodingError.dataCorrupted where T.self is any RawRepresentable.Type {
            throw UnsupportedContractType(
                path: place,
                reason: "\(T.self) is an enum of raw values that is not CaseIterable: make it CaseIterable, so its contract names its cases")
        }
        if recorder.askedForAnyKey {
            throw UnsupportedContractType(path: path.joined(separator: "."), reason: "a dictionary: a contract names each field")
        }
        guard let shape = recorder.shape else {
            throw UnsupportedContractType(path: path.joined(separator: "."), reason: "\(T.self) decodes nothing a contract can name")
        }
        return (shape, value)
    }

    /// The types the contract language names.
    private static func named<T>(_ type: T.Type) -> (String, T)? {
        let names: [(Any.Type, String, Any)] = [
            (String.self, "String", ""), (Int.self, "Int", 0), (Double.self, "Double", 0.0), (Bool.self, "Bool", false),
            (Float.self, "Float", Float(0)), (Decimal.self, "Decimal", Decimal(0)), (Data.self, "Data", Data()),
            (UUID.self, "UUID", UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0))),
            (Int8.self, "Int8", Int8(0)), (Int16.self, "Int16", Int16(0)), (Int32.self, "Int32", Int32(0)), (Int64.self, "Int64", Int64(0)),
            (UInt.self, "UInt", UInt(0)), (UInt8.self, "UInt8", UInt8(0)), (UInt16.self, "UInt16", UInt16(0)),
            (UInt32.self, "UInt32", UInt32(0)), (UInt64.self, "UInt64", UInt64(0)),
            (Date.self, "Date", Date(timeIntervalSinceReferenceDate: 0)), (URL.self, "URL", URL(fileURLWithPath: "/")),
            (ClosedRange<Date>.self, "ClosedRange<Date>", Date(timeIntervalSinceReferenceDate: 0)...Date(timeIntervalSinceReferenceDate: 0)),
        ]
        guard let match = names.first(where: { $0.0 == type }), let value = match.2 as? T else { return nil }
        return (match.1, value)
    }

    /// An enum's raw values, `String` or `Int`, and its first case.
    private static func cases(of type: any (CaseIterable & RawRepresentable).Type) -> (ContractType, Any)? {
        func list<C: Collection>(_ collection: C) -> [Any] { collection.map { $0 as Any } }
        let all = list(type.allCases)
        guard let first = all.first else { return nil }
        let raw = all.map { ($0 as? any RawRepresentable)?.rawValue }
        if case let strings = raw.compactMap({ $0 as? String }), strings.count == all.count { return (.enumeration(strings), first) }
        if case let integers = raw.compactMap({ $0 as? Int }), integers.count == all.count { return (.integerEnumeration(integers), first) }
        return nil
    }
}

/// What one decode of a value asked for.
private final class ShapeRecorder {
    let path: [String]
    /// The types being read, this one's among them, each at its path.
    let visiting: Set<ShapeReader.Visit>
    var fields: [String: ContractType] = [:]
    var sawKeyed = false
    /// Asked for whatever keys there are: a dictionary, which has no fields to name.
    var askedForAnyKey = false
    var single: ContractType?
    var element: ContractType?

    init(path: [String], visiting: Set<ShapeReader.Visit>) {
        self.path = path
        self.visiting = visiting
    }

    var shape: ContractType? {
        if sawKeyed { return .fields(fields) }
        if let element { return .array(element) }
        return single
    }
}

private struct ShapeDecoder: Decoder {
    let recorder: ShapeRecorder
    var codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        recorder.sawKeyed = true
        return KeyedDecodingContainer(KeyedShape<Key>(recorder: recorder, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer { UnkeyedShape(recorder: recorder, codingPath: codingPath) }

    func singleValueContainer() throws -> any SingleValueDecodingContainer { SingleShape(recorder: recorder, codingPath: codingPath) }
}

private struct KeyedShape<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let recorder: ShapeRecorder
    var codingPath: [any CodingKey]
    var allKeys: [Key] {
        recorder.askedForAnyKey = true
        return []
    }

    func contains(_ key: Key) -> Bool { true }

    func decodeNil(forKey key: Key) throws -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        let (shape, value) = try ShapeReader.shapeAndPlaceholder(of: type, at: recorder.path + [key.stringValue], visiting: recorder.visiting)
        recorder.fields[key.stringValue] = shape
        return value
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        let (shape, value) = try ShapeReader.shapeAndPlaceholder(of: type, at: recorder.path + [key.stringValue], visiting: recorder.visiting)
        recorder.fields[key.stringValue] = .optional(shape)
        return value
    }

    // The protocol's own overloads for the standard scalars would otherwise ask `contains` and
    // `decode`, and an optional `String` or `Int` would be recorded as required.
    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try optional(type, key) }
    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? { try optional(type, key) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try optional(type, key) }
    func decodeIfPresent(_ type: Float.Type, forKey key: Key) throws -> Float? { try optional(type, key) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try optional(type, key) }
    func decodeIfPresent(_ type: Int8.Type, forKey key: Key) throws -> Int8? { try optional(type, key) }
    func decodeIfPresent(_ type: Int16.Type, forKey key: Key) throws -> Int16? { try optional(type, key) }
    func decodeIfPresent(_ type: Int32.Type, forKey key: Key) throws -> Int32? { try optional(type, key) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt.Type, forKey key: Key) throws -> UInt? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt8.Type, forKey key: Key) throws -> UInt8? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt16.Type, forKey key: Key) throws -> UInt16? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt32.Type, forKey key: Key) throws -> UInt32? { try optional(type, key) }
    func decodeIfPresent(_ type: UInt64.Type, forKey key: Key) throws -> UInt64? { try optional(type, key) }

    private func optional<T: Decodable>(_ type: T.Type, _ key: Key) throws -> T? {
        let generic: (T.Type, Key) throws -> T? = decodeIfPresent
        return try generic(type, key)
    }

    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        throw unsupported(key, "decodes a nested container by hand")
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
        throw unsupported(key, "decodes a nested container by hand")
    }

    func superDecoder() throws -> any Decoder { throw unsupported(nil, "decodes its superclass") }
    func superDecoder(forKey key: Key) throws -> any Decoder { throw unsupported(key, "decodes its superclass") }

    private func unsupported(_ key: Key?, _ reason: String) -> UnsupportedContractType {
        UnsupportedContractType(path: (recorder.path + (key.map { [$0.stringValue] } ?? [])).joined(separator: "."), reason: reason)
    }
}

/// An array: one element is read, for its type.
private struct UnkeyedShape: UnkeyedDecodingContainer {
    let recorder: ShapeRecorder
    var codingPath: [any CodingKey]
    var count: Int? { 1 }
    var isAtEnd: Bool { recorder.element != nil }
    var currentIndex: Int { recorder.element == nil ? 0 : 1 }

    mutating func decodeNil() throws -> Bool { false }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (shape, value) = try ShapeReader.shapeAndPlaceholder(of: type, at: recorder.path + ["[]"], visiting: recorder.visiting)
        recorder.element = shape
        return value
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        throw UnsupportedContractType(path: recorder.path.joined(separator: "."), reason: "decodes a nested container by hand")
    }

    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
        throw UnsupportedContractType(path: recorder.path.joined(separator: "."), reason: "decodes a nested container by hand")
    }

    mutating func superDecoder() throws -> any Decoder {
        throw UnsupportedContractType(path: recorder.path.joined(separator: "."), reason: "decodes its superclass")
    }
}

/// A value that decodes itself from one value: a wrapper around a type the contract names.
private struct SingleShape: SingleValueDecodingContainer {
    let recorder: ShapeRecorder
    var codingPath: [any CodingKey]

    func decodeNil() -> Bool { false }

    func decode<T: Decodable>(_ type: T.Type) throws -> T {
        let (shape, value) = try ShapeReader.shapeAndPlaceholder(of: type, at: recorder.path, visiting: recorder.visiting)
        recorder.single = shape
        return value
    }
}
