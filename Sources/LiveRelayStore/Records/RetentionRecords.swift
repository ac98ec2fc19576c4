import Foundation

/// What retention deletes, each kind a batch at a time in a short transaction of its own, so
/// that the API's and the dispatcher's writes go on between batches.
package enum PruneKind: String, CaseIterable, Sendable {
    /// Finished pushes older than the history window, and the payloads none points to any more.
    case deliveries
    /// Finished webhook deliveries older than the history window.
    case webhookDeliveries
    /// Events older than the history window that no webhook delivery still waits to post.
    case events
    /// Schedules run, cancelled or failed, due before the history window.
    case schedules
    /// Activities ended before the ended window, with their tokens, channel bindings and listeners.
    case endedActivities
    /// Channels deleted at APNs before the ended window.
    case deletedChannels
    /// Idempotency keys older than their 24 hours.
    case idempotencyKeys
    /// Dashboard sessions past their expiry.
    case dashboardSessions
    /// Contracts of app versions no live token has, not registered again since before the ended
    /// window, and not pinned: the fleet has moved on from them.
    case unusedContractVersions

    /// The table whose rows count a batch: fewer than asked means nothing of the kind is left.
    package var table: String {
        switch self {
        case .deliveries: "deliveries"
        case .webhookDeliveries: "webhook_deliveries"
        case .events: "events"
        case .schedules: "schedules"
        case .endedActivities: "activities"
        case .deletedChannels: "channels"
        case .idempotencyKeys: "idempotency_keys"
        case .dashboardSessions: "dashboard_sessions"
        case .unusedContractVersions: "contracts"
        }
    }
}

/// How much a store holds (`RetentionStore.footprint`).
package struct StoreFootprint: Sendable, Hashable {
    /// Rows by table, of `counted`.
    package var rows: [String: Int]
    /// SQLite: the file's pages; PostgreSQL: the schema's tables with their indexes and TOAST.
    package var bytes: Int64

    /// The tables that grow with use.
    package static let counted = [
        "deliveries", "payloads", "events", "webhook_deliveries", "activities", "activity_tokens", "push_to_start_tokens",
        "idempotency_keys", "schedules", "channels",
    ]

    package init(rows: [String: Int], bytes: Int64) {
        self.rows = rows
        self.bytes = bytes
    }
}
