import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// What the API shows of stored things, in one place: dates in ISO 8601, tokens shortened, no
/// secrets. The shapes are those of `openapi.json`.
enum RelayView {
    /// The answer to an accepted start, update or end.
    static func json(_ acceptance: Acceptance) -> JSONValue {
        var members: JSONValue.Members = [
            ("key", .string(acceptance.key)), ("action", .string(acceptance.action.rawValue)), ("requestID", .string(acceptance.requestID)),
            ("timestamp", .integer(acceptance.timestamp)), ("deliveries", .integer(acceptance.deliveries)),
            ("state", .string(acceptance.state.rawValue)),
        ]
        if let held = acceptance.held { members.insert(("held", .integer(Int64(held))), at: 5) }
        members += channelMembers(acceptance.channelIDs)
        if !acceptance.warnings.isEmpty { members.append(("warnings", .array(acceptance.warnings.map(JSONValue.string)))) }
        return .object(members)
    }

    static func json(_ reload: ReloadAcceptance) -> JSONValue {
        var members: JSONValue.Members = [
            ("action", .string("reload")), ("pushType", .string(reload.pushType.rawValue)), ("requestID", .string(reload.requestID)),
            ("deliveries", .integer(reload.deliveries)), ("heldBack", .integer(reload.heldBack)),
        ]
        if let kinds = reload.kinds { members.append(("kinds", .array(kinds.map(JSONValue.string)))) }
        if !reload.warnings.isEmpty { members.append(("warnings", .array(reload.warnings.map(JSONValue.string)))) }
        return .object(members)
    }

    /// A key's channels by environment, and `channelID` when it has exactly one (as before a key
    /// could have one in each environment).
    private static func channelMembers(_ ids: [PushEnvironment: String]) -> JSONValue.Members {
        guard !ids.isEmpty else { return [] }
        let channels = JSONValue.object(
            PushEnvironment.allCases.compactMap { environment in ids[environment].map { (environment.rawValue, .string($0)) } })
        return (ids.count == 1 ? [("channelID", .string(ids.values.first!))] : []) + [("channels", channels)]
    }

    /// A contract as registered: the app, then the contract in the form it was given in.
    static func json(_ contract: ContractRecord) -> JSONValue {
        var members: JSONValue.Members = [("bundleID", .string(contract.bundleID))]
        members += contract.contract.objectMembers?.map { ($0.key, $0.value) } ?? []
        // null: the contract for any version of the app.
        members.append(("appVersion", contract.appVersion == ContractRecord.anyVersion ? .null : .string(contract.appVersion)))
        members.append(("pinned", .bool(contract.pinned)))
        members.append(("updatedAt", date(contract.updatedAt)))
        return .object(members)
    }

    static func json(_ description: ActivityDescription) -> JSONValue {
        var members = activityMembers(description.activity)
        members.append(("tokens", .array(description.tokens.map(json))))
        members.append(("listeners", .array(description.listeners.map(json))))
        members.append(("schedules", .array(description.schedules.map(json))))
        return .object(members)
    }

    /// An activity as listed: without its tokens and schedules.
    static func json(_ activity: ActivityRecord) -> JSONValue { .object(activityMembers(activity)) }

    private static func activityMembers(_ activity: ActivityRecord) -> JSONValue.Members {
        var members: JSONValue.Members = [
            ("bundleID", .string(activity.bundleID)), ("key", .string(activity.key)), ("attributesType", .string(activity.attributesType)),
            ("state", .string(activity.state.rawValue)),
            ("startedAt", date(activity.startedAt)), ("lastTimestamp", .integer(activity.lastTimestamp)),
        ]
        if let attributes = activity.attributes { members.append(("attributes", attributes)) }
        if let content = activity.contentState { members.append(("contentState", content)) }
        if let stale = activity.staleDate { members.append(("staleDate", date(stale))) }
        if let score = activity.relevanceScore, let number = JSONValue.double(score) { members.append(("relevanceScore", number)) }
        members += channelMembers(activity.channelIDs)
        if let ended = activity.endedAt { members.append(("endedAt", date(ended))) }
        if let reason = activity.endReason { members.append(("endReason", .string(reason.rawValue))) }
        if let dismissal = activity.dismissalDate { members.append(("dismissalDate", date(dismissal))) }
        if let devices = activity.devices {
            members.append(
                (
                    "devices",
                    .object([
                        ("reach", .string(devices.reach.rawValue)), ("live", .integer(Int64(devices.live))),
                        ("ended", .integer(Int64(devices.ended))),
                        ("dismissed", .integer(Int64(devices.dismissed))), ("dead", .integer(Int64(devices.dead))),
                    ])
                ))
        }
        return members
    }

    static func json(_ schedule: ScheduleRecord) -> JSONValue {
        var members: JSONValue.Members = [
            ("scheduleID", .string(schedule.id)), ("bundleID", .string(schedule.bundleID)), ("key", .string(schedule.key)),
            ("action", .string(schedule.action.rawValue)),
            ("dueAt", date(schedule.dueAt)), ("state", .string(schedule.state.rawValue)),
        ]
        switch schedule.result {
        case nil: break
        case .accepted(let acceptance): members.append(("result", json(acceptance)))
        case .reloaded(let reload): members.append(("result", json(reload)))
        case .failed(let reason): members.append(("result", .string(reason)))
        }
        return .object(members)
    }

    static func json(_ token: ActivityTokenRecord) -> JSONValue {
        var members: JSONValue.Members = [
            ("deviceID", .string(token.deviceID)), ("token", .string(DeviceToken.shortened(token.token))), ("state", .string(token.state.rawValue)),
            ("frequentPushesEnabled", .bool(token.frequentPushesEnabled)), ("environment", .string(token.environment.rawValue)),
            ("registeredAt", date(token.registeredAt)),
        ]
        if let id = token.activityID { members.append(("activityID", .string(id))) }
        if let reason = token.stateReason { members.append(("stateReason", .string(reason))) }
        if let reporter = token.reportedBy { members.append(("reportedBy", .string(reporter))) }
        if let version = token.appVersion { members.append(("appVersion", .string(version))) }
        var last: JSONValue.Members = []
        if let status = token.lastStatus { last.append(("status", .integer(status))) }
        if let reason = token.lastReason { last.append(("reason", .string(reason))) }
        if let at = token.lastDeliveryAt { last.append(("at", date(at))) }
        if !last.isEmpty { members.append(("lastDelivery", .object(last))) }
        return .object(members)
    }

    static func json(_ listener: ChannelListenerRecord) -> JSONValue {
        var members: JSONValue.Members = [
            ("deviceID", .string(listener.deviceID)), ("channelID", .string(listener.channelID)), ("state", .string(listener.state.rawValue)),
            ("environment", .string(listener.environment.rawValue)), ("registeredAt", date(listener.registeredAt)),
        ]
        if let id = listener.activityID { members.append(("activityID", .string(id))) }
        if let reason = listener.stateReason { members.append(("stateReason", .string(reason))) }
        if let reporter = listener.reportedBy { members.append(("reportedBy", .string(reporter))) }
        return .object(members)
    }

    static func json(_ delivery: DeliveryRecord) -> JSONValue {
        var members: JSONValue.Members = [
            ("id", .integer(delivery.id)), ("bundleID", .string(delivery.bundleID)), ("key", .string(delivery.key)),
            ("event", .string(delivery.event.rawValue)),
            ("requestID", .string(delivery.requestID)), ("status", .string(delivery.status.rawValue)),
            ("priority", .integer(delivery.priority.rawValue)), ("priorityReason", .string(delivery.priorityReason)),
            ("timestamp", .integer(delivery.timestamp)), ("attempts", .integer(delivery.attempts)), ("createdAt", date(delivery.createdAt)),
            ("environment", .string(delivery.environment.rawValue)),
        ]
        switch delivery.target {
        case .pushToStartToken(let device, let token):
            members += [("target", .string("push-to-start")), ("deviceID", .string(device)), ("token", .string(DeviceToken.shortened(token)))]
        case .activityToken(let device, let token):
            members += [("target", .string("activity")), ("deviceID", .string(device)), ("token", .string(DeviceToken.shortened(token)))]
        case .channel(let id):
            members += [("target", .string("channel")), ("channelID", .string(id))]
        case .surface(_, let device, let token):
            members += [
                ("target", .string(delivery.target.kind.rawValue)), ("deviceID", .string(device)), ("token", .string(DeviceToken.shortened(token))),
            ]
        }
        if delivery.status == .queued || delivery.status == .sending { members.append(("nextAttemptAt", date(delivery.nextAttemptAt))) }
        if let at = delivery.finishedAt { members.append(("finishedAt", date(at))) }
        if let status = delivery.apnsStatus { members.append(("apnsStatus", .integer(status))) }
        if let reason = delivery.apnsReason { members.append(("apnsReason", .string(reason))) }
        if let id = delivery.apnsID { members.append(("apnsID", .string(id))) }
        return .object(members)
    }

    static func json(_ key: APIKeyRecord) -> JSONValue {
        var members: JSONValue.Members = [
            ("id", .string(key.id)), ("name", .string(key.name)), ("scope", .string(key.scope.rawValue)),
            ("createdAt", date(key.createdAt)),
        ]
        if let app = key.bundleID { members.append(("bundleID", .string(app))) }
        if let revoked = key.revokedAt { members.append(("revokedAt", date(revoked))) }
        return .object(members)
    }

    /// An app, without its signing key, and the attributes types it registered contracts for.
    static func json(_ app: AppRecord, contracts: [ContractRecord]) -> JSONValue {
        .object([
            ("bundleID", .string(app.bundleID)), ("teamID", .string(app.teamID)), ("keyID", .string(app.keyID)),
            (
                "attributeTypes",
                .array(Set(contracts.filter { $0.bundleID == app.bundleID }.map(\.attributesType)).sorted().map { .string($0) })
            ),
            ("ungrantedReports", .array(app.ungrantedReports.map(\.rawValue).sorted().map(JSONValue.string))),
            ("createdAt", date(app.createdAt)), ("updatedAt", date(app.updatedAt)),
        ])
    }

    static func json(_ channel: ChannelRecord) -> JSONValue {
        var members: JSONValue.Members = [
            ("channelID", .string(channel.channelID)), ("bundleID", .string(channel.bundleID)),
            ("environment", .string(channel.environment.rawValue)),
            ("storagePolicy", .integer(channel.storagePolicy)), ("createdAt", date(channel.createdAt)),
        ]
        if let key = channel.key { members.append(("key", .string(key))) }
        if let at = channel.deleteAfter { members.append(("deleteAfter", date(at))) }
        if let at = channel.deletedAt { members.append(("deletedAt", date(at))) }
        return .object(members)
    }

    static func date(_ date: Date) -> JSONValue { .string(date.iso8601) }
}
