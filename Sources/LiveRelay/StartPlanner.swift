import Foundation
import LiveActivityKit
import LiveRelayStore

/// Decides what a start does, from the audience's push-to-start tokens and the time: the new key,
/// and one push to each token of the server's APNs environment at the priority the governor gives
/// an alerting push (a push-to-start always alerts). Pure: the service gives it what the store read.
struct StartPlanner {
    let environment: String
    let governor: PriorityGovernor
    /// The answer kept with the write (for its idempotency key or schedule).
    let answer: @Sendable (Acceptance) -> StoredResponse

    /// What the app's contract says of the request (nil: the app registered none for the type):
    /// throws when its widget would not decode the attributes or the content state; returns the
    /// warnings otherwise.
    static func check(_ request: StartRequest, against contract: ActivityContract?) throws(RelayError) -> [String] {
        guard let contract else { return [] }
        return try ContractCheck.attributes(request.attributes, contract) + ContractCheck.contentState(request.contentState, contract)
    }

    /// The start's payload: validated and encoded before anything is written.
    static func payload(_ request: StartRequest, channelID: String?, at acceptedAt: Date) throws -> [UInt8] {
        try PayloadEncoding.encode(
            LiveActivityPayload(LiveActivityPayload.Fields(
                event: .start, timestamp: acceptedAt, contentState: request.contentState, staleDate: request.staleDate,
                relevanceScore: request.relevanceScore, alert: request.alert, attributesType: request.attributesType,
                attributes: request.attributes, inputPush: channelID.map { .channel($0) } ?? .token)),
            for: .device)
    }

    func plan(
        key: String, _ request: StartRequest, payload: [UInt8], channelID: String?, tokens: [PushToStartTokenRecord], at acceptedAt: Date,
        requestID: String, warnings: [String] = []
    ) -> (StartPlan, Acceptance) {
        let timestamp = unixSeconds(acceptedAt)
        let expiration = request.expiration.map(unixSeconds)
        let reachable = tokens.filter { $0.environment == environment }
        let deliveries = reachable.map { token in
            let decision = governor.decide(request.priority, alerting: true, used: 0, frequentPushesEnabled: token.frequentPushesEnabled)
            return NewDelivery(
                key: key, event: "start", target: .pushToStartToken(deviceID: token.deviceID, token: token.token), payloadIndex: 0,
                priority: decision.priority, priorityReason: decision.reason, expiration: expiration, timestamp: timestamp, requestID: requestID)
        }
        let activity = ActivityRecord(
            key: key, attributesType: request.attributesType, attributes: request.attributes, channelID: channelID,
            contentState: request.contentState, staleDate: request.staleDate, relevanceScore: request.relevanceScore, startedAt: acceptedAt,
            lastTimestamp: timestamp)
        var warnings = warnings
        if deliveries.isEmpty {
            // Say so: "active" alone reads as if the activity were on someone's Lock Screen.
            let elsewhere = tokens.count - reachable.count
            warnings.append(
                "no device in the audience has a live push-to-start token for \(request.attributesType)"
                    + (elsewhere > 0 ? " in APNs \(environment) (\(elsewhere) in another environment)" : "")
                    + ": the key is active, on no device")
        }
        let acceptance = Acceptance(
            key: key, action: "start", requestID: requestID, timestamp: timestamp, deliveries: deliveries.count, state: .active,
            channelID: channelID, warnings: warnings)
        let plan = StartPlan(
            acceptedAt: acceptedAt, activity: activity, payloads: [payload], deliveries: deliveries, response: answer(acceptance))
        return (plan, acceptance)
    }
}
