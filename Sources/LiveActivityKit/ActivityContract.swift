import Foundation

/// What an app's widget decodes one `ActivityAttributes` type from: its name (the push's
/// `attributes-type`), its static attributes and its `ContentState`, as Swift type schemas. The
/// app registers it with the server, which refuses what would not decode; the simulated iPhones
/// decode with it; `liverelay push --contract` checks with it before sending. One checker, so
/// all three give the same verdict in the same words.
public struct ActivityContract: Sendable, Hashable {
    public var attributesType: String
    public var attributes: SwiftStruct
    public var contentState: SwiftStruct

    public init(attributesType: String, attributes: SwiftStruct, contentState: SwiftStruct) {
        self.attributesType = attributesType
        self.attributes = attributes
        self.contentState = contentState
    }

    /// Throws what `JSONDecoder` would report decoding `json` as the static attributes.
    public func checkAttributes(_ json: JSONValue) throws(DecodingFailure) {
        try SwiftType.structure(attributes).decode(json)
    }

    /// Throws what `JSONDecoder` would report decoding `json` as the `ContentState`.
    public func checkContentState(_ json: JSONValue) throws(DecodingFailure) {
        try SwiftType.structure(contentState).decode(json)
    }
}

// MARK: The contract as JSON

/// A contract in JSON, as apps register it and the emulator's control API takes it:
///
///     {"name": "DeliveryAttributes",
///      "attributes":   {"orderNumber": "Int"},
///      "contentState": {"step": {"enum": ["preparing", "delivering"]}, "eta": "ClosedRange<Date>?",
///                       "driver": {"fields": {"name": "String"}}, "stops": "[String]"}}
///
/// A type is `String`, `Int`, `Double`, `Bool`, `Date`, `ClosedRange<Date>`, `URL`, `[T]` or `T?`
/// as text, or an object: `{"enum": [raw values]}` (strings or integers), `{"fields": {…}}` (a
/// nested struct, with an optional `"name"`), `{"array": T}`, `{"optional": T}`. Fields keep the
/// order they are written in.
extension ActivityContract {
    public static let fields = ["name", "attributes", "contentState"]

    /// Reads a contract; errors name the field under `path`. `name` may come from elsewhere (a URL).
    public init(json: JSONValue, path: String = "", name: String? = nil) throws(LiveActivityValidationError) {
        let members = try Schema.object(json, path: path, fields: Self.fields)
        guard let typeName = name ?? members.first(where: { $0.key == "name" })?.value.stringValue, !typeName.isEmpty else {
            throw LiveActivityValidationError(
                field: Schema.join(path, "name"), code: .missing, message: "is required: the ActivityAttributes type's name")
        }
        func structure(_ key: String, name: String) throws(LiveActivityValidationError) -> SwiftStruct {
            guard let value = members.first(where: { $0.key == key })?.value else {
                throw LiveActivityValidationError(
                    field: Schema.join(path, key), code: .missing, message: "is required: an object of field names to types")
            }
            return try Schema.structure(value, name: name, path: Schema.join(path, key))
        }
        self.init(
            attributesType: typeName, attributes: try structure("attributes", name: typeName),
            contentState: try structure("contentState", name: "ContentState"))
    }

    public var json: JSONValue {
        .object([("name", .string(attributesType)), ("attributes", Schema.json(attributes)), ("contentState", Schema.json(contentState))])
    }
}

/// The JSON form of Swift type schemas. Contracts come from clients (an app's client key registers
/// them), so reading one is bounded: a type nests at most `maximumDepth` levels in all (structs,
/// arrays, optionals, written as text or as objects) and a type written as text has at most
/// `maximumNameLength` characters; both are refused before any work, and the text is read in one
/// pass without copies or recursion.
enum Schema {
    /// Far deeper than any widget's state, and shallow enough that a contract's stored JSON stays
    /// well inside the JSON reader's 512 levels.
    static let maximumDepth = 32
    /// `[[ClosedRange<Date>?]?]?` is 24.
    static let maximumNameLength = 200

    static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

    static func object(_ value: JSONValue, path: String, fields: [String]) throws(LiveActivityValidationError) -> JSONValue.Members {
        guard let members = value.objectMembers else {
            throw LiveActivityValidationError(field: path, code: .wrongType, message: "must be a JSON object, got \(value.typeName)")
        }
        for member in members where !fields.contains(member.key) {
            throw LiveActivityValidationError(
                field: join(path, member.key), code: .unknownKey, message: "is not a field of a contract\(didYouMean(member.key, in: fields))")
        }
        return members
    }

    /// `depth`: the levels of types around this struct.
    static func structure(_ value: JSONValue, name: String, path: String, depth: Int = 0) throws(LiveActivityValidationError) -> SwiftStruct {
        guard let members = value.objectMembers else {
            throw LiveActivityValidationError(
                field: path, code: .wrongType, message: "must be an object of field names to types, got \(value.typeName)")
        }
        var fields: [SwiftStruct.Field] = []
        for member in members {
            fields.append(.init(member.key, try type(member.value, path: join(path, member.key), depth: depth + 1)))
        }
        return SwiftStruct(name, fields)
    }

    static func type(_ value: JSONValue, path: String, depth: Int) throws(LiveActivityValidationError) -> SwiftType {
        try checkDepth(depth, path: path)
        if let text = value.stringValue { return try named(text, path: path, depth: depth) }
        let members = try object(value, path: path, fields: ["enum", "fields", "name", "array", "optional"])
        func member(_ key: String) -> JSONValue? { members.first { $0.key == key }?.value }
        // One kind per type, so that no object reads as two; a name belongs to a nested struct.
        let kinds = members.filter { $0.key != "name" }
        guard kinds.count == 1, member("name") == nil || member("fields") != nil else {
            throw LiveActivityValidationError(
                field: path, code: .invalidValue, message: "must have exactly one of enum, fields (with an optional name), array or optional")
        }
        if let cases = member("enum")?.arrayElements {
            if let strings = Optional(cases.compactMap(\.stringValue)), strings.count == cases.count, !strings.isEmpty { return .stringEnum(strings) }
            // Raw values as written (not through Double, which would round those past 2^53).
            let integers = cases.compactMap { value -> Int? in
                if case .number(let literal) = value { Int(literal) } else { nil }
            }
            if integers.count == cases.count, !integers.isEmpty { return .intEnum(integers) }
            throw LiveActivityValidationError(
                field: join(path, "enum"), code: .invalidValue, message: "must list the raw values: all strings or all integers")
        }
        if let fields = member("fields") {
            let name = member("name")
            guard name == nil || name?.stringValue != nil else {
                throw LiveActivityValidationError(field: join(path, "name"), code: .wrongType, message: "must be a string, the struct's Swift name")
            }
            return .structure(try structure(fields, name: name?.stringValue ?? "Nested", path: join(path, "fields"), depth: depth))
        }
        if let element = member("array") { return .array(try type(element, path: join(path, "array"), depth: depth + 1)) }
        if let wrapped = member("optional") { return .optional(try type(wrapped, path: join(path, "optional"), depth: depth + 1)) }
        throw LiveActivityValidationError(field: join(path, "enum"), code: .wrongType, message: "must be an array of raw values")
    }

    private static func checkDepth(_ depth: Int, path: String) throws(LiveActivityValidationError) {
        guard depth <= maximumDepth else {
            throw LiveActivityValidationError(field: path, code: .invalidValue, message: "nests types deeper than \(maximumDepth) levels")
        }
    }

    /// A type written as text: a name wrapped in any number of `[…]` and `?`, read from both ends
    /// of one slice (`[String]?` is an optional array of strings).
    private static func named(_ text: String, path: String, depth: Int) throws(LiveActivityValidationError) -> SwiftType {
        guard text.unicodeScalars.count <= maximumNameLength else {
            throw LiveActivityValidationError(field: path, code: .invalidValue, message: "is longer than \(maximumNameLength) characters")
        }
        enum Wrapper { case optional, array }
        var wrappers: [Wrapper] = []
        var rest = text[...]
        func trim() {
            while let first = rest.first, first.isWhitespace, !first.isNewline { rest.removeFirst() }
            while let last = rest.last, last.isWhitespace, !last.isNewline { rest.removeLast() }
        }
        trim()
        while true {
            if rest.last == "?" {
                wrappers.append(.optional)
                rest.removeLast()
            } else if rest.first == "[", rest.last == "]", rest.count >= 2 {
                wrappers.append(.array)
                rest.removeFirst()
                rest.removeLast()
            } else {
                break
            }
            try checkDepth(depth + wrappers.count, path: path)
            trim()
        }
        guard var type = SwiftType.scalars.first(where: { $0.swiftName == rest }) else {
            throw LiveActivityValidationError(
                field: path, code: .invalidValue,
                message:
                    "unknown type \"\(rest)\"; use \(SwiftType.scalars.map(\.swiftName).joined(separator: ", ")), [T], T? or an object")
        }
        for wrapper in wrappers.reversed() {
            type = wrapper == .optional ? .optional(type) : .array(type)
        }
        return type
    }

    static func json(_ type: SwiftType) -> JSONValue {
        switch type {
        case .string, .int, .integer, .double, .float, .decimal, .bool, .date, .closedRangeOfDate, .url, .data, .uuid:
            .string(type.swiftName)
        case .stringEnum(let cases): .object([("enum", .array(cases.map(JSONValue.string)))])
        case .intEnum(let cases): .object([("enum", .array(cases.map { .integer($0) }))])
        case .array(let element): .object([("array", json(element))])
        case .optional(let wrapped): .object([("optional", json(wrapped))])
        case .structure(let type): .object([("name", .string(type.name)), ("fields", json(type))])
        }
    }

    static func json(_ type: SwiftStruct) -> JSONValue {
        .object(type.fields.map { ($0.name, json($0.type)) })
    }
}
