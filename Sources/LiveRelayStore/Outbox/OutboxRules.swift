import Foundation
import LiveActivityKit

/// What happened that matters to the pushes in the outbox.
package enum OutboxTrigger: Sendable, Hashable {
    /// A request was accepted with these pushes (and `fanOut`, one to each live token of its key).
    case accepted(deliveries: [NewDelivery], fanOut: NewPush?)
    /// The answer to a claimed push was recorded.
    case answered(AnsweredDelivery, DeliveryOutcome)
    /// A device reported an activity under a key: its update token, or that it listens to the key's channel.
    case activityReported(ReportedActivity)
    /// A device reported the activity under a key ended or dismissed (`cause`: who, in its
    /// words); `wasLive`: it had not reported an end before.
    case activityEndedOnDevice(app: String, key: String, deviceID: String, state: ActivityTokenState, cause: String?, wasLive: Bool)
    /// A key ran past the eight hours an activity lives.
    case activityExpired(app: String, key: String)
    /// The backend ended a key (`/end`).
    case keyEnded(app: String, key: String)
    /// A change of the key went at priority 5 to targets whose budget is spent.
    case budgetExhausted(app: String, key: String, BudgetExhaustion)
    /// Pushes were claimed to be sent (among them, `starts`: the push-to-starts).
    case claimed(starts: [Int64])
    /// A dispatcher gave these claimed pushes up unsent, leased until `leasedUntil`: too little
    /// of their lease was left to send one and record its answer. They are due again at once,
    /// unless another instance claimed them since (its lease then ends later than this one).
    case abandoned(ids: [Int64], leasedUntil: Date)
    /// A server started. Alone on its store (SQLite), whatever was claimed before has no dispatcher
    /// any more. Sharing it with other instances (PostgreSQL), it cannot tell a dead instance's
    /// claims from a live one's: each runs out with its lease.
    case restarted(alone: Bool)
}

/// A push whose answer was recorded while it was claimed.
package struct AnsweredDelivery: Sendable, Hashable {
    package var id: Int64
    package var bundleID: String
    package var key: String
    package var event: DeliveryAction
    package var target: DeliveryTarget
    package var environment: PushEnvironment
    /// Attempts made, this one included.
    package var attempts: Int

    package init(
        id: Int64 = 0, bundleID: String, key: String, event: DeliveryAction = .update, target: DeliveryTarget,
        environment: PushEnvironment = .sandbox, attempts: Int = 1
    ) {
        self.id = id
        self.bundleID = bundleID
        self.key = key
        self.event = event
        self.target = target
        self.environment = environment
        self.attempts = attempts
    }
}

/// A device's report of an activity under a key, as the store found it.
package struct ReportedActivity: Sendable, Hashable {
    package var bundleID: String
    package var key: String
    package var deviceID: String
    package var activityID: String?
    package var environment: PushEnvironment
    /// The channel it listens to; nil: it reported an update token.
    package var channelID: String?
    /// The device had no live activity under the key before (not a token's rotation).
    package var isNew: Bool

    package init(
        bundleID: String, key: String, deviceID: String, activityID: String?, environment: PushEnvironment, channelID: String? = nil,
        isNew: Bool
    ) {
        self.bundleID = bundleID
        self.key = key
        self.deviceID = deviceID
        self.activityID = activityID
        self.environment = environment
        self.channelID = channelID
        self.isNew = isNew
    }
}

/// One thing a store does to carry out the rules.
package enum OutboxDecision: Sendable, Hashable {
    /// Applies an event to the deliveries a selection picks, of those in a status it applies to.
    case move(DeliveryMove)
    /// APNs refused the token for good: nothing is sent to it again.
    case killToken(DeadToken)
    /// Writes an event to the log.
    case record(NewEvent)
    /// Writes the event once no device still has the key's activity (no live token, no
    /// listener), and some device had it.
    case recordIfEndedOnEveryDevice(NewEvent)
    /// Writes the event unless its key has one of its type since the date.
    case recordUnlessRecorded(NewEvent, since: Date)
}

/// An event applied to every delivery a selection picks, among those in the statuses it moves from.
package struct DeliveryMove: Sendable, Hashable {
    package var event: DeliveryEvent
    package var selection: DeliverySelection
    /// When: `finished_at` of a delivery it finishes, else its new `next_attempt_at`.
    package var at: Date
    /// Why, kept as the delivery's reason; nil leaves the reason as it is.
    package var reason: String?

    package init(_ event: DeliveryEvent, _ selection: DeliverySelection, at: Date, reason: String? = nil) {
        self.event = event
        self.selection = selection
        self.at = at
        self.reason = reason
    }
}

/// Which deliveries a move applies to: each field that is set must match.
package struct DeliverySelection: Sendable, Hashable {
    package var bundleID: String?
    package var key: String?
    package var deviceID: String?
    package var token: String?
    package var channelID: String?
    /// These deliveries only.
    package var ids: [Int64]?
    package var targets: [DeliveryTargetKind]?
    package var events: [String]?
    /// Only push-to-starts whose device has reported an activity under their key.
    package var onlyStartsThatArrived: Bool
    /// Only deliveries due (or leased) no later than this.
    package var dueBy: Date?

    package init(
        bundleID: String? = nil, key: String? = nil, deviceID: String? = nil, token: String? = nil, channelID: String? = nil,
        ids: [Int64]? = nil, targets: [DeliveryTargetKind]? = nil, events: [String]? = nil, onlyStartsThatArrived: Bool = false,
        dueBy: Date? = nil
    ) {
        self.ids = ids
        self.bundleID = bundleID
        self.key = key
        self.deviceID = deviceID
        self.token = token
        self.channelID = channelID
        self.targets = targets
        self.events = events
        self.onlyStartsThatArrived = onlyStartsThatArrived
        self.dueBy = dueBy
    }

    /// Every delivery.
    package static let all = DeliverySelection()
}

/// A token APNs refused for good.
package struct DeadToken: Sendable, Hashable {
    package enum Kind: Sendable, Hashable {
        case pushToStart, activity, surface
    }

    package var bundleID: String
    /// The key of the push that found it dead: an update token is the key's.
    package var key: String
    package var kind: Kind
    package var deviceID: String
    package var token: String
    package var reason: String
}

/// What each thing that happens does to the pushes in the outbox, decided without a database:
/// every store carries out the decisions (`DeliveryMove`s are statements of its engine), and the
/// lifecycle of each push is `DeliveryStatus.after(_:)`.
package enum OutboxRules {
    /// What an accepted request's pushes are written as: claimed for the running dispatcher,
    /// leased as a claim would be, when a hand-over allows as many (it sends them at once, without
    /// a transaction to claim them); else queued, due now.
    package static func entry(count: Int, handOver: HandOver?, at now: Date) -> (status: DeliveryStatus, due: Date) {
        guard let handOver, count <= handOver.limit else { return (.queued, now) }
        return (DeliveryEvent.claim.destination, handOver.leaseUntil)
    }

    package static func decisions(after trigger: OutboxTrigger, at now: Date) -> [OutboxDecision] {
        switch trigger {
        case .accepted(let deliveries, let fanOut):
            return superseded(by: deliveries, fanOut: fanOut, at: now).map(OutboxDecision.move)

        case .answered(let delivery, .retry):
            // A start may have arrived though its answer did not: the device's report says so.
            guard case .pushToStartToken(let deviceID, _) = delivery.target else { return [] }
            return [.move(startsThatArrived(DeliverySelection(bundleID: delivery.bundleID, key: delivery.key, deviceID: deviceID), at: now))]

        case .answered(let delivery, .failed(let status, let reason, tokenIsDead: true)):
            let kind: DeadToken.Kind
            let (deviceID, token): (String, String)
            switch delivery.target {
            case .pushToStartToken(let device, let value): (kind, deviceID, token) = (.pushToStart, device, value)
            case .activityToken(let device, let value): (kind, deviceID, token) = (.activity, device, value)
            case .surface(_, let device, let value): (kind, deviceID, token) = (.surface, device, value)
            // APNs' answers about a channel never say a token is dead.
            case .channel: return [.record(failed(delivery, status: status, reason: reason))]
            }
            let dead = DeadToken(bundleID: delivery.bundleID, key: delivery.key, kind: kind, deviceID: deviceID, token: token, reason: reason)
            let waiting = DeliverySelection(
                bundleID: delivery.bundleID, key: delivery.key, deviceID: deviceID, token: token, targets: [delivery.target.kind])
            let invalidated = NewEvent(
                .tokenInvalidated, bundleID: delivery.bundleID, key: delivery.key, environment: delivery.environment, deviceID: deviceID,
                data: [
                    ("token", .string(kind == .surface ? delivery.target.kind.rawValue : kind == .activity ? "update" : "push-to-start")),
                    ("reason", .string(reason)),
                    ("status", status.map { .integer(Int64($0)) } ?? .null),
                ])
            return [.killToken(dead), .move(DeliveryMove(.skip, waiting, at: now, reason: "token dead: \(reason)")), .record(invalidated)]

        case .answered(let delivery, .failed(let status, let reason, tokenIsDead: false)):
            return [.record(failed(delivery, status: status, reason: reason))]

        case .answered:
            return []

        case .activityReported(let report):
            let arrived = OutboxDecision.move(
                startsThatArrived(DeliverySelection(bundleID: report.bundleID, key: report.key, deviceID: report.deviceID), at: now))
            guard report.isNew else { return [arrived] }
            var data: JSONValue.Members = [("via", .string(report.channelID == nil ? "token" : "channel"))]
            if let id = report.activityID { data.append(("activityID", .string(id))) }
            if let channel = report.channelID { data.append(("channelID", .string(channel))) }
            let started = NewEvent(
                .activityStarted, bundleID: report.bundleID, key: report.key, environment: report.environment, deviceID: report.deviceID, data: data)
            return [arrived, .record(started)]

        case .activityEndedOnDevice(let app, let key, let deviceID, let state, let cause, let wasLive):
            // Nothing more to send to an activity that is over on the device. The backend hears
            // who ended it in the log's words: the person's removal is `dismissed`.
            let updates = DeliverySelection(bundleID: app, key: key, deviceID: deviceID, targets: [.activity])
            let ended = NewEvent(
                .activityEnded, bundleID: app, key: key, deviceID: deviceID,
                data: [("state", .string(state.rawValue)), ("cause", cause.map { .string($0 == "person" ? "dismissed" : $0) } ?? .null)])
            var decisions: [OutboxDecision] = [
                .move(DeliveryMove(.skip, updates, at: now, reason: "activity \(state.rawValue) on the device")), .record(ended),
            ]
            if wasLive {
                decisions.append(.recordIfEndedOnEveryDevice(NewEvent(.activityEnded, bundleID: app, key: key, data: [("allDevices", .bool(true))])))
            }
            return decisions

        case .activityExpired(let app, let key):
            let ended = NewEvent(.activityEnded, bundleID: app, key: key, data: [("cause", .string("system")), ("reason", .string("expired"))])
            // Every kind named, as a key's queued pushes are found by their kind (`deliveries_queued_by_target`).
            let waiting = DeliverySelection(bundleID: app, key: key, targets: DeliveryTargetKind.allCases)
            return [.move(DeliveryMove(.skip, waiting, at: now, reason: "activity expired")), .record(ended)]

        case .keyEnded(let app, let key):
            return [.record(NewEvent(.activityEnded, bundleID: app, key: key, data: [("cause", .string("backend"))]))]

        case .budgetExhausted(let app, let key, let exhausted):
            let event = NewEvent(
                .budgetExhausted, bundleID: app, key: key,
                data: [
                    ("targetsOverBudget", .integer(Int64(exhausted.targetsOverBudget))), ("targets", .integer(Int64(exhausted.targets))),
                    ("priority10PerHour", .integer(Int64(exhausted.perHour))),
                ])
            return [.recordUnlessRecorded(event, since: now - 3600)]

        case .claimed(let starts):
            // A start claimed again once its lease ran out (its sender died, or a restart beside
            // other instances left it claimed) may have arrived: the device's report says so.
            guard !starts.isEmpty else { return [] }
            var arrived = startsThatArrived(DeliverySelection(ids: starts), at: now)
            arrived.event = .withdraw
            return [.move(arrived)]

        case .abandoned(let ids, let leasedUntil):
            // Another instance claims a push only once its lease has run out, and leases it from
            // then on: a claim ending later is that instance's, and stays. (A millisecond more
            // covers the rounding of a date kept as seconds in a double.)
            guard !ids.isEmpty else { return [] }
            return [.move(DeliveryMove(.release, DeliverySelection(ids: ids, dueBy: leasedUntil + 0.001), at: now))]

        case .restarted(let alone):
            // A start whose answer the crash lost, but whose activity the device has reported.
            let arrived = OutboxDecision.move(startsThatArrived(.all, at: now))
            return alone ? [.move(DeliveryMove(.release, .all, at: now)), arrived] : [arrived]
        }
    }

    /// A push that failed for good, as the backend hears of it.
    private static func failed(_ delivery: AnsweredDelivery, status: Int?, reason: String) -> NewEvent {
        let type: EventType = if case .surface = delivery.target { .reloadFailed } else { .pushFailed }
        return NewEvent(
            type, bundleID: delivery.bundleID, key: delivery.key, environment: delivery.environment, deviceID: delivery.target.deviceID,
            data: [
                ("deliveryID", .integer(delivery.id)), ("action", .string(delivery.event.rawValue)),
                ("target", .string(delivery.target.kind.rawValue)), ("channelID", delivery.target.channelID.map(JSONValue.string) ?? .null),
                ("status", status.map { .integer(Int64($0)) } ?? .null), ("reason", .string(reason)),
                ("attempts", .integer(Int64(delivery.attempts))),
            ])
    }

    /// The queued pushes that new ones make pointless. A change goes to every live token of its
    /// key, so it supersedes the key's queued updates and ends to update tokens (a rotated token's
    /// included), however many tokens the key has; a broadcast supersedes its channel's. A start
    /// supersedes nothing.
    private static func superseded(by deliveries: [NewDelivery], fanOut: NewPush?, at now: Date) -> [DeliveryMove] {
        var keys: [DeliverySelection] = []
        var channels: [DeliverySelection] = []
        func supersedeKey(app: String, key: String) {
            let selection = supersedingKey(app: app, key: key, at: now).selection
            if !keys.contains(selection) { keys.append(selection) }
        }
        if let fanOut { supersedeKey(app: fanOut.bundleID, key: fanOut.key) }
        for delivery in deliveries where delivery.push.event != .start {
            switch delivery.target {
            case .activityToken: supersedeKey(app: delivery.push.bundleID, key: delivery.push.key)
            case .channel(let id):
                let selection = DeliverySelection(channelID: id)
                if !channels.contains(selection) { channels.append(selection) }
            case .pushToStartToken, .surface: break
            }
        }
        return (keys + channels).map { DeliveryMove(.supersede, $0, at: now) }
    }

    /// What a change of a key does to the key's queued updates and ends to update tokens: the
    /// move a PostgreSQL change writes within its own statement.
    static func supersedingKey(app: String, key: String, at now: Date) -> DeliveryMove {
        DeliveryMove(.supersede, DeliverySelection(bundleID: app, key: key, targets: [.activity], events: ["update", "end"]), at: now)
    }

    /// Push-to-starts (of `selection`) whose device has reported an activity under their key: the
    /// start arrived (its answer was lost to a crash or a timeout), or the app started the
    /// activity itself. Sent (again), it would start a second activity, and only the newer one's
    /// token would be kept under the key: the first would stay on the Lock Screen, never updated
    /// or ended.
    private static func startsThatArrived(_ selection: DeliverySelection, at now: Date) -> DeliveryMove {
        var starts = selection
        starts.targets = [.pushToStart]
        starts.onlyStartsThatArrived = true
        return DeliveryMove(
            .skip, starts, at: now,
            reason: "not sent (again): the device has reported an activity for the key, and another start would start a second one")
    }
}
