import Foundation
import Hummingbird
import LiveActivityKit

/// Reads a JSON object field by field, for the bodies `Codable` cannot read faithfully: those that
/// carry free-form JSON whose literals must reach the device as written (attributes, content
/// state), or whose member order means something (a struct's fields). Every error names the full
/// path of the field and the rule, and keys the request does not define are refused with a hint.
/// Bodies of a fixed shape are `APIRequestBody`s instead.
package struct JSONBodyReader {
    package let members: JSONValue.Members
    package let path: String

    package init(_ value: JSONValue, path: String = "", fields: [String]) throws(JSONFieldError) {
        guard let members = value.objectMembers else {
            let what = path.isEmpty ? "the body must be" : "must be"
            throw JSONFieldError(code: "wrong_type", message: "\(what) a JSON object, got \(value.typeName)", field: path.isEmpty ? nil : path)
        }
        for member in members where !fields.contains(member.key) {
            throw JSONFieldError(
                code: "unknown_key", message: "is not a field of this request\(didYouMean(member.key, in: fields))",
                field: Self.join(path, member.key))
        }
        self.members = members
        self.path = path
    }

    /// A request body as JSON, or `invalid_json`.
    package static func parse(_ bytes: some Collection<UInt8>) throws(JSONFieldError) -> JSONValue {
        do {
            return try JSONValue(parsing: bytes)
        } catch {
            throw JSONFieldError(code: "invalid_json", message: "the body is not valid JSON: \(error)", field: nil)
        }
    }

    package static func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }
    package func field(_ key: String) -> String { Self.join(path, key) }

    /// The value, `nil` when absent or `null`.
    package func value(_ key: String) -> JSONValue? {
        guard let value = members.first(where: { $0.key == key })?.value, value != .null else { return nil }
        return value
    }

    package func require(_ key: String) throws(JSONFieldError) -> JSONValue {
        guard let value = value(key) else { throw JSONFieldError(code: "missing", message: "is required", field: field(key)) }
        return value
    }

    private func wrongType(_ key: String, _ expected: String, _ value: JSONValue) -> JSONFieldError {
        JSONFieldError(code: "wrong_type", message: "must be \(expected), got \(value.typeName)", field: field(key))
    }

    package func string(_ key: String) throws(JSONFieldError) -> String? {
        guard let value = value(key) else { return nil }
        guard let text = value.stringValue else { throw wrongType(key, "a string", value) }
        return text
    }

    package func requireString(_ key: String) throws(JSONFieldError) -> String {
        guard let text = try string(key) else { throw JSONFieldError(code: "missing", message: "is required", field: field(key)) }
        guard !text.isEmpty else { throw JSONFieldError.invalid(field(key), "must not be empty") }
        return text
    }

    package func bool(_ key: String) throws(JSONFieldError) -> Bool? {
        guard let value = value(key) else { return nil }
        guard case .bool(let flag) = value else { throw wrongType(key, "true or false", value) }
        return flag
    }

    package func number(_ key: String) throws(JSONFieldError) -> Double? {
        guard let value = value(key) else { return nil }
        guard let number = value.doubleValue, case .number = value else { throw wrongType(key, "a number", value) }
        return number
    }

    package func object(_ key: String, fields: [String]) throws(JSONFieldError) -> JSONBodyReader? {
        guard let value = value(key) else { return nil }
        return try JSONBodyReader(value, path: field(key), fields: fields)
    }

    /// A date as ISO 8601 text or as seconds since 1970 (the form APNs payloads use), within
    /// `Date.supportedRange`.
    package func date(_ key: String) throws(JSONFieldError) -> Date? {
        guard let value = value(key) else { return nil }
        // A literal too large for a Double (1e400) reads as infinity, and is refused as out of range.
        let seconds: Double? = if case .number(let literal) = value { Double(literal) ?? .infinity } else { nil }
        do {
            return try BodyDate.read(seconds: seconds, text: value.stringValue)
        } catch {
            throw JSONFieldError.invalid(field(key), error.rule)
        }
    }
}

/// A date in a request body, as both body readers take it: ISO 8601 text or seconds since 1970
/// (the form APNs payloads use), within `Date.supportedRange`.
package enum BodyDate {
    package struct Refusal: Error { package let rule: String }

    package static func read(seconds: Double?, text: String?) throws(Refusal) -> Date {
        let date: Date
        if let seconds {
            date = Date(timeIntervalSince1970: seconds)
        } else if let text, let parsed = ISO8601DateFormatter().date(from: text) {
            date = parsed
        } else {
            throw Refusal(rule: "must be an ISO 8601 date such as 2026-11-21T10:00:00Z, or seconds since 1970")
        }
        guard seconds?.isFinite != false, Date.supportedRange.contains(date) else {
            throw Refusal(rule: "must be a date \(Date.supportedRangeText)")
        }
        return date
    }
}

extension Request {
    /// The body as a checked JSON object.
    package func jsonObject(fields: [String], context: some RequestContext) async throws -> JSONBodyReader {
        let buffer = try await body.collect(upTo: context.maxUploadSize)
        return try JSONBodyReader(buffer.readableBytes == 0 ? .object([]) : JSONBodyReader.parse(buffer.readableBytesView), fields: fields)
    }
}
