import Foundation
import LiveActivityKit
import LiveRelayStore

/// Decides what a start does, from the audience's push-to-start tokens and the time: the new key,
/// and one push to each token of an APNs environment the server serves, at the priority the
/// governor gives an alerting push (a push-to-start always alerts). A channel-bound start reaches
/// the tokens of its channels' environments, each with its own channel id, and a device whose iOS
/// cannot join a channel (before 18, as its app reported) with a start of its own update token: the
/// key's updates then reach it one by one (`ChangePlanner`). Pure: the service gives it what the
/// store read.
struct StartPlanner {
    let environments: Set<PushEnvironment>
    let governor: PriorityGovernor

    /// The encoded start payloads, and which one each environment's tokens get.
    struct Payloads: Sendable {
        var bodies: [[UInt8]]
        var index: [PushEnvironment: Int]
        /// For a channel-bound start, the body of devices that cannot join a channel; always last.
        var withoutChannel: Int?
    }

    /// What a contract of the app says of the request: throws when its widget would not decode
    /// the attributes or the content state; returns the warnings otherwise.
    static func check(_ request: StartRequest, against contract: ActivityContract) throws(RelayError) -> [String] {
        try ContractCheck.attributes(request.attributes, contract) + ContractCheck.contentState(request.contentState, contract)
    }

    /// The attribute LiveRelayKit keys an activity by, unless the app configures another.
    static let keyAttribute = "activityKey"

    /// A start whose attributes carry a key other than its path's would split into two keys: the
    /// app reports under the attribute's, and the path's never reaches a device.
    static func checkKey(_ key: String, in request: StartRequest) throws(RelayError) {
        let named: String
        switch request.attributes[keyAttribute] {
        case .string(let text): named = text
        case .number(let literal): named = literal
        default: return
        }
        guard named != key else { return }
        throw RelayError(
            .unprocessable, .keyMismatch,
            message:
                "is \"\(named)\", but the start is for key \"\(key)\": the app reports the activity under its \(keyAttribute), so the two must agree",
            field: "attributes.\(keyAttribute)")
    }

    /// The start's payloads, validated and encoded before anything is written: one for every
    /// environment, or one per channel (each names its own in `input-push-channel`).
    static func payloads(_ request: StartRequest, channelIDs: [PushEnvironment: String], at acceptedAt: Date) throws -> Payloads {
        func encode(_ channelID: String?) throws -> [UInt8] {
            try PayloadEncoding.encode(
                LiveActivityPayload(
                    LiveActivityPayload.Fields(
                        event: .start, timestamp: acceptedAt, contentState: request.contentState, staleDate: request.staleDate,
                        relevanceScore: request.relevanceScore, alert: request.alert, attributesType: request.attributesType,
                        attributes: request.attributes, inputPush: channelID.map { .channel($0) } ?? .token)),
                for: .device)
        }
        guard !channelIDs.isEmpty else {
            let body = try encode(nil)
            return Payloads(bodies: [body], index: Dictionary(uniqueKeysWithValues: PushEnvironment.allCases.map { ($0, 0) }))
        }
        var payloads = Payloads(bodies: [], index: [:])
        for environment in PushEnvironment.allCases {
            guard let channelID = channelIDs[environment] else { continue }
            payloads.index[environment] = payloads.bodies.count
            payloads.bodies.append(try encode(channelID))
        }
        payloads.withoutChannel = payloads.bodies.count
        payloads.bodies.append(try encode(nil))
        return payloads
    }

    func plan(
        app: String, key: String, _ request: StartRequest, payloads: Payloads, channelIDs: [PushEnvironment: String],
        tokens: [PushToStartTokenRecord], contracts: TypeContracts = TypeContracts(), at acceptedAt: Date, requestID: String
    ) throws(RelayError) -> (StartPlan, Acceptance) {
        // Checked against the contract of each app version in the audience.
        let versions = try contracts.check(audience: Dictionary(tokens.map { ($0.appVersion, 1) }, uniquingKeysWith: +), versions: request.versions) {
            contract throws(RelayError) in try Self.check(request, against: contract)
        }
        let timestamp = unixSeconds(acceptedAt)
        let expiration = request.expiration.map(unixSeconds)
        var deliveries: [NewDelivery] = []
        var unreached: [PushEnvironment: Int] = [:]
        var withoutChannel = 0
        for token in tokens where versions.sends(to: token.appVersion, request.versions) {
            // Only a channel-bound start has a body without its channel; any other reaches every iOS.
            let cannotJoin = token.systemVersion.map { !$0.offers(.channels) } ?? false
            let index = (cannotJoin ? payloads.withoutChannel : nil) ?? payloads.index[token.environment]
            guard environments.contains(token.environment), let payloadIndex = index else {
                unreached[token.environment, default: 0] += 1
                continue
            }
            if payloadIndex == payloads.withoutChannel { withoutChannel += 1 }
            let decision = governor.decide(request.priority, alerting: true, used: 0, frequentPushesEnabled: token.frequentPushesEnabled)
            deliveries.append(
                NewDelivery(
                    bundleID: app, key: key, event: .start, target: .pushToStartToken(deviceID: token.deviceID, token: token.token),
                    environment: token.environment, payloadIndex: payloadIndex, priority: decision.priority, priorityReason: decision.reason,
                    expiration: expiration, timestamp: timestamp, requestID: requestID))
        }
        let activity = ActivityRecord(
            bundleID: app, key: key, attributesType: request.attributesType, attributes: request.attributes, channelIDs: channelIDs,
            contentState: request.contentState, staleDate: request.staleDate, relevanceScore: request.relevanceScore, startedAt: acceptedAt,
            lastTimestamp: timestamp)
        var warnings = versions.warnings
        var bodies = payloads.bodies
        if withoutChannel > 0 {
            // Say so: these devices are reached, otherwise than the rest.
            warnings.append(
                "\(withoutChannel) device(s) of the audience run an iOS before \(ActivityKitFeature.channels.introduced), which cannot join a channel: "
                    + "each was sent a start that gives it its own update token, and gets the key's updates one by one")
        } else if payloads.withoutChannel != nil {
            bodies.removeLast()
        }
        for environment in PushEnvironment.allCases {
            guard let count = unreached[environment] else { continue }
            // Say so: these devices were asked for and will not show the activity.
            let why =
                environments.contains(environment)
                ? "the key's channel is not in that environment" : "this server does not send to it"
            warnings.append("\(count) device(s) of the audience have their token in APNs \(environment.rawValue), not reached: \(why)")
        }
        if deliveries.isEmpty {
            // "active" alone reads as if the activity were on someone's Lock Screen.
            warnings.append(
                "no device in the audience has a live push-to-start token for \(request.attributesType)"
                    + (tokens.isEmpty ? "" : " that can be reached") + ": the key is active, on no device")
        }
        let acceptance = Acceptance(
            key: key, action: .start, requestID: requestID, timestamp: timestamp, deliveries: deliveries.count, state: .active,
            channelIDs: channelIDs, warnings: warnings)
        let plan = StartPlan(
            acceptedAt: acceptedAt, activity: activity, payloads: bodies, deliveries: deliveries, acceptance: acceptance)
        return (plan, acceptance)
    }
}
