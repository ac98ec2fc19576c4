import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// What the API and the dashboard read.
extension RelayService {
    /// An app's key, its tokens with their last delivery results, the devices listening to its
    /// channel, and its schedules.
    package func describe(app: String, key: String) async throws -> ActivityDescription {
        try Self.checkKey(key)
        guard var activity = try await store.activity(app: app, key: key) else {
            throw RelayError.notFound("key", "no activity key \"\(key)\"")
        }
        let tokens = try await store.activityTokens(app: app, key: key)
        let listeners = try await store.channelListeners(app: app, key: key)
        activity.devices = ActivityDevices(tokens: tokens, listeners: listeners)
        return ActivityDescription(
            activity: activity, tokens: tokens, listeners: listeners, schedules: try await store.schedules(app: app, key: key))
    }

    /// A page of activities, newest first.
    package func activities(_ query: ActivityQuery) async throws -> [ActivityRecord] {
        try await store.activities(query)
    }

    /// A page of the event log, in order.
    package func events(_ query: EventQuery) async throws -> [EventRecord] {
        try await store.events(query)
    }

    /// The outbox's deliveries, newest first, as people read them: without the pushes' bytes.
    /// What the registry holds of a device: its push-to-start tokens, and its widget and control tokens.
    package func deviceTokens(deviceID: String) async throws -> (pushToStart: [PushToStartTokenRecord], surfaces: [SurfaceTokenRecord]) {
        (try await store.pushToStartTokens(deviceID: deviceID), try await store.surfaceTokens(deviceID: deviceID))
    }

    package func deliveries(_ query: DeliveryQuery) async throws -> [DeliveryRecord] {
        var query = query
        query.includePayloads = false
        return try await store.deliveries(query)
    }

    /// Sends a failed push again: the same payload to the same target, queued beside the failure
    /// (`DeliveryRetry`). `app`: the only app the caller may act for, if bound to one.
    package func retryDelivery(id: Int64, app: String?) async throws -> DeliveryRecord {
        switch try await store.retryDelivery(id: id, app: app, at: now()) {
        case .retried(let delivery):
            noteChange()
            outboxSignal.queued()
            logger.info("failed push retried", metadata: ["delivery": "\(id)", "retry": "\(delivery.id)"])
            return delivery
        case .refused(let refusal):
            throw RelayError(.conflict, .notRetryable, message: refusal.description, field: "id")
        case .notFound:
            throw RelayError.notFound("id", "no push \(id)")
        }
    }

    /// How many pushes wait to be sent or are being sent (cheap: read from the pending pushes alone).
    package func pendingDeliveryCount() async throws -> Int {
        try await store.pendingDeliveryCount()
    }

    /// How many deliveries the outbox holds in each state but `sent`, read from indexes alone.
    package func waitingAndUnsentCounts() async throws -> [DeliveryStatus: Int] {
        try await store.waitingAndUnsentCounts()
    }

    /// The metrics in Prometheus' text format.
    package func renderMetrics() async throws -> String {
        metrics.render(
            store: try await store.counts(), deliveries: try await store.waitingAndUnsentCounts(), apnsConnections: apns?.pushConnectionCount ?? 0,
            statements: store.statementsRun)
    }
}
