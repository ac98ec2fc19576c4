import Foundation
import LiveActivityKit

// What the service asks the store to write (plans made from snapshots, pushes to queue, what else a write
// records) and what comes back (what was accepted, what became of a send, the store's own refusals).

/// A push to queue, all but its target, as an accepted request planned it.
package struct NewPush: Sendable, Hashable {
    package var bundleID: String
    package var key: String
    package var event: DeliveryAction
    /// Index into the plan's payloads; pushes of one request share one stored body.
    package var payloadIndex: Int
    package var priority: APNsPriority
    /// Why this priority (`requested`, `alert`, `within budget 3/15`, `over budget`).
    package var priorityReason: String
    /// `apns-expiration` in seconds since 1970; nil sends none.
    package var expiration: Int64?
    package var timestamp: Int64
    package var requestID: String

    package init(
        bundleID: String, key: String, event: DeliveryAction, payloadIndex: Int, priority: APNsPriority, priorityReason: String,
        expiration: Int64?,
        timestamp: Int64, requestID: String
    ) {
        self.bundleID = bundleID
        self.key = key
        self.event = event
        self.payloadIndex = payloadIndex
        self.priority = priority
        self.priorityReason = priorityReason
        self.expiration = expiration
        self.timestamp = timestamp
        self.requestID = requestID
    }
}

/// A push to queue to one target.
package struct NewDelivery: Sendable, Hashable {
    package var push: NewPush
    package var target: DeliveryTarget
    /// The APNs environment of the target's token or channel.
    package var environment: PushEnvironment

    package init(
        bundleID: String, key: String, event: DeliveryAction, target: DeliveryTarget, environment: PushEnvironment,
        payloadIndex: Int, priority: APNsPriority, priorityReason: String, expiration: Int64?, timestamp: Int64, requestID: String
    ) {
        self.environment = environment
        push = NewPush(
            bundleID: bundleID, key: key, event: event, payloadIndex: payloadIndex, priority: priority, priorityReason: priorityReason,
            expiration: expiration, timestamp: timestamp, requestID: requestID)
        self.target = target
    }
}

/// What became of one send.
package enum DeliveryOutcome: Sendable, Hashable {
    case sent(status: Int, apnsID: String?)
    /// Try again at `at`; `status`/`reason` are nil when no answer came.
    case retry(at: Date, status: Int?, reason: String)
    /// Failed for good; `tokenIsDead` stops every later push to the token.
    case failed(status: Int?, reason: String, tokenIsDead: Bool)

    /// To be sent again later: the push is due again at a time of its own.
    package var isRetry: Bool {
        if case .retry = self { true } else { false }
    }
}

/// Which devices a start goes to.
package enum Audience: Sendable, Hashable, Codable {
    case devices([String])
    case users([String])
    /// Every device with a live push-to-start token for the attributes type.
    case everyone
}

/// A write's idempotency key, and the hash of the request it came with.
package struct IdempotencyClaim: Sendable, Hashable {
    package var apiKeyID: String
    package var key: String
    package var requestHash: String

    package init(apiKeyID: String, key: String, requestHash: String) {
        self.apiKeyID = apiKeyID
        self.key = key
        self.requestHash = requestHash
    }
}

/// An idempotency key's request and the answer kept for it.
package struct IdempotentAnswer: Sendable, Hashable {
    package var requestHash: String
    package var answer: AcceptedRequest

    package init(requestHash: String, answer: AcceptedRequest) {
        self.requestHash = requestHash
        self.answer = answer
    }
}

/// What else an accepting write records in its transaction.
package struct WriteContext: Sendable, Hashable {
    package var idempotency: IdempotencyClaim?
    /// The schedule this write runs; it is marked done with the write.
    package var scheduleID: String?
    /// Set when a dispatcher is running with room to take the request's pushes at once.
    package var handOver: HandOver?
    /// The request's trace context (W3C `traceparent`), kept with its payloads so that whichever
    /// instance sends its pushes continues its trace; nil when no tracer runs.
    package var traceParent: String?

    package init(idempotency: IdempotencyClaim? = nil, scheduleID: String? = nil, handOver: HandOver? = nil, traceParent: String? = nil) {
        self.idempotency = idempotency
        self.scheduleID = scheduleID
        self.handOver = handOver
        self.traceParent = traceParent
    }
}

/// Lets an accepting write claim its own pushes for the running dispatcher, leased until
/// `leaseUntil` as a claim would, when there are at most `limit`: the dispatcher then sends them
/// at once, without a transaction of its own to claim them. Past the limit they are queued.
package struct HandOver: Sendable, Hashable {
    package var leaseUntil: Date
    package var limit: Int

    package init(leaseUntil: Date, limit: Int) {
        self.leaseUntil = leaseUntil
        self.limit = limit
    }
}

/// What an accepting write stored: the outcome its plan gave, and the pushes it claimed for the
/// dispatcher (empty unless it was given a hand-over and the pushes fit in it).
package struct Accepted<Outcome: Sendable>: Sendable {
    package var outcome: Outcome
    package var claimed: [DeliveryRecord]

    package init(outcome: Outcome, claimed: [DeliveryRecord] = []) {
        self.outcome = outcome
        self.claimed = claimed
    }
}

/// A start to record: the new key, the pushes (to the audience's push-to-start tokens), and what
/// the request did (`acceptance`), kept for the write's idempotency key or schedule.
package struct StartPlan: Sendable {
    package var acceptedAt: Date
    package var activity: ActivityRecord
    package var payloads: [[UInt8]]
    package var deliveries: [NewDelivery]
    package var acceptance: Acceptance

    package init(acceptedAt: Date, activity: ActivityRecord, payloads: [[UInt8]], deliveries: [NewDelivery], acceptance: Acceptance) {
        self.acceptedAt = acceptedAt
        self.activity = activity
        self.payloads = payloads
        self.deliveries = deliveries
        self.acceptance = acceptance
    }
}

/// How an update or end spends the priority-10 budget, which decides what the store reads for it.
package enum ChangeBudget: Sendable, Hashable {
    /// One priority fits every push (asked for, or an alert's): the store reads only how many live
    /// tokens the key has, and the plan's `fanOut` goes to each.
    case notCounted
    /// Priority `auto` without an alert: the store reads the live tokens and each one's priority-10
    /// pushes since `windowStart`, and the plan decides a priority for each.
    case perDevice(windowStart: Date)
    /// One priority fits every push, but the plan lists them (it chooses which tokens to send to:
    /// the devices whose app version decodes the change): the store reads the live tokens, and
    /// counts nothing.
    case listed

    /// Where the counting window starts; nil when nothing is counted.
    package var windowStart: Date? {
        if case .perDevice(let start) = self { start } else { nil }
    }

    /// Whether the store reads the key's live tokens for the plan.
    package var readsTokens: Bool { self != .notCounted }
}

/// What an update or end sees of its key, in its transaction.
package struct ChangeSnapshot: Sendable {
    package var activity: ActivityRecord?
    /// The key's live update tokens, when the change lists its pushes (`ChangeBudget.readsTokens`);
    /// otherwise empty, and the plan's `fanOut` goes to every one.
    package var liveTokens: [ActivityTokenRecord]
    /// How many live update tokens the key has.
    package var liveTokenCount: Int
    /// Devices sent the key's start that have not reported under it yet (`StoreStatements.awaitingDevices`).
    package var awaitingDevices: Int
    /// Priority-10 pushes queued or sent to each device under the key since the budget window
    /// began; broadcasts count under their channel id.
    package var priority10Counts: [String: Int]
    /// The channels the key is bound to.
    package var channels: [ChannelRecord]

    package init(
        activity: ActivityRecord?, liveTokens: [ActivityTokenRecord] = [], liveTokenCount: Int = 0, priority10Counts: [String: Int] = [:],
        channels: [ChannelRecord] = [], awaitingDevices: Int = 0
    ) {
        self.awaitingDevices = awaitingDevices
        self.activity = activity
        self.liveTokens = liveTokens
        self.liveTokenCount = liveTokenCount
        self.priority10Counts = priority10Counts
        self.channels = channels
    }
}

/// An update or end to record: the key's new state, the pushes, and what the request did, kept for the
/// write's idempotency key or schedule.
package struct ChangePlan: Sendable {
    package var acceptedAt: Date
    /// The key after the change: the store writes its content and, when it ended, its lifecycle
    /// fields (state, end date and reason, dismissal date); a change never alters the rest.
    package var activity: ActivityRecord
    /// The one payload every push of the change carries (each push's `payloadIndex` is 0).
    package var payload: [UInt8]
    package var deliveries: [NewDelivery]
    /// Besides `deliveries`, one push like this to each of the key's live update tokens: the
    /// store writes them from its own rows, so a fan-out to a million tokens never passes
    /// through memory.
    package var fanOut: NewPush?
    /// When the key's channels are to be deleted (set when the key ends).
    package var channelDeleteAfter: Date?
    package var acceptance: Acceptance
    /// Targets of the change that `auto` sent at priority 5, their budget spent (nil: none).
    package var budgetExhausted: BudgetExhaustion?

    package init(
        acceptedAt: Date, activity: ActivityRecord, payload: [UInt8], deliveries: [NewDelivery] = [], fanOut: NewPush? = nil,
        channelDeleteAfter: Date? = nil, acceptance: Acceptance, budgetExhausted: BudgetExhaustion? = nil
    ) {
        self.budgetExhausted = budgetExhausted
        self.acceptedAt = acceptedAt
        self.activity = activity
        self.payload = payload
        self.deliveries = deliveries
        self.fanOut = fanOut
        self.channelDeleteAfter = channelDeleteAfter
        self.acceptance = acceptance
    }
}

/// A change's targets whose priority-10 budget is spent: `auto` sent them at priority 5.
package struct BudgetExhaustion: Sendable, Hashable {
    package var targetsOverBudget: Int
    package var targets: Int
    /// Priority-10 pushes an hour each may have.
    package var perHour: Int

    package init(targetsOverBudget: Int, targets: Int, perHour: Int) {
        self.targetsOverBudget = targetsOverBudget
        self.targets = targets
        self.perHour = perHour
    }
}

/// Errors of the store's own rules; the service maps them to API answers.
package struct StoreError: Error, Sendable, Hashable, CustomStringConvertible {
    package enum Code: String, Sendable, Hashable {
        case keyExists, keyEnded, idempotencyKeyTaken, scheduleNotPending
    }

    package let code: Code
    package let message: String

    package init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    package var description: String { message }
}

/// What a device that reports its update token under a key is caught up with, if anything: the
/// planner reads what the key's transaction read of it and of the device.
package struct CatchUp: Sendable {
    /// The start of the device's priority-10 budget window, which the snapshot counts from.
    package var budgetWindowStart: Date
    package var context: WriteContext
    package var plan: @Sendable (CatchUpSnapshot) -> CatchUpPlan?

    package init(budgetWindowStart: Date, context: WriteContext, plan: @escaping @Sendable (CatchUpSnapshot) -> CatchUpPlan?) {
        self.budgetWindowStart = budgetWindowStart
        self.context = context
        self.plan = plan
    }
}

/// A key and a device reporting its update token under it, read in the token's transaction.
package struct CatchUpSnapshot: Sendable {
    /// The key as it stands: its latest content, and whether (and how) it ended.
    package var activity: ActivityRecord
    /// The token the device reports.
    package var token: ActivityTokenRecord
    /// Whether the device was sent (or is still to be sent) the key's latest change.
    package var sentLatest: Bool
    /// The device's priority-10 pushes under the key since the budget window began.
    package var priority10Used: Int

    package init(activity: ActivityRecord, token: ActivityTokenRecord, sentLatest: Bool, priority10Used: Int) {
        self.activity = activity
        self.token = token
        self.sentLatest = sentLatest
        self.priority10Used = priority10Used
    }
}

/// The push that catches a device up with its key's latest state.
package struct CatchUpPlan: Sendable {
    package var payload: [UInt8]
    package var delivery: NewDelivery

    package init(payload: [UInt8], delivery: NewDelivery) {
        self.payload = payload
        self.delivery = delivery
    }
}

/// An update token saved: its key, and the catch-up it queued (claimed when a hand-over took it).
package struct SavedActivityToken: Sendable {
    package var activity: ActivityRecord
    package var caughtUp: NewDelivery?
    package var claimed: [DeliveryRecord]

    package init(activity: ActivityRecord, caughtUp: NewDelivery? = nil, claimed: [DeliveryRecord] = []) {
        self.activity = activity
        self.caughtUp = caughtUp
        self.claimed = claimed
    }
}
