import Foundation

// A JSON value inside a `Codable` record is kept as its serialised text, so that its numbers keep
// their literal text (`1e2` stays `1e2`): what is built from it later is byte for byte the same.
extension KeyedEncodingContainer {
    package mutating func encode(json: JSONValue, forKey key: Key) throws {
        try encode(json.serializedString, forKey: key)
    }

    package mutating func encodeIfPresent(json: JSONValue?, forKey key: Key) throws {
        try encodeIfPresent(json?.serializedString, forKey: key)
    }
}

extension KeyedDecodingContainer {
    package func decodeJSON(forKey key: Key) throws -> JSONValue {
        do {
            return try JSONValue(parsing: Array(try decode(String.self, forKey: key).utf8))
        } catch let error as JSONParseError {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: error.description)
        }
    }

    package func decodeJSONIfPresent(forKey key: Key) throws -> JSONValue? {
        try contains(key) ? decodeJSON(forKey: key) : nil
    }
}
