import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// `/v1/webhooks`: an app's endpoints (a server key for its app, or an admin key), a test, a
/// redelivery, and each endpoint's latest deliveries.
extension RelayAPI {
    func addWebhookRoutes(to router: Router<RelayRequestContext>) {
        let webhooks = router.group("/v1/webhooks").add(middleware: guarded(.server, .admin))
        webhooks.post { request, context in
            let body = try await request.decodeJSON(WebhookBody.self, context: context)
            let app = try Self.bodyApp(body.bundleID, context)
            let endpoint = try await relay.createWebhook(app: app, body.registration)
            var view = Self.json(endpoint)
            // Shown this once: the receiver verifies every delivery with it.
            view.set("secret", .string(endpoint.secret))
            return Self.json(view, status: .created)
        }
        webhooks.get { request, context in
            let endpoints = try await relay.webhooks(app: try Self.appFilter(request, context))
            return Self.json(.object([("webhooks", .array(endpoints.map(Self.json)))]))
        }
        webhooks.get("/{id}") { _, context in
            let id = try Self.pathParameter("id", context)
            let app = context.apiKey?.bundleID
            var view = Self.json(try await relay.webhook(id: id, app: app))
            view.set("deliveries", .array(try await relay.webhookDeliveries(id: id, app: app, limit: 20).map(Self.json)))
            return Self.json(view)
        }
        webhooks.patch("/{id}") { request, context in
            let body = try await request.decodeJSON(WebhookPatchBody.self, context: context)
            let endpoint = try await relay.updateWebhook(id: try Self.pathParameter("id", context), app: context.apiKey?.bundleID, body.change)
            return Self.json(Self.json(endpoint))
        }
        webhooks.delete("/{id}") { _, context in
            let id = try Self.pathParameter("id", context)
            try await relay.deleteWebhook(id: id, app: context.apiKey?.bundleID)
            return Self.json(.object([("id", .string(id)), ("deleted", .bool(true))]))
        }
        webhooks.post("/{id}/test") { _, context in
            let id = try Self.pathParameter("id", context)
            let event = try await relay.testWebhook(id: id, app: context.apiKey?.bundleID)
            return Self.json(.object([("id", .string(id)), ("eventID", .string(event))]), status: .accepted)
        }
        webhooks.post("/{id}/redeliver") { request, context in
            let id = try Self.pathParameter("id", context)
            let body = try await request.decodeJSON(RedeliverBody.self, context: context)
            try await relay.redeliverWebhookEvent(id: id, app: context.apiKey?.bundleID, eventID: body.eventID)
            return Self.json(.object([("id", .string(id)), ("eventID", .string(body.eventID))]), status: .accepted)
        }
    }

    static func json(_ endpoint: WebhookEndpointRecord) -> JSONValue {
        var members: JSONValue.Members = [
            ("id", .string(endpoint.id)), ("bundleID", .string(endpoint.bundleID)), ("url", .string(endpoint.url)),
        ]
        if let description = endpoint.description { members.append(("description", .string(description))) }
        members.append(("eventTypes", endpoint.eventTypes.map { .array($0.map(\.rawValue).sorted().map(JSONValue.string)) } ?? .null))
        members.append(("enabled", .bool(endpoint.enabled)))
        if let reason = endpoint.disabledReason { members.append(("disabledReason", .string(reason))) }
        if let since = endpoint.failingSince { members.append(("failingSince", .string(since.iso8601))) }
        members += [("createdAt", .string(endpoint.createdAt.iso8601)), ("updatedAt", .string(endpoint.updatedAt.iso8601))]
        return .object(members)
    }

    static func json(_ delivery: WebhookDeliveryRecord) -> JSONValue {
        var members: JSONValue.Members = [
            ("id", .integer(delivery.id)), ("eventID", .string(delivery.eventID)), ("eventType", .string(delivery.eventType.rawValue)),
            ("key", .string(delivery.key)), ("status", .string(delivery.status.rawValue)), ("attempts", .integer(Int64(delivery.attempts))),
        ]
        if delivery.status == .pending { members.append(("dueAt", .string(delivery.dueAt.iso8601))) }
        if let attempt = delivery.lastAttempt {
            var last: JSONValue.Members = [("at", .string(attempt.at.iso8601))]
            if let status = attempt.status { last.append(("status", .integer(Int64(status)))) }
            if let error = attempt.error { last.append(("error", .string(error))) }
            last.append(("latencyMilliseconds", .integer(Int64(attempt.latencyMilliseconds))))
            if let excerpt = attempt.excerpt { last.append(("excerpt", .string(excerpt))) }
            members.append(("lastAttempt", .object(last)))
        }
        if let finished = delivery.finishedAt { members.append(("finishedAt", .string(finished.iso8601))) }
        return .object(members)
    }
}

/// `POST /v1/webhooks`.
package struct WebhookBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable { case url, eventTypes, description, bundleID }

    package let registration: WebhookRegistration
    /// The app (an admin key must name it; a server key's is its own).
    package let bundleID: String?

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        registration = WebhookRegistration(
            url: try body.requireNonEmptyString(.url), eventTypes: try body.eventTypes(.eventTypes) ?? nil,
            description: try body.decodeIfPresent(String.self, forKey: .description))
        bundleID = try body.nonEmptyString(.bundleID)
    }
}

/// `PATCH /v1/webhooks/{id}`: what it names changes; `null` sets every type, or no description.
package struct WebhookPatchBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable { case url, eventTypes, description, enabled }

    package let change: WebhookChange

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        var change = WebhookChange(url: try body.nonEmptyString(.url), eventTypes: try body.eventTypes(.eventTypes))
        if body.contains(.description) {
            change.description = .some(try body.decodeNil(forKey: .description) ? nil : try body.decode(String.self, forKey: .description))
        }
        change.enabled = try body.decodeIfPresent(Bool.self, forKey: .enabled)
        self.change = change
    }
}

/// `POST /v1/webhooks/{id}/redeliver`.
package struct RedeliverBody: APIRequestBody {
    package static let fields = CodingKeys.allCases.map(\.rawValue)
    enum CodingKeys: String, CodingKey, CaseIterable { case eventID }

    package let eventID: String

    package init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: CodingKeys.self)
        eventID = try body.requireNonEmptyString(.eventID)
    }
}

extension KeyedDecodingContainer {
    /// An endpoint's event types: absent, nil; `null`, every type (`.some(nil)`); else a list of
    /// at least one known type.
    fileprivate func eventTypes(_ key: Key) throws -> Set<EventType>?? {
        guard contains(key) else { return nil }
        if try decodeNil(forKey: key) { return .some(nil) }
        let names = try decode([String].self, forKey: key)
        guard !names.isEmpty else {
            throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "must name at least one type, or be null for every type")
        }
        var types = Set<EventType>()
        for name in names {
            guard let type = EventType(rawValue: name), type != .webhookTest else {
                let known = EventType.allCases.filter { $0 != .webhookTest }.map(\.rawValue).joined(separator: ", ")
                throw DecodingError.dataCorruptedError(forKey: key, in: self, debugDescription: "\(name.prefix(64)) is not an event type: \(known)")
            }
            types.insert(type)
        }
        return .some(types)
    }
}
