import LiveActivityKit

/// Validates and encodes payloads, naming the API field at fault.
enum PayloadEncoding {
    static func encode(_ payload: LiveActivityPayload, for destination: LiveActivityPayload.Destination) throws -> [UInt8] {
        do {
            return try payload.encoded(for: destination)
        } catch {
            throw RelayError(error, field: apiField(ofPayloadPath: error.field))
        }
    }

    static func apiField(ofPayloadPath path: String) -> String? {
        let names = [
            "content-state": "contentState", "stale-date": "staleDate", "relevance-score": "relevanceScore", "alert": "alert",
            "attributes": "attributes", "attributes-type": "attributesType", "dismissal-date": "dismissalDate",
        ]
        guard path.hasPrefix("aps.") else { return nil }
        let rest = path.dropFirst(4)
        let head = rest.prefix { $0 != "." && $0 != "[" }
        guard let name = names[String(head)] else { return nil }
        return name + rest.dropFirst(head.count)
    }
}
