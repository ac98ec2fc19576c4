import Foundation

extension ActivityContractShape {
    /// The contract of an attributes type and its content state, read from the Swift types
    /// themselves: each is decoded once from a decoder that answers every request with a
    /// placeholder and notes the field's name and type. So the contract the server checks is
    /// the code the widget decodes with. Throws `UnsupportedContractType` for a field no contract
    /// can say (a dictionary, a type that decodes itself in its own way).
    public init<Attributes: Decodable, ContentState: Decodable>(
        attributesType: String, attributes: Attributes.Type, contentState: ContentState.Type
    ) throws {
        self.init(
            attributesType: attributesType, attributes: try Self.fields(of: Attributes.self),
            contentState: try Self.fields(of: ContentState.self))
    }

    static func fields<T: Decodable>(of type: T.Type) throws -> [String: ContractType] {
        guard case .fields(let fields) = try ShapeReader.shape(of: type, at: []) else {
            throw UnsupportedContractType(path: String(describing: type), reason: "a contract describes a structure with fields")
        }
        return fields
    }
}

/// A field whose type a contract cannot express.
public struct UnsupportedContractType: Error, Hashable, CustomStringConvertible {
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

    static func shape<T: Decodable>(of type: T.Type, at path: [String]) throws -> ContractType {
        try shapeAndPlaceholder(of: type, at: path).shape
    }

    /// The shape of `type`, and a value of it to hand back to whoever decodes it.
    static func shapeAndPlaceholder<T: Decodable>(of type: T.Type, at path: [String]) throws -> (shape: ContractType, value: T) {
        guard path.count <= deepest else {
            throw UnsupportedContractType(path: path.joined(separator: "."), reason: "nested more than \(deepest) levels (a recursive type?)")
        }
        if let (name, value) = named(type) { return (.named(name), value) }
        if let enumeration = T.self as? any (CaseIterable & RawRepresentable).Type,
            let (values, first) = cases(of: enumeration), let value = first as? T
        {
            return (.enumeration(values), value)
        }
        let recorder = ShapeRecorder(path: path)
        let value = try T(from: ShapeDecoder(recorder: recorder, codingPath: []))
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
            (Date.self, "Date", Date(timeIntervalSinceReferenceDate: 0)), (URL.self, "URL", URL(fileURLWithPath: "/")),
            (ClosedRange<Date>.self, "ClosedRange<Date>", Date(timeIntervalSinceReferenceDate: 0)...Date(timeIntervalSinceReferenceDate: 0)),
        ]
        guard let match = names.first(where: { $0.0 == type }), let value = match.2 as? T else { return nil }
        return (match.1, value)
    }

    private static func cases(of type: any (CaseIterable & RawRepresentable).Type) -> ([String], Any)? {
        func list<C: Collection>(_ collection: C) -> [Any] { collection.map { $0 as Any } }
        let all = list(type.allCases)
        let raw = all.compactMap { ($0 as? any RawRepresentable)?.rawValue as? String }
        guard !all.isEmpty, raw.count == all.count else { return nil }
        return (raw, all[0])
    }
}

/// What one decode of a value asked for.
private final class ShapeRecorder {
    let path: [String]
    var fields: [String: ContractType] = [:]
    var sawKeyed = false
    /// Asked for whatever keys there are: a dictionary, which has no fields to name.
    var askedForAnyKey = false
    var single: ContractType?
    var element: ContractType?

    init(path: [String]) { self.path = path }

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
        let (shape, value) = try ShapeReader.shapeAndPlaceholder(of: type, at: recorder.path + [key.stringValue])
        recorder.fields[key.stringValue] = shape
        return value
    }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        let (shape, value) = try ShapeReader.shapeAndPlaceholder(of: type, at: recorder.path + [key.stringValue])
        recorder.fields[key.stringValue] = .optional(shape)
        return value
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
        let (shape, value) = try ShapeReader.shapeAndPlaceholder(of: type, at: recorder.path + ["[]"])
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
        let (shape, value) = try ShapeReader.shapeAndPlaceholder(of: type, at: recorder.path)
        recorder.single = shape
        return value
    }
}
