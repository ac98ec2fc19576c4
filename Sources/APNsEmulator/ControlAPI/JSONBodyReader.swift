import Foundation
import Hummingbird
import LiveActivityKit
import SimulatedDevices

/// Reads a JSON object field by field, for bodies that carry free-form JSON (attributes, content
/// state) or nested rules: every error names the full path of the field and the rule, and keys
/// the request does not define are refused with a hint.
struct JSONBodyReader {
    let members: [(key: String, value: JSONValue)]
    let path: String

    init(_ value: JSONValue, path: String = "", fields: [String]) throws(APIError) {
        guard let members = value.objectMembers else {
            let what = path.isEmpty ? "the body must be" : "must be"
            throw APIError(.badRequest, code: "wrong_type", message: "\(what) a JSON object, got \(value.typeName)", field: path.isEmpty ? nil : path)
        }
        for member in members where !fields.contains(member.key) {
            let hint = closestKey(to: member.key, in: fields).map { " (did you mean \"\($0)\"?)" } ?? ""
            throw APIError(.badRequest, code: "unknown_key", message: "is not a field of this request\(hint)", field: Self.join(path, member.key))
        }
        self.members = members
        self.path = path
    }

    /// A request body as JSON, or `invalid_json`.
    static func parse(_ buffer: ByteBuffer) throws(APIError) -> JSONValue {
        do {
            return try JSONValue(parsing: buffer.readableBytesView)
        } catch {
            throw APIError(.badRequest, code: "invalid_json", message: "the body is not valid JSON: \(error)")
        }
    }

    static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }
    func field(_ key: String) -> String { Self.join(path, key) }

    /// The value, `nil` when absent or `null`.
    func value(_ key: String) -> JSONValue? {
        guard let value = members.first(where: { $0.key == key })?.value, value != .null else { return nil }
        return value
    }

    func require(_ key: String) throws(APIError) -> JSONValue {
        guard let value = value(key) else { throw APIError(.badRequest, code: "missing", message: "is required", field: field(key)) }
        return value
    }

    private func wrongType(_ key: String, _ expected: String, _ value: JSONValue) -> APIError {
        APIError(.badRequest, code: "wrong_type", message: "must be \(expected), got \(value.typeName)", field: field(key))
    }

    func string(_ key: String) throws(APIError) -> String? {
        guard let value = value(key) else { return nil }
        guard let text = value.stringValue else { throw wrongType(key, "a string", value) }
        return text
    }

    func requireString(_ key: String) throws(APIError) -> String {
        guard let text = try string(key) else { throw APIError(.badRequest, code: "missing", message: "is required", field: field(key)) }
        guard !text.isEmpty else { throw APIError.invalid(field(key), "must not be empty") }
        return text
    }

    func bool(_ key: String) throws(APIError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else { throw wrongType(key, "true or false", value) }
        return flag
    }

    func number(_ key: String) throws(APIError) -> Double? {
        guard let value = value(key) else { return nil }
        guard let number = value.doubleValue, case .number = value else { throw wrongType(key, "a number", value) }
        return number
    }

    func object(_ key: String, fields: [String]) throws(APIError) -> JSONBodyReader? {
        guard let value = value(key) else { return nil }
        return try JSONBodyReader(value, path: field(key), fields: fields)
    }

    /// A date as ISO 8601 text or as seconds since 1970 (the form APNs payloads use).
    func date(_ key: String) throws(APIError) -> Date? {
        guard let value = value(key) else { return nil }
        if case .number = value, let seconds = value.doubleValue { return Date(timeIntervalSince1970: seconds) }
        if let text = value.stringValue, let date = ISO8601DateFormatter().date(from: text) { return date }
        throw APIError.invalid(field(key), "must be an ISO 8601 date such as 2026-11-21T10:00:00Z, or seconds since 1970")
    }
}

extension Request {
    /// The body as a checked JSON object.
    func jsonObject(fields: [String], context: some RequestContext) async throws -> JSONBodyReader {
        let buffer = try await body.collect(upTo: context.maxUploadSize)
        return try JSONBodyReader(buffer.readableBytes == 0 ? .object([]) : JSONBodyReader.parse(buffer), fields: fields)
    }
}

// MARK: Swift type schemas as JSON

/// An app's attribute type in the control API:
///
///     {"name": "DeliveryAttributes",
///      "attributes":   {"orderNumber": "Int"},
///      "contentState": {"step": {"enum": ["preparing", "delivering"]}, "eta": "ClosedRange<Date>?",
///                       "driver": {"fields": {"name": "String"}}, "stops": "[String]"}}
///
/// A type is `String`, `Int`, `Double`, `Bool`, `Date`, `ClosedRange<Date>`, `URL`, `[T]` or `T?`
/// as text, or an object: `{"enum": [raw values]}` (strings or integers), `{"fields": {…}}` (a
/// nested struct, with an optional `"name"`), `{"array": T}`, `{"optional": T}`.
enum SwiftTypeJSON {
    static func attributesType(_ value: JSONValue, path: String) throws(APIError) -> ActivityAttributesType {
        let body = try JSONBodyReader(value, path: path, fields: ["name", "attributes", "contentState"])
        let name = try body.requireString("name")
        return ActivityAttributesType(
            name: name,
            attributes: try structure(body.require("attributes"), name: name, path: body.field("attributes")),
            contentState: try structure(body.require("contentState"), name: "ContentState", path: body.field("contentState")))
    }

    static func structure(_ value: JSONValue, name: String, path: String) throws(APIError) -> SwiftStruct {
        guard let members = value.objectMembers else {
            throw APIError(.badRequest, code: "wrong_type", message: "must be an object of field names to types, got \(value.typeName)", field: path)
        }
        var fields: [SwiftStruct.Field] = []
        for member in members {
            fields.append(.init(member.key, try type(member.value, path: JSONBodyReader.join(path, member.key))))
        }
        return SwiftStruct(name, fields)
    }

    static func type(_ value: JSONValue, path: String) throws(APIError) -> SwiftType {
        if let text = value.stringValue { return try named(text, path: path) }
        let body = try JSONBodyReader(value, path: path, fields: ["enum", "fields", "name", "array", "optional"])
        if let cases = body.value("enum")?.arrayElements {
            if let strings = Optional(cases.compactMap(\.stringValue)), strings.count == cases.count, !strings.isEmpty { return .stringEnum(strings) }
            let integers = cases.compactMap { $0.doubleValue.flatMap { Int(exactly: $0) } }
            if integers.count == cases.count, !integers.isEmpty { return .intEnum(integers) }
            throw APIError.invalid(body.field("enum"), "must list the raw values: all strings or all integers")
        }
        if let fields = body.value("fields") {
            return .structure(try structure(fields, name: try body.string("name") ?? "Nested", path: body.field("fields")))
        }
        if let element = body.value("array") { return .array(try type(element, path: body.field("array"))) }
        if let wrapped = body.value("optional") { return .optional(try type(wrapped, path: body.field("optional"))) }
        throw APIError.invalid(path, "must be a type name or an object with enum, fields, array or optional")
    }

    private static func named(_ text: String, path: String) throws(APIError) -> SwiftType {
        let text = text.trimmingCharacters(in: .whitespaces)
        if text.hasSuffix("?") { return .optional(try named(String(text.dropLast()), path: path)) }
        if text.hasPrefix("["), text.hasSuffix("]") { return .array(try named(String(text.dropFirst().dropLast()), path: path)) }
        switch text {
        case "String": return .string
        case "Int": return .int
        case "Double": return .double
        case "Bool": return .bool
        case "Date": return .date
        case "ClosedRange<Date>": return .closedRangeOfDate
        case "URL": return .url
        default:
            throw APIError.invalid(path, "unknown type \"\(text)\"; use String, Int, Double, Bool, Date, ClosedRange<Date>, URL, [T], T? or an object")
        }
    }

    /// The schema back as JSON, in the same form.
    static func json(_ type: SwiftType) -> JSONValue {
        switch type {
        case .string, .int, .double, .bool, .date, .closedRangeOfDate, .url: .string(type.swiftName)
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
