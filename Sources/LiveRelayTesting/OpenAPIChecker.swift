import Foundation
import LiveActivityKit

/// Checks an answer against an OpenAPI 3.1 document: the path, the method and the status must be
/// documented, and the JSON body must match the response's schema (the JSON Schema keywords the
/// document uses: type, properties, required, additionalProperties, items, enum, const, oneOf,
/// minItems, $ref).
package struct OpenAPIChecker: Sendable {
    package let document: JSONValue

    package init(document: JSONValue) {
        self.document = document
    }

    package struct Mismatch: Error, CustomStringConvertible {
        package let description: String
    }

    package func check(method: String, path: String, status: Int, body: JSONValue?) throws {
        let route = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        guard let (template, item) = pathItem(for: route) else { throw Mismatch(description: "\(route) is not in the document") }
        guard let operation = item[method.lowercased()] else { throw Mismatch(description: "\(method) \(template) is not in the document") }
        guard let response = operation["responses"]?[String(status)] else {
            throw Mismatch(description: "\(method) \(template) answered \(status), which the document does not list")
        }
        guard let schema = response["content"]?["application/json"]?["schema"] else { return }
        guard let body else { throw Mismatch(description: "\(method) \(template) \(status): the document promises JSON") }
        var problems: [String] = []
        validate(body, against: schema, at: "body", problems: &problems)
        if !problems.isEmpty { throw Mismatch(description: "\(method) \(template) \(status): " + problems.joined(separator: "; ")) }
    }

    private func pathItem(for path: String) -> (String, JSONValue)? {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        for (template, item) in document["paths"]?.objectMembers ?? [] {
            let pattern = template.split(separator: "/", omittingEmptySubsequences: false)
            guard pattern.count == parts.count else { continue }
            if zip(pattern, parts).allSatisfy({ $0.hasPrefix("{") || $0 == $1 }) { return (template, item) }
        }
        return nil
    }

    private func resolve(_ schema: JSONValue) -> JSONValue {
        guard let reference = schema["$ref"]?.stringValue, reference.hasPrefix("#/") else { return schema }
        var node = document
        for part in reference.dropFirst(2).split(separator: "/") { node = node[String(part)] ?? .null }
        return resolve(node)
    }

    private func validate(_ value: JSONValue, against raw: JSONValue, at path: String, problems: inout [String]) {
        let schema = resolve(raw)
        if let options = schema["oneOf"]?.arrayElements {
            let matching = options.filter { option in
                var inner: [String] = []
                validate(value, against: option, at: path, problems: &inner)
                return inner.isEmpty
            }
            if matching.count != 1 { problems.append("\(path) matches \(matching.count) of oneOf's \(options.count) schemas") }
            return
        }
        if let constant = schema["const"], constant != value { problems.append("\(path) must be \(constant.serializedString)") }
        if let cases = schema["enum"]?.arrayElements, !cases.contains(value) { problems.append("\(path) = \(value.serializedString) is not in enum") }
        if let type = schema["type"] {
            let allowed = type.arrayElements?.compactMap(\.stringValue) ?? [type.stringValue ?? ""]
            if !allowed.contains(where: { Self.has(value, type: $0) }) {
                problems.append("\(path) is \(value.typeName), not \(allowed.joined(separator: " or "))")
            }
        }
        if let members = value.objectMembers {
            let properties = schema["properties"]?.objectMembers ?? []
            for required in schema["required"]?.arrayElements?.compactMap(\.stringValue) ?? [] where value[required] == nil {
                problems.append("\(path).\(required) is required")
            }
            for member in members {
                if let property = properties.first(where: { $0.key == member.key }) {
                    validate(member.value, against: property.value, at: "\(path).\(member.key)", problems: &problems)
                } else if schema["additionalProperties"] == .bool(false) {
                    problems.append("\(path).\(member.key) is not documented")
                }
            }
        }
        if let elements = value.arrayElements {
            if let minimum = schema["minItems"]?.doubleValue, Double(elements.count) < minimum { problems.append("\(path) has too few items") }
            if let items = schema["items"] {
                for (index, element) in elements.enumerated() { validate(element, against: items, at: "\(path)[\(index)]", problems: &problems) }
            }
        }
    }

    private static func has(_ value: JSONValue, type: String) -> Bool {
        switch (type, value) {
        case ("object", .object), ("array", .array), ("string", .string), ("boolean", .bool), ("null", .null), ("number", .number): true
        case ("integer", .number): value.doubleValue.map { $0 == $0.rounded() } ?? false
        default: false
        }
    }
}
