import Foundation
import LiveRelayStore

/// How long what is done is kept, and how it is deleted: in batches of `batchSize` rows, each its
/// own short transaction, by the instance holding the ticker lease, every `interval`; a run stops
/// after `runBudget` and the next one goes on.
package struct RetentionPolicy: Sendable, Hashable {
    /// The history: pushes with their payloads, events, webhook deliveries, finished schedules.
    package var historyDays: Int
    /// Ended activities with their tokens and channels, counted from their end.
    package var endedDays: Int
    package var batchSize: Int
    package var interval: TimeInterval
    package var runBudget: Duration

    /// How long an idempotency key's answer is kept (the API's documentation says so).
    package static let idempotencyWindow: TimeInterval = 24 * 3600
    /// What `historyDays` and `endedDays` may be set to.
    package static let allowedDays = 1...3650

    package init(
        historyDays: Int = 30, endedDays: Int = 7, batchSize: Int = 1000, interval: TimeInterval = 60, runBudget: Duration = .milliseconds(250)
    ) {
        self.historyDays = historyDays
        self.endedDays = endedDays
        self.batchSize = batchSize
        self.interval = interval
        self.runBudget = runBudget
    }

    /// What of `kind` older than this is deleted at `now`.
    package func cutoff(for kind: PruneKind, at now: Date) -> Date {
        let day: TimeInterval = 86_400
        switch kind {
        case .deliveries, .webhookDeliveries, .events, .schedules: return now - Double(historyDays) * day
        case .endedActivities, .deletedChannels, .unusedContractVersions: return now - Double(endedDays) * day
        case .idempotencyKeys: return now - Self.idempotencyWindow
        case .dashboardSessions: return now
        }
    }
}
