import Foundation
import LiveActivityKit
import LiveRelayStore

/// Decides what an update or end does, from what its transaction read of the key and the time:
/// the payload (its timestamp after the key's last), a broadcast per channel when the key is bound
/// to channels and a push per live token (of a bound key, those of devices that could not join
/// its channel), each push's priority (from its own budget when `auto` spends it), the key's new
/// content and, for an end, its end and its channels' deletion. Pure: the service gives it the
/// snapshot the store read.
struct ChangePlanner {
    let governor: PriorityGovernor
    /// How long a Most-Recent-Message-Stored channel keeps a message (Apple: 8 hours).
    let channelStorageWindow: TimeInterval
    /// The app's contracts by attributes type and version: a key's content is checked against
    /// its type's, for the app version of each of its devices.
    let contracts: AppContracts

    /// Whether the request spends the priority-10 budget (`auto` without an alert), so that the
    /// store reads each token's count over the last hour; or one priority fits all, and the store
    /// reads the tokens only when the plan chooses among them by app version (the app has
    /// contracts of several versions, or the request sends only to versions that decode it).
    func budget(for request: ChangeRequest, at acceptedAt: Date) -> ChangeBudget {
        if request.priority == .auto && request.alert == nil { return .perDevice(windowStart: acceptedAt - PriorityGovernor.window) }
        return contracts.hasSeveralVersions || request.versions == .decodable ? .listed : .notCounted
    }

    func plan(key: String, _ request: ChangeRequest, snapshot: ChangeSnapshot, at acceptedAt: Date, requestID: String) throws -> (
        ChangePlan, Acceptance
    ) {
        let action = request.event
        let alerting = request.alert != nil
        guard var activity = snapshot.activity else {
            throw RelayError.notFound("key", "no activity key \"\(key)\"; start it first")
        }
        guard activity.state == .active else {
            let when = activity.endedAt.map { " at \($0.iso8601)" } ?? ""
            throw RelayError(
                .conflict, .activityEnded,
                message: "activity key \"\(key)\" ended\(when) (\(activity.endReason?.rawValue ?? "ended")); start a new key")
        }
        guard let contentState = request.contentState ?? activity.contentState else {
            throw RelayError(.invalid, .missing, message: "is required: the key has no content to end with", field: "contentState")
        }
        let budget = budget(for: request, at: acceptedAt)
        // The devices by app version, when the store read them; otherwise every version registered.
        let audience = budget.readsTokens ? Dictionary(snapshot.liveTokens.map { ($0.appVersion, 1) }, uniquingKeysWith: +) : nil
        let versions = try contracts.contracts(for: activity.attributesType).check(audience: audience, versions: request.versions) {
            contract throws(RelayError) in try ContractCheck.contentState(contentState, contract)
        }
        var warnings = versions.warnings
        warnings += try DeviceForesight.warnings(for: request, contentState: contentState, at: acceptedAt)
        let timestamp = max(unixSeconds(acceptedAt), activity.lastTimestamp + 1)
        var dismissal = ActivityUIDismissalPolicy.default
        if request.event == .end, let date = request.dismissalDate { dismissal = date <= acceptedAt ? .immediate : .after(date) }
        let payload = LiveActivityPayload(
            LiveActivityPayload.Fields(
                event: request.event, timestamp: Date(timeIntervalSince1970: TimeInterval(timestamp)), contentState: contentState,
                staleDate: request.staleDate, dismissalPolicy: dismissal, relevanceScore: request.relevanceScore, alert: request.alert))
        var deliveries: [NewDelivery] = []
        var budgetUse: BudgetUse?
        var exhausted = BudgetExhaustion(targetsOverBudget: 0, targets: 0, perHour: 0)
        func count(_ decision: PriorityGovernor.Decision) {
            budgetUse = Self.most(budgetUse, decision.budget)
            exhausted.targets += 1
            guard decision.isOverBudget, let budget = decision.budget else { return }
            exhausted.targetsOverBudget += 1
            exhausted.perHour = budget.limit
        }
        var fanOut: NewPush?
        // A channel-bound key's update tokens are those of devices that could not join its channel
        // (before iOS 18): they get the change one by one, so its payload must fit a device push too.
        let bound = !activity.channelIDs.isEmpty
        if bound, request.versions == .decodable, !versions.refused.isEmpty {
            throw RelayError(
                .unprocessable, .versionsNotSeparable,
                message: "the key's channel broadcast reaches every app version: send it to all (\"all\"), or make it one every version decodes",
                field: "versions")
        }
        let encoded = try PayloadEncoding.encode(payload, for: bound && snapshot.liveTokenCount == 0 ? .broadcast : .device)
        if bound {
            // One broadcast per channel: each environment's devices subscribe to their own.
            for channel in PushEnvironment.allCases.compactMap({ environment in snapshot.channels.first { $0.environment == environment } }) {
                let decision = governor.decide(
                    request.priority, alerting: alerting, used: snapshot.priority10Counts[channel.channelID] ?? 0, frequentPushesEnabled: false)
                count(decision)
                // A No-Message-Stored channel takes only 0; a stored message lives at most the storage window.
                let expiration =
                    channel.storagePolicy == 0
                    ? 0 : (request.expiration.map(unixSeconds) ?? unixSeconds(acceptedAt + channelStorageWindow))
                deliveries.append(
                    NewDelivery(
                        bundleID: activity.bundleID, key: key, event: DeliveryAction(action), target: .channel(channel.channelID),
                        environment: channel.environment, payloadIndex: 0, priority: decision.priority, priorityReason: decision.reason,
                        expiration: expiration, timestamp: timestamp, requestID: requestID))
            }
        }
        if !bound || snapshot.liveTokenCount > 0 {
            let expiration = request.expiration.map(unixSeconds)
            if budget == .notCounted {
                // One priority for all: the store writes a push to each live token itself.
                let decision = governor.decide(request.priority, alerting: alerting, used: 0, frequentPushesEnabled: false)
                fanOut = NewPush(
                    bundleID: activity.bundleID, key: key, event: DeliveryAction(action), payloadIndex: 0, priority: decision.priority,
                    priorityReason: decision.reason, expiration: expiration, timestamp: timestamp, requestID: requestID)
            } else {
                // A push for each token the request goes to: at a priority from its own budget, or
                // one for all when the budget is not counted.
                let counting = budget.windowStart != nil
                for token in snapshot.liveTokens where versions.sends(to: token.appVersion, request.versions) {
                    let decision = governor.decide(
                        request.priority, alerting: alerting, used: counting ? snapshot.priority10Counts[token.deviceID] ?? 0 : 0,
                        frequentPushesEnabled: counting && token.frequentPushesEnabled)
                    if counting { count(decision) }
                    deliveries.append(
                        NewDelivery(
                            bundleID: activity.bundleID, key: key, event: DeliveryAction(action),
                            target: .activityToken(deviceID: token.deviceID, token: token.token), environment: token.environment, payloadIndex: 0,
                            priority: decision.priority, priorityReason: decision.reason, expiration: expiration, timestamp: timestamp,
                            requestID: requestID))
                }
            }
        }
        activity.contentState = contentState
        activity.staleDate = request.staleDate
        activity.relevanceScore = request.relevanceScore ?? activity.relevanceScore
        activity.lastTimestamp = timestamp
        activity.alert = request.alert
        activity.alertAt = request.alert == nil ? nil : acceptedAt
        var channelDeleteAfter: Date?
        if request.event == .end {
            activity.state = .ended
            activity.endedAt = acceptedAt
            activity.endReason = .ended
            activity.dismissalDate = request.dismissalDate
            // A stored message may still be delivered for the storage window.
            let storesMessages = snapshot.channels.contains { $0.storagePolicy == 1 }
            channelDeleteAfter = acceptedAt + (storesMessages ? channelStorageWindow : 0)
        }
        let reached = deliveries.count + (fanOut == nil ? 0 : snapshot.liveTokenCount)
        // Devices sent the start that have not reported yet get this change when they do.
        let held = snapshot.awaitingDevices
        if reached == 0 && held == 0 { warnings.append("the key has no live update token: no device receives this \(action.rawValue)") }
        let acceptance = Acceptance(
            key: key, action: action, requestID: requestID, timestamp: timestamp, deliveries: reached, held: held, state: activity.state,
            warnings: warnings, budgetUse: budgetUse)
        let plan = ChangePlan(
            acceptedAt: acceptedAt, activity: activity, payload: encoded, deliveries: deliveries, fanOut: fanOut,
            channelDeleteAfter: channelDeleteAfter, acceptance: acceptance, budgetExhausted: exhausted.targetsOverBudget > 0 ? exhausted : nil)
        return (plan, acceptance)
    }

    /// The larger share of a budget.
    private static func most(_ a: BudgetUse?, _ b: BudgetUse?) -> BudgetUse? {
        guard let a, let b else { return a ?? b }
        return b.share > a.share ? b : a
    }
}
