import Foundation
import LiveActivityKit

// What an accepted request did, kept with the write that accepts it: replayed for its idempotency
// key, and kept as a schedule's result. Typed values, encoded as JSON by the store; every answer
// is rendered from them by the API, whether fresh or replayed.

/// What an accepted start, update or end did.
package struct Acceptance: Sendable, Hashable, Codable {
    package var key: String
    package var action: LiveActivityPayload.Event
    /// Shared by the request's pushes in the outbox.
    package var requestID: String
    /// The payload's `timestamp`, which orders the key's pushes on the device.
    package var timestamp: Int64
    /// How many pushes were queued (a broadcast counts one).
    package var deliveries: Int
    /// How many devices of the audience had not reported the activity yet: each is sent the key's
    /// latest state when it does (nil in answers kept before they were counted, and for a start).
    package var held: Int?
    /// The key's state after the request.
    package var state: ActivityKeyState
    /// The broadcast channels the key's updates go through, one per APNs environment, when it has any.
    package var channelIDs: [PushEnvironment: String]
    /// What the sender should know although the request was accepted: that it reached no device,
    /// or that a date was probably meant in another unit.
    package var warnings: [String]
    /// The most of one target's hourly priority-10 budget the request spent, when it spent any
    /// (not answered; the dashboard's overview keeps it).
    package var budgetUse: BudgetUse?

    package init(
        key: String, action: LiveActivityPayload.Event, requestID: String, timestamp: Int64, deliveries: Int, held: Int? = nil,
        state: ActivityKeyState,
        channelIDs: [PushEnvironment: String] = [:],
        warnings: [String] = [], budgetUse: BudgetUse? = nil
    ) {
        self.budgetUse = budgetUse
        self.key = key
        self.action = action
        self.requestID = requestID
        self.timestamp = timestamp
        self.deliveries = deliveries
        self.held = held
        self.state = state
        self.channelIDs = channelIDs
        self.warnings = warnings
    }
}

/// A start, update or end done now, or kept to run at its time.
package enum AcceptedRequest: Sendable, Hashable, Codable {
    case accepted(Acceptance)
    case scheduled(ScheduleRecord)
    case reloaded(ReloadAcceptance)
}

/// What an accepted reload of an app's widgets or controls did.
package struct ReloadAcceptance: Sendable, Hashable, Codable {
    package var pushType: ReloadPushType
    /// The kinds asked for; nil: every one.
    package var kinds: [String]?
    /// Shared by the request's pushes in the outbox.
    package var requestID: String
    /// How many pushes were queued: one per widget token, one per control token.
    package var deliveries: Int
    /// Tokens of the audience left out because their device's reloads of the day are spent.
    package var heldBack: Int
    package var warnings: [String]

    package init(pushType: ReloadPushType, kinds: [String]?, requestID: String, deliveries: Int, heldBack: Int, warnings: [String] = []) {
        self.pushType = pushType
        self.kinds = kinds
        self.requestID = requestID
        self.deliveries = deliveries
        self.heldBack = heldBack
        self.warnings = warnings
    }
}

/// A target's priority-10 pushes in the last hour against its hourly budget.
package struct BudgetUse: Sendable, Hashable, Codable {
    package var used: Int
    package var limit: Int

    package init(used: Int, limit: Int) { (self.used, self.limit) = (used, limit) }

    /// Three quarters spent or more: the next pushes may soon go at priority 5.
    package var isNearLimit: Bool { used * 4 >= limit * 3 }
    package var share: Double { limit == 0 ? 1 : Double(used) / Double(limit) }
}

/// What running a schedule gave.
package enum ScheduleResult: Sendable, Hashable, Codable {
    /// It ran, and this is what its request did.
    case accepted(Acceptance)
    /// It ran a reload, and this is what it did.
    case reloaded(ReloadAcceptance)
    /// It could not run, and why.
    case failed(String)
}

extension ScheduleResult {
    /// What a request a schedule ran did; nil for an answer that is itself a schedule.
    package init?(ran answer: AcceptedRequest) {
        switch answer {
        case .accepted(let acceptance): self = .accepted(acceptance)
        case .reloaded(let reload): self = .reloaded(reload)
        case .scheduled: return nil
        }
    }
}
