import Foundation
import LiveActivityKit

/// Where an app's backend hears its events: an address the events are posted to, signed with the
/// endpoint's secret (Standard Webhooks).
package struct WebhookEndpointRecord: Sendable, Hashable {
    /// `we_…`
    package var id: String
    package var bundleID: String
    package var url: String
    package var description: String?
    /// The event types it is sent (nil: every type).
    package var eventTypes: Set<EventType>?
    /// `whsec_…`, shown once, when the endpoint is made; as stored, sealed by the master key.
    package var secret: String
    package var enabled: Bool
    /// Why it was disabled: by the server after failing for days, or by its owner.
    package var disabledReason: String?
    /// When its attempts started failing, with none delivered since (nil: the last one worked).
    package var failingSince: Date?
    package var createdAt: Date
    package var updatedAt: Date

    package init(
        id: String, bundleID: String, url: String, description: String? = nil, eventTypes: Set<EventType>? = nil, secret: String,
        enabled: Bool = true, disabledReason: String? = nil, failingSince: Date? = nil, createdAt: Date, updatedAt: Date? = nil
    ) {
        self.id = id
        self.bundleID = bundleID
        self.url = url
        self.description = description
        self.eventTypes = eventTypes
        self.secret = secret
        self.enabled = enabled
        self.disabledReason = disabledReason
        self.failingSince = failingSince
        self.createdAt = createdAt
        self.updatedAt = updatedAt ?? createdAt
    }

    /// Whether the endpoint is sent events of `type` (a test goes only to the endpoint tested).
    package func wants(_ type: EventType) -> Bool {
        type != .webhookTest && (eventTypes?.contains(type) ?? true)
    }
}

/// What became of one attempt to post an event to an endpoint.
package struct WebhookAttempt: Sendable, Hashable {
    package var at: Date
    /// The endpoint's HTTP status, when it answered.
    package var status: Int?
    /// Why it did not count as delivered, when it did not: the status, a timeout, a refused address…
    package var error: String?
    package var latencyMilliseconds: Int
    /// The start of the endpoint's answer, for people (a few hundred characters at most).
    package var excerpt: String?

    package init(at: Date, status: Int? = nil, error: String? = nil, latencyMilliseconds: Int = 0, excerpt: String? = nil) {
        self.at = at
        self.status = status
        self.error = error
        self.latencyMilliseconds = latencyMilliseconds
        self.excerpt = excerpt
    }

    /// Any 2xx answer, and nothing else, delivers (a redirect is not followed).
    package var delivered: Bool { error == nil && status.map { (200..<300).contains($0) } == true }
}

package enum WebhookDeliveryStatus: String, Sendable, Hashable, CaseIterable, Codable {
    /// To be posted, or being posted (leased), or waiting for its next attempt.
    case pending
    case delivered
    /// Every attempt failed; it is not posted again unless redelivered.
    case failed
}

/// What to do with a delivery after an attempt.
package enum WebhookOutcome: Sendable, Hashable {
    case delivered(WebhookAttempt)
    /// Failed; the next attempt at `at`.
    case retry(WebhookAttempt, at: Date)
    /// Failed for the last time.
    case gaveUp(WebhookAttempt)

    var attempt: WebhookAttempt {
        switch self {
        case .delivered(let attempt), .retry(let attempt, _), .gaveUp(let attempt): attempt
        }
    }
}

/// An event's delivery to one endpoint, as people read it.
package struct WebhookDeliveryRecord: Sendable, Hashable {
    package var id: Int64
    package var endpointID: String
    package var eventID: String
    package var eventType: EventType
    package var key: String
    package var status: WebhookDeliveryStatus
    package var attempts: Int
    /// When it is next attempted, while pending.
    package var dueAt: Date
    package var lastAttempt: WebhookAttempt?
    package var finishedAt: Date?
}

/// A delivery claimed to be posted: the event, and where to post it with what secret.
package struct ClaimedWebhookDelivery: Sendable, Hashable {
    package var id: Int64
    /// Attempts made before this one.
    package var attempts: Int
    package var endpointID: String
    package var url: String
    package var secret: String
    package var event: EventRecord
}

extension NewEvent {
    /// A new endpoint's id.
    package static func newEndpointID() -> String {
        "we_" + UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
    }
}
