import Foundation
import Hummingbird
import LiveActivityKit

/// A JSON body of a fixed shape, read with `Decodable`. Its keys are checked before decoding, so
/// that `bundleId` for `bundleID` is an error that says so instead of a silently missing field;
/// a nested object checks its own with `refuseUnknownKeys`. Every error is a `JSONFieldError`
/// naming the field and the rule.
package protocol APIRequestBody: Decodable {
    static var fields: [String] { get }
}

extension APIRequestBody {
    /// The body read from JSON bytes.
    package static func decode(json bytes: some Collection<UInt8>) throws(JSONFieldError) -> Self {
        let json = try JSONBodyReader.parse(bytes)
        guard json.objectMembers != nil else {
            throw JSONFieldError(code: "wrong_type", message: "the body must be a JSON object, got \(json.typeName)", field: nil)
        }
        do {
            return try JSONDecoder().decode(Checked<Self>.self, from: Data(bytes)).body
        } catch let error as JSONFieldError {
            throw error
        } catch let error as DecodingError {
            throw JSONFieldError(decoding: error)
        } catch {
            throw JSONFieldError(code: "invalid_value", message: "\(error)", field: nil)
        }
    }
}

/// Checks the keys of a body before decoding it.
private struct Checked<Body: APIRequestBody>: Decodable {
    let body: Body

    init(from decoder: any Decoder) throws {
        try decoder.refuseUnknownKeys(Body.fields)
        body = try Body(from: decoder)
    }
}

extension Request {
    /// The body as `Body`, or an error naming the field and the rule.
    package func decodeJSON<Body: APIRequestBody>(_ type: Body.Type, context: some RequestContext) async throws -> Body {
        let buffer = try await body.collect(upTo: context.maxUploadSize)
        guard buffer.readableBytes > 0 else { throw JSONFieldError(code: "missing", message: "the request needs a JSON body", field: nil) }
        return try Body.decode(json: buffer.readableBytesView)
    }
}

extension JSONFieldError {
    /// What `JSONDecoder` found wrong, in our terms.
    package init(decoding error: DecodingError) {
        let field = error.valuePath.isEmpty ? nil : error.valuePath
        switch error {
        case .keyNotFound:
            self.init(code: "missing", message: "is required", field: field)
        case .typeMismatch(let type, _), .valueNotFound(let type, _):
            self.init(code: "wrong_type", message: "must be \(Self.jsonName(of: type))", field: field)
        case .dataCorrupted(let context):
            self.init(code: "invalid_value", message: context.debugDescription, field: field)
        @unknown default:
            self.init(code: "invalid_value", message: "\(error)", field: field)
        }
    }

    private static func jsonName(of type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type, is Double.Type: "a number"
        case is Bool.Type: "true or false"
        case is [Any].Type: "an array"
        default: "an object"
        }
    }
}

/// Any key of a JSON object, for objects whose keys are data.
package struct JSONKey: CodingKey {
    package let stringValue: String
    package var intValue: Int? { nil }
    package init(_ name: String) { stringValue = name }
    package init(stringValue: String) { self.stringValue = stringValue }
    package init?(intValue: Int) { nil }
}

extension Decoder {
    /// Refuses a key of this object that is not one of `fields`, with a hint at the closest.
    package func refuseUnknownKeys(_ fields: [String]) throws {
        for key in try container(keyedBy: JSONKey.self).allKeys where !fields.contains(key.stringValue) {
            throw JSONFieldError(
                code: "unknown_key", message: "is not a field of this request\(didYouMean(key.stringValue, in: fields))",
                field: DecodingError.path(codingPath + [key]))
        }
    }
}

extension KeyedDecodingContainer {
    /// A string that must not be empty; nil when absent or null.
    package func nonEmptyString(_ key: Key) throws -> String? {
        guard let text = try decodeIfPresent(String.self, forKey: key) else { return nil }
        guard !text.isEmpty else { throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "must not be empty") }
        return text
    }

    /// A required string that must not be empty.
    package func requireNonEmptyString(_ key: Key) throws -> String {
        guard let text = try nonEmptyString(key) else {
            throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "is required"))
        }
        return text
    }

    /// An iOS version as `UIDevice` writes it (`"17.6.1"`), from push-to-start's 17.2 on.
    package func systemVersion(_ key: Key) throws -> SystemVersion? {
        guard let text = try decodeIfPresent(String.self, forKey: key) else { return nil }
        guard let version = SystemVersion(text) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self,
                debugDescription: "must be an iOS version such as \"17.6.1\", from \(SystemVersion.oldest) on (push-to-start's), got \"\(text)\"")
        }
        return version
    }

    /// A whole number within `range`; the check comes before the conversion, so `1e19` is
    /// refused rather than trapped on.
    package func integer(_ key: Key, in range: ClosedRange<Int>) throws -> Int? {
        guard let number = try decodeIfPresent(Double.self, forKey: key) else { return nil }
        guard number == number.rounded(), number >= Double(range.lowerBound), number <= Double(range.upperBound) else {
            throw DecodingError.dataCorruptedError(
                forKey: key, in: self, debugDescription: "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return Int(number)
    }

    /// A date as ISO 8601 text or as seconds since 1970, within `Date.supportedRange`; nil when
    /// absent or null.
    package func date(_ key: Key) throws -> Date? {
        guard contains(key), try !decodeNil(forKey: key) else { return nil }
        do {
            return try BodyDate.read(seconds: try? decode(Double.self, forKey: key), text: try? decode(String.self, forKey: key))
        } catch {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: error.rule)
        }
    }
}
