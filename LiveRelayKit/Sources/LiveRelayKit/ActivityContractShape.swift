import Foundation

/// What a widget decodes an attributes type from: its attributes' fields and its content
/// state's, in the schema language of the server's contracts (`Documentation/contracts.md`).
public struct ActivityContractShape: Sendable, Hashable, Codable {
    public var attributesType: String
    public var attributes: [String: ContractType]
    public var contentState: [String: ContractType]

    public init(attributesType: String, attributes: [String: ContractType], contentState: [String: ContractType]) {
        self.attributesType = attributesType
        self.attributes = attributes
        self.contentState = contentState
    }
}

/// One field's type: a name (`String`, `Int`, `Date`, `[Int]`, `String?`…), or a structure.
public indirect enum ContractType: Sendable, Hashable, Codable {
    case named(String)
    case fields([String: ContractType])
    /// A `String`-backed enum's raw values.
    case enumeration([String])
    /// An `Int`-backed enum's raw values.
    case integerEnumeration([Int])
    case array(ContractType)
    case optional(ContractType)

    private enum Key: String, CodingKey {
        case fields, array, optional
        case enumeration = "enum"
    }

    public init(from decoder: any Decoder) throws {
        if let name = try? decoder.singleValueContainer().decode(String.self) {
            self = .named(name)
            return
        }
        let object = try decoder.container(keyedBy: Key.self)
        if let fields = try object.decodeIfPresent([String: ContractType].self, forKey: .fields) {
            self = .fields(fields)
        } else if let values = try? object.decodeIfPresent([String].self, forKey: .enumeration) {
            self = .enumeration(values)
        } else if let values = try object.decodeIfPresent([Int].self, forKey: .enumeration) {
            self = .integerEnumeration(values)
        } else if let element = try object.decodeIfPresent(ContractType.self, forKey: .array) {
            self = .array(element)
        } else if let wrapped = try object.decodeIfPresent(ContractType.self, forKey: .optional) {
            self = .optional(wrapped)
        } else {
            throw DecodingError.dataCorrupted(
                .init(codingPath: decoder.codingPath, debugDescription: "a type is a name or one of fields, enum, array, optional"))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        if case .named(let name) = self {
            var single = encoder.singleValueContainer()
            try single.encode(name)
            return
        }
        var object = encoder.container(keyedBy: Key.self)
        switch self {
        case .named: break
        case .fields(let fields): try object.encode(fields, forKey: .fields)
        case .enumeration(let values): try object.encode(values, forKey: .enumeration)
        case .integerEnumeration(let values): try object.encode(values, forKey: .enumeration)
        case .array(let element): try object.encode(element, forKey: .array)
        case .optional(let wrapped): try object.encode(wrapped, forKey: .optional)
        }
    }
}
