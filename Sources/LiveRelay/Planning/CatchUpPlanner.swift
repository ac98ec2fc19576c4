import APNs
import Foundation
import LiveActivityKit
import LiveRelayStore

/// Decides what a device that reports its update token late is sent: the key's latest state,
/// when the device has not been sent it. A push-to-started activity's token reaches the server
/// only once the app, woken in the background, reports it; whatever the backend sent meanwhile
/// reached nobody. Pure: the store gives it what the token's transaction read.
struct CatchUpPlanner {
    let governor: PriorityGovernor

    /// How long an alert stays worth hearing: a device that reports later is shown the change
    /// silently, as a person should not hear an alert for a change minutes old.
    static let alertFreshFor: TimeInterval = 60

    /// The push that brings the device to the key's latest state (its content, stale date and
    /// relevance; or its end with its dismissal date), or nil when the device was sent it already
    /// (or the key has no content yet: an activity the app started, that the backend never changed).
    func plan(_ snapshot: CatchUpSnapshot, at now: Date, requestID: String) -> CatchUpPlan? {
        let activity = snapshot.activity
        guard let contentState = activity.contentState, !snapshot.sentLatest else { return nil }
        let ended = activity.state == .ended
        var dismissal = ActivityUIDismissalPolicy.default
        if ended {
            // Off the Lock Screen when the devices that saw the end in time took it off.
            let dismissAt = activity.dismissalDate ?? (activity.endedAt ?? now) + ActivityUIDismissalPolicy.longestAfterEnd
            dismissal = dismissAt <= now ? .immediate : .after(dismissAt)
        }
        let alert = activity.alertAt.map { now.timeIntervalSince($0) <= Self.alertFreshFor } == true ? activity.alert : nil
        let payload = LiveActivityPayload(
            LiveActivityPayload.Fields(
                event: ended ? .end : .update, timestamp: Date(timeIntervalSince1970: TimeInterval(activity.lastTimestamp)),
                contentState: contentState, staleDate: activity.staleDate, dismissalPolicy: dismissal, relevanceScore: activity.relevanceScore,
                alert: alert))
        // It was accepted in this form before; should the rules have changed since, the device is
        // left as it is rather than its token refused.
        guard let body = try? PayloadEncoding.encode(payload, for: .device) else { return nil }
        let token = snapshot.token
        let decision = governor.decide(
            .auto, alerting: alert != nil, used: snapshot.priority10Used, frequentPushesEnabled: token.frequentPushesEnabled)
        let delivery = NewDelivery(
            bundleID: token.bundleID, key: token.key, event: ended ? .end : .update,
            target: .activityToken(deviceID: token.deviceID, token: token.token), environment: token.environment, payloadIndex: 0,
            priority: decision.priority, priorityReason: "\(Self.reason), \(decision.reason)", expiration: nil, timestamp: activity.lastTimestamp,
            requestID: requestID)
        return CatchUpPlan(payload: body, delivery: delivery)
    }

    /// How the history names a catch-up, before the reason for its priority.
    static let reason = "caught up"
}
