import AsyncHTTPClient
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// What a backend asks of an endpoint (`POST /v1/webhooks`).
package struct WebhookRegistration: Sendable, Hashable {
    package var url: String
    /// nil: every type.
    package var eventTypes: Set<EventType>?
    package var description: String?

    package init(url: String, eventTypes: Set<EventType>? = nil, description: String? = nil) {
        self.url = url
        self.eventTypes = eventTypes
        self.description = description
    }
}

/// A change to an endpoint (`PATCH /v1/webhooks/{id}`): what is nil stays.
package struct WebhookChange: Sendable, Hashable {
    package var url: String?
    /// `.some(nil)`: every type.
    package var eventTypes: Set<EventType>??
    package var description: String??
    package var enabled: Bool?

    package init(url: String? = nil, eventTypes: Set<EventType>?? = nil, description: String?? = nil, enabled: Bool? = nil) {
        self.url = url
        self.eventTypes = eventTypes
        self.description = description
        self.enabled = enabled
    }
}

/// Webhooks: the endpoints backends register, and posting the events to them.
extension RelayService {
    /// Endpoints an app may have: each is posted every event, so they are few.
    package static let maximumWebhooksPerApp = 20

    /// Makes an endpoint; returns it with its secret, which is shown this once.
    package func createWebhook(app: String, _ registration: WebhookRegistration) async throws -> WebhookEndpointRecord {
        _ = try await self.app(app, field: "bundleID")
        try checkWebhook(url: registration.url, description: registration.description)
        let date = now()
        var endpoint = WebhookEndpointRecord(
            id: NewEvent.newEndpointID(), bundleID: app, url: registration.url, description: registration.description,
            eventTypes: registration.eventTypes, secret: WebhookSecret.generate().text, createdAt: date)
        let secret = endpoint.secret
        endpoint.secret = masterKey.seal(secret, for: endpoint.id)
        guard try await store.insertWebhookEndpoint(endpoint, limit: Self.maximumWebhooksPerApp) else {
            throw RelayError(
                .conflict, .tooManyWebhooks, message: "an app may have \(Self.maximumWebhooksPerApp) endpoints: delete one first", field: "url")
        }
        endpoint.secret = secret
        webhookBook.invalidate()
        noteChange()
        logger.info("webhook endpoint made", metadata: ["app": "\(app)", "endpoint": "\(endpoint.id)"])
        return endpoint
    }

    /// The endpoints of an app (nil: every app).
    package func webhooks(app: String?) async throws -> [WebhookEndpointRecord] {
        try await store.webhookEndpoints(app: app)
    }

    /// The endpoint, if `app` (when given) may see it.
    package func webhook(id: String, app: String?) async throws -> WebhookEndpointRecord {
        guard let endpoint = try await store.webhookEndpoint(id: id), app == nil || endpoint.bundleID == app else {
            throw RelayError.notFound("id", "no webhook endpoint \(id)")
        }
        return endpoint
    }

    package func updateWebhook(id: String, app: String?, _ change: WebhookChange) async throws -> WebhookEndpointRecord {
        var endpoint = try await webhook(id: id, app: app)
        if let url = change.url { endpoint.url = url }
        if let types = change.eventTypes { endpoint.eventTypes = types }
        if let description = change.description { endpoint.description = description }
        try checkWebhook(url: endpoint.url, description: endpoint.description)
        if let enabled = change.enabled, enabled != endpoint.enabled {
            endpoint.enabled = enabled
            // Enabled again, it starts with a clean record; disabled by its owner, it says so.
            endpoint.disabledReason = enabled ? nil : "disabled by its owner"
            endpoint.failingSince = nil
        }
        endpoint.updatedAt = now()
        guard try await store.updateWebhookEndpoint(endpoint) else { throw RelayError.notFound("id", "no webhook endpoint \(id)") }
        webhookBook.invalidate()
        noteChange()
        return endpoint
    }

    package func deleteWebhook(id: String, app: String?) async throws {
        _ = try await webhook(id: id, app: app)
        guard try await store.deleteWebhookEndpoint(id: id) else { throw RelayError.notFound("id", "no webhook endpoint \(id)") }
        webhookBook.invalidate()
        noteChange()
    }

    /// Sends the endpoint a `webhook.test` event (it alone); returns the event's id.
    package func testWebhook(id: String, app: String?) async throws -> String {
        let endpoint = try await webhook(id: id, app: app)
        guard endpoint.enabled else {
            throw RelayError(.conflict, .webhookDisabled, message: "the endpoint is disabled: enable it first (PATCH enabled: true)", field: "id")
        }
        let event = NewEvent(
            .webhookTest, bundleID: endpoint.bundleID, key: "",
            data: [("endpointID", .string(endpoint.id)), ("message", .string("a test sent on request"))])
        let eventID = try await store.recordTestEvent(event, endpointID: endpoint.id, at: now())
        noteChange()
        return eventID
    }

    /// Posts an event to the endpoint again, at once.
    package func redeliverWebhookEvent(id: String, app: String?, eventID: String) async throws {
        _ = try await webhook(id: id, app: app)
        guard try await store.redeliverWebhookEvent(endpointID: id, eventID: eventID, at: now()) else {
            throw RelayError.notFound("eventID", "no event \(eventID) of the endpoint's app")
        }
        noteChange()
    }

    /// The endpoint's latest deliveries, the last attempted first.
    package func webhookDeliveries(id: String, app: String?, limit: Int = 50) async throws -> [WebhookDeliveryRecord] {
        _ = try await webhook(id: id, app: app)
        return try await store.webhookDeliveries(endpointID: id, limit: limit)
    }

    private func checkWebhook(url: String, description: String?) throws {
        let ownPorts = ownLoopbackPorts.withLock { $0 }
        if let refusal = configuration.webhooks.addresses.refusal(ofURL: url, ownPorts: ownPorts) { throw RelayError.invalid("url", refusal) }
        if let description, description.count > 500 { throw RelayError.invalid("description", "must be at most 500 characters") }
    }

    // MARK: Posting

    /// Whether any endpoint is enabled (as of the last few seconds, for another instance's).
    package func hasEnabledWebhooks() async throws -> Bool {
        try await webhookBook.value(from: store)
    }

    /// Claims the deliveries due, posts them at once, and records what became of them; returns
    /// how many were claimed (tests: the sender overlaps these steps).
    package func postDueWebhooks() async throws -> Int {
        let claimed = try await claimDueWebhooks(limit: configuration.webhooks.batchSize)
        guard !claimed.isEmpty else { return 0 }
        let attempts = await withTaskGroup(of: (ClaimedWebhookDelivery, WebhookAttempt).self) { group in
            for delivery in claimed { group.addTask { (delivery, await self.post(delivery)) } }
            var attempts: [(ClaimedWebhookDelivery, WebhookAttempt)] = []
            for await attempt in group { attempts.append(attempt) }
            return attempts
        }
        try await recordWebhookAttempts(attempts)
        return claimed.count
    }

    /// Up to `limit` deliveries due now, claimed for one lease.
    func claimDueWebhooks(limit: Int) async throws -> [ClaimedWebhookDelivery] {
        let start = now()
        let rules = configuration.webhooks
        return try await store.claimWebhookDeliveries(
            dueBy: start, limit: limit, perEndpoint: rules.inFlightPerEndpoint, leaseUntil: start + rules.lease)
    }

    /// Records what became of attempts, as the rules say: delivered, to be retried, or given up;
    /// an endpoint failing too long is disabled.
    func recordWebhookAttempts(_ attempts: [(ClaimedWebhookDelivery, WebhookAttempt)]) async throws {
        guard !attempts.isEmpty else { return }
        let rules = configuration.webhooks
        let outcomes = attempts.map { delivery, attempt in
            (delivery.id, rules.outcome(of: attempt, attemptsBefore: delivery.attempts, random: Double.random(in: 0..<1)))
        }
        let date = now()
        let disabled = try await store.recordWebhookOutcomes(outcomes, disableFailingSince: rules.disableFailingSince(at: date), at: date)
        for (_, outcome) in outcomes {
            switch outcome {
            case .delivered: metrics.count(Metric.webhookAttemptsTotal, ["result": "delivered"])
            case .retry: metrics.count(Metric.webhookAttemptsTotal, ["result": "failed"])
            case .gaveUp:
                metrics.count(Metric.webhookAttemptsTotal, ["result": "failed"])
                metrics.count(Metric.webhookDeliveriesFailedTotal, [:])
            }
        }
        for endpoint in disabled {
            webhookBook.invalidate()
            logger.warning("webhook endpoint disabled: its attempts failed for too long", metadata: ["endpoint": "\(endpoint)"])
        }
        noteChange()
    }

    /// One attempt to post a delivery's event: signed, within the attempt's timeout, never
    /// following a redirect, and only to an address allowed: the URL is read again, its host
    /// resolved once and every address checked, and the attempt connects to the checked address
    /// on a connection of its own (the name keeps the `Host` header and TLS's server name). A
    /// name that resolves elsewhere a moment later, or a connection kept from an earlier check,
    /// can never carry a post to an address that was not checked.
    func post(_ delivery: ClaimedWebhookDelivery) async -> WebhookAttempt {
        let rules = configuration.webhooks
        let at = now()
        let started = ContinuousClock.now
        func attempt(status: Int? = nil, error: String?, excerpt: String? = nil) -> WebhookAttempt {
            let elapsed = ContinuousClock.now - started
            return WebhookAttempt(
                at: at, status: status, error: error,
                latencyMilliseconds: Int(elapsed.milliseconds),
                excerpt: excerpt)
        }
        let target: WebhookTarget
        switch WebhookTarget.parse(delivery.url) {
        case .success(let parsed): target = parsed
        case .failure(let refusal): return attempt(error: "refused: the URL cannot be posted to: \(refusal.reason)")
        }
        guard let secret = (try? masterKey.open(delivery.secret, for: delivery.endpointID)).flatMap(WebhookSecret.init) else {
            return attempt(error: "the endpoint's secret cannot be read")
        }
        let address: [UInt8]
        switch await rules.addresses.address(of: target, ownPorts: ownLoopbackPorts.withLock { $0 }) {
        case .success(let checked): address = checked
        case .failure(let refusal): return attempt(error: "refused: \(refusal.reason)")
        }
        let body = delivery.event.json.serialized
        // The receiver checks the timestamp against its own clock: the real time, whatever the
        // service's clock says.
        let timestamp = Int64(Date().timeIntervalSince1970)
        var request = HTTPClientRequest(url: delivery.url)
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/json")
        request.headers.add(name: "user-agent", value: "LiveRelay-Webhooks")
        request.headers.add(name: "webhook-id", value: delivery.event.id)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(name: "webhook-signature", value: secret.signature(id: delivery.event.id, timestamp: timestamp, body: body))
        request.body = .bytes(ByteBuffer(bytes: body))
        let client = HTTPClient(
            eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton),
            configuration: rules.clientConfiguration(connectingTo: address, for: target))
        func exchange() async -> WebhookAttempt {
            do {
                let response = try await client.execute(request, timeout: .milliseconds(Int64(rules.attemptTimeout * 1000)))
                let status = Int(response.status.code)
                var excerpt = ByteBuffer()
                for try await part in response.body {
                    var part = part
                    excerpt.writeBuffer(&part)
                    if excerpt.readableBytes >= rules.excerptLength * 4 { break }
                }
                let text = String(decoding: excerpt.readableBytesView, as: UTF8.self).prefix(rules.excerptLength)
                let kept = text.isEmpty ? nil : String(text)
                switch status {
                case 200..<300: return attempt(status: status, error: nil, excerpt: kept)
                case 300..<400:
                    let location = response.headers.first(name: "location").map { " to \($0.prefix(200))" } ?? ""
                    return attempt(status: status, error: "HTTP \(status): a redirect\(location), not followed", excerpt: kept)
                default: return attempt(status: status, error: "HTTP \(status)", excerpt: kept)
                }
            } catch let error as HTTPClientError where error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout {
                return attempt(error: "no answer within \(Int(rules.attemptTimeout)) s")
            } catch {
                return attempt(error: Self.describe(error))
            }
        }
        let outcome = await exchange()
        // Its one connection closes with it.
        try? await client.shutdown()
        return outcome
    }

    /// A failed connection in a few words, for people.
    static func describe(_ error: any Error) -> String {
        let text = "\(error)"
        if text.contains("connectionRefused") || text.contains("Connection refused") { return "connection refused" }
        if text.lowercased().contains("ssl") || text.lowercased().contains("certificate") || text.contains("handshake") {
            return "TLS failed: \(text.prefix(160))"
        }
        return "no answer: \(text.prefix(160))"
    }
}

extension EventRecord {
    /// The event as the API lists it and as webhooks post it: the same object both ways.
    package var json: JSONValue {
        var members: JSONValue.Members = [
            ("id", .string(id)), ("type", .string(type.rawValue)), ("occurredAt", .string(occurredAt.iso8601)), ("bundleID", .string(bundleID)),
        ]
        if let environment { members.append(("environment", .string(environment.rawValue))) }
        members.append(("key", .string(key)))
        if let deviceID { members.append(("deviceID", .string(deviceID))) }
        members.append(("data", data))
        return .object(members)
    }
}
