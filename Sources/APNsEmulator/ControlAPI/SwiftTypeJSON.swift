import Foundation
import HTTPTypes
import JSONAPI
import LiveActivityKit
import SimulatedDevices

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
    static func attributesType(_ value: JSONValue, path: String) throws -> ActivityAttributesType {
        let body = try JSONBodyReader(value, path: path, fields: ["name", "attributes", "contentState"])
        let name = try body.requireString("name")
        return ActivityAttributesType(
            name: name,
            attributes: try structure(body.require("attributes"), name: name, path: body.field("attributes")),
            contentState: try structure(body.require("contentState"), name: "ContentState", path: body.field("contentState")))
    }

    static func structure(_ value: JSONValue, name: String, path: String) throws -> SwiftStruct {
        guard let members = value.objectMembers else {
            throw APIError(.badRequest, code: "wrong_type", message: "must be an object of field names to types, got \(value.typeName)", field: path)
        }
        var fields: [SwiftStruct.Field] = []
        for member in members {
            fields.append(.init(member.key, try type(member.value, path: JSONBodyReader.join(path, member.key))))
        }
        return SwiftStruct(name, fields)
    }

    static func type(_ value: JSONValue, path: String) throws -> SwiftType {
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

    private static func named(_ text: String, path: String) throws -> SwiftType {
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
