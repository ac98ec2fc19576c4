import Foundation
import HTTPTypes
import Hummingbird
import JSONAPI
import LiveRelayStore

extension Request {
    /// The query's parameters by name (the first of each), without the empty ones when asked: a
    /// form leaves its unset fields empty.
    func queryDictionary(droppingEmpty: Bool = false) -> [String: String] {
        var parameters: [String: String] = [:]
        for (name, value) in uri.queryParameters where !(droppingEmpty && value.isEmpty) && parameters[String(name)] == nil {
            parameters[String(name)] = String(value)
        }
        return parameters
    }
}

/// How the API and the dashboard name a page of activities in a query string: `app`, `state`,
/// `attributesType`, `keyContains`, `after` (a cursor this server gave) and `limit`.
extension ActivityQuery {
    static let largestPage = 200

    /// `bundleID` is the app the caller is bound to or named (nil: every app); `limit` applies
    /// when the query gives none.
    init(parameters: [String: String], bundleID: String?, limit: Int) throws {
        func value(_ name: String) -> String? { parameters[name].flatMap { $0.isEmpty ? nil : $0 } }
        self.init(bundleID: bundleID ?? value("app"), attributesType: value("attributesType"), keyContains: value("keyContains"), limit: limit)
        // What no key can hold (`RelayService.checkKey`), and PostgreSQL's text cannot.
        if let text = keyContains, text.unicodeScalars.count > 200 || text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw APIError.invalid("keyContains", "must be at most 200 characters without control characters")
        }
        if let state = value("state") {
            guard let known = ActivityKeyState(rawValue: state) else { throw APIError.invalid("state", "must be active or ended") }
            self.state = known
        }
        if let after = value("after") { self.after = try ActivityCursor(token: after, field: "after") }
        // Not a form's empty field, as the filters may be: an empty limit is no number.
        if let text = parameters["limit"] {
            guard let number = Int(text), (1...Self.largestPage).contains(number) else {
                throw APIError.invalid("limit", "must be 1 to \(Self.largestPage)")
            }
            self.limit = number
        }
    }

    /// The query string of this filter (without `limit`), with `after` when given.
    func parameters(after: String? = nil) -> String {
        var items: [(String, String)] = []
        if let bundleID { items.append(("app", bundleID)) }
        if let state { items.append(("state", state.rawValue)) }
        if let attributesType { items.append(("attributesType", attributesType)) }
        if let keyContains { items.append(("keyContains", keyContains)) }
        if let after { items.append(("after", after)) }
        return QueryString.make(items)
    }
}

/// How the API and the dashboard name a page of deliveries: `app`, `key`, `status`, `reason`,
/// `before` (a delivery id: the page after it, newest first) and `limit`.
extension DeliveryQuery {
    static let largestPage = 1000

    init(parameters: [String: String], bundleID: String?, limit: Int = 100) throws {
        self.init(bundleID: bundleID ?? parameters["app"], key: parameters["key"], limit: limit)
        if let status = parameters["status"] {
            guard let value = DeliveryStatus(rawValue: status) else {
                throw APIError.invalid("status", "must be one of \(DeliveryStatus.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            self.status = value
        }
        if let reason = parameters["reason"] {
            guard !reason.isEmpty else { throw APIError.invalid("reason", "must be an APNs reason, not empty") }
            self.reason = reason
        }
        if let before = parameters["before"] {
            guard let id = Int64(before) else { throw APIError.invalid("before", "must be a delivery id") }
            self.before = id
        }
        if let text = parameters["limit"] {
            guard let value = Int(text), (1...Self.largestPage).contains(value) else {
                throw APIError.invalid("limit", "must be 1 to \(Self.largestPage)")
            }
            self.limit = value
        }
    }

    /// The query string of this filter (without `limit`), with `before` when given.
    func parameters(before: Int64? = nil) -> String {
        var items: [(String, String)] = []
        if let bundleID { items.append(("app", bundleID)) }
        if let key { items.append(("key", key)) }
        if let status { items.append(("status", status.rawValue)) }
        if let reason { items.append(("reason", reason)) }
        if let before { items.append(("before", String(before))) }
        return QueryString.make(items)
    }
}

/// How the API names a page of the event log: `after` (the `next` of the page before: where to
/// read on from), `type` (comma-separated), `key`, `app` and `limit`.
extension EventQuery {
    static let largestPage = 1000

    init(parameters: [String: String], bundleID: String?) throws {
        self.init(bundleID: bundleID ?? parameters["app"], key: parameters["key"])
        if let after = parameters["after"] {
            guard let place = Int64(after), place >= 0 else { throw APIError.invalid("after", "must be the next of an earlier page, or 0") }
            self.after = place
        }
        if let names = parameters["type"] {
            var types: Set<EventType> = []
            for name in names.split(separator: ",", omittingEmptySubsequences: false) {
                guard let type = EventType(rawValue: String(name)) else {
                    throw APIError.invalid(
                        "type", "must be event types separated by commas, of \(EventType.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                types.insert(type)
            }
            self.types = types
        }
        if let text = parameters["limit"] {
            guard let value = Int(text), (1...Self.largestPage).contains(value) else {
                throw APIError.invalid("limit", "must be 1 to \(Self.largestPage)")
            }
            self.limit = value
        }
    }
}

/// Query strings made here: every character but the unreserved ones (and `/`) percent-encoded,
/// so that a key holding `&`, `=`, `+`, `?` or `#` comes back as it went.
enum QueryString {
    private static let kept = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~/"))

    static func make(_ items: [(String, String)]) -> String {
        items.map { "\(encoded($0.0))=\(encoded($0.1))" }.joined(separator: "&")
    }

    static func encoded(_ text: String) -> String {
        // Only ASCII letters and digits count as unreserved; `alphanumerics` alone has more.
        var result = ""
        for scalar in text.unicodeScalars {
            if scalar.isASCII, kept.contains(scalar) {
                result.unicodeScalars.append(scalar)
            } else {
                for byte in String(scalar).utf8 { result += String(format: "%%%02X", byte) }
            }
        }
        return result
    }
}

extension ActivityCursor {
    /// Opaque to clients: where the page ended, as URL-safe base64.
    var token: String {
        Data("\(startedAt.timeIntervalSince1970)\n\(bundleID)\n\(key)".utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }

    init(token: String, field: String) throws {
        var base64 = token.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8) else {
            throw APIError.invalid(field, "is not a cursor this server gave")
        }
        let parts = text.split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, let seconds = Double(parts[0]), seconds.isFinite else {
            throw APIError.invalid(field, "is not a cursor this server gave")
        }
        self.init(startedAt: Date(timeIntervalSince1970: seconds), bundleID: String(parts[1]), key: String(parts[2]))
    }
}
