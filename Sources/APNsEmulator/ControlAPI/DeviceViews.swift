import Foundation
import LiveActivityKit
import SimulatedDevices

/// The simulated devices' state as JSON for the control API. Content state and attributes go out
/// exactly as the device holds them; dates are ISO 8601.
enum PresentationJSON {
    static func date(_ date: Date?) -> JSONValue {
        date.map { .string($0.iso8601) } ?? .null
    }

    static func json(_ activity: SimulatedActivity) -> JSONValue {
        let pushType: JSONValue =
            switch activity.pushType {
            case .none: .string("none")
            case .token: .string("token")
            case .channel: .string("channel")
            }
        var members: JSONValue.Members = [
            ("id", .string(activity.id)), ("bundleID", .string(activity.bundleID)), ("attributesType", .string(activity.attributesType)),
            ("state", .string(activity.state.rawValue)), ("style", .string(activity.style.rawValue)), ("pushType", pushType),
        ]
        if case .channel(let channelID) = activity.pushType { members.append(("channelID", .string(channelID))) }
        members += [
            ("pushToken", activity.pushToken.map(JSONValue.string) ?? .null),
            ("attributes", activity.attributes), ("contentState", activity.content.state),
            ("staleDate", date(activity.content.staleDate)), ("relevanceScore", JSONValue.double(activity.content.relevanceScore) ?? .null),
            ("startDate", date(activity.lifecycle.startDate)), ("endDate", date(activity.lifecycle.endDate)),
            ("dismissalDate", date(activity.lifecycle.dismissalDate)), ("lastUpdateTimestamp", date(activity.lifecycle.lastTimestamp)),
            ("lastAlert", activity.lastAlert.map(json) ?? .null),
        ]
        return .object(members)
    }

    /// An app's widgets and controls, their tokens, and the data its extension reads.
    static func members(_ surfaces: AppSurfaces) -> JSONValue.Members {
        func placed(_ identity: JSONValue.Members, _ reloads: SurfaceReloads) -> JSONValue {
            .object(identity + [("reloadedAt", date(reloads.lastAt)), ("reloads", .integer(reloads.count)), ("value", reloads.value ?? .null)])
        }
        let widgets = surfaces.widgets.map { placed([("kind", .string($0.kind)), ("family", .string($0.family))], $0.reloads) }
        let controls = surfaces.controls.map { placed([("kind", .string($0.kind)), ("token", .string($0.token))], $0.reloads) }
        return [
            ("widgetToken", surfaces.widgetToken.map(JSONValue.string) ?? .null), ("widgets", .array(widgets)), ("controls", .array(controls)),
            ("sharedData", .object(surfaces.sharedData.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })),
        ]
    }

    static func json(_ alert: ShownAlert) -> JSONValue {
        .object([
            ("title", .string(alert.title)), ("body", .string(alert.body)), ("sound", alert.sound.map(JSONValue.string) ?? .null),
            ("at", date(alert.at)),
        ])
    }

    static func json(_ entry: DeviceLogEntry) -> JSONValue {
        .object([
            ("at", date(entry.at)), ("bundleID", entry.bundleID.map(JSONValue.string) ?? .null),
            ("activityID", entry.activityID.map(JSONValue.string) ?? .null), ("message", .string(entry.message)),
        ])
    }

    static func json(_ presented: PresentedActivity) -> JSONValue {
        .object([
            ("activityID", .string(presented.activityID)), ("bundleID", .string(presented.bundleID)),
            ("attributesType", .string(presented.attributesType)), ("state", .string(presented.state.rawValue)),
            ("isStale", .bool(presented.isStale)), ("relevanceScore", JSONValue.double(presented.relevanceScore) ?? .null),
            ("startDate", date(presented.startDate)), ("contentState", presented.content),
        ])
    }

    static func json(_ alert: PresentedAlert) -> JSONValue {
        .object([("activityID", .string(alert.activityID)), ("alert", json(alert.alert))])
    }

    static func json(_ presentation: DevicePresentation) -> JSONValue {
        let island: JSONValue
        switch presentation.dynamicIsland {
        case nil: island = .null
        case .empty?: island = .object([("presentation", .string("empty"))])
        case .compact(let activity)?: island = .object([("presentation", .string("compact")), ("activity", json(activity))])
        case .minimal(let attached, let detached)?:
            island = .object([("presentation", .string("minimal")), ("attached", json(attached)), ("detached", json(detached))])
        case .expanded(let activity, let alert)?:
            island = .object([("presentation", .string("expanded")), ("activity", json(activity)), ("alert", json(alert))])
        }
        let watch: JSONValue =
            presentation.watch.map { watch in
                .object([("smartStack", watch.smartStack.map(json) ?? .null), ("alert", watch.alert.map(json) ?? .null)])
            } ?? .null
        let standBy: JSONValue =
            presentation.standBy.map { standBy in
                .object([
                    ("activity", standBy.main.map(json) ?? .null), ("other", standBy.other.map(json) ?? .null),
                    ("scale", JSONValue.double(standBy.scale) ?? .null),
                ])
            } ?? .null
        let carPlay: JSONValue = presentation.carPlay.map { .object([("activity", $0.activity.map(json) ?? .null)]) } ?? .null
        let mac: JSONValue =
            presentation.macMenuBar.map { bar in
                .object([("activities", .array(bar.activities.map(json))), ("opened", bar.opened.map(json) ?? .null)])
            } ?? .null
        return .object([
            ("visible", .string(presentation.isLocked ? "lockScreen" : "dynamicIsland")),
            ("orientation", .string(presentation.isLandscape ? "landscape" : "portrait")),
            ("lockScreen", .array(presentation.lockScreen.map(json))),
            ("dynamicIsland", island),
            ("isDynamicIslandLimitedInWidth", .bool(presentation.isDynamicIslandLimitedInWidth)),
            ("banner", presentation.banner.map(json) ?? .null),
            ("standBy", standBy),
            ("watch", watch),
            ("carPlay", carPlay),
            ("macMenuBar", mac),
        ])
    }

    static func eventType(_ event: DeviceEvent) -> String {
        switch event {
        case .tokenIssued: "tokenIssued"
        case .tokenRetired: "tokenRetired"
        case .activityStarted: "activityStarted"
        case .contentUpdated: "contentUpdated"
        case .stateChanged: "stateChanged"
        case .authorizationChanged: "authorizationChanged"
        case .widgetPushInfoChanged: "widgetPushInfoChanged"
        case .controlPushInfoChanged: "controlPushInfoChanged"
        case .surfacesReloaded: "reloaded"
        }
    }

    static func json(_ event: FleetEvent) -> JSONValue {
        var members: JSONValue.Members = [
            ("sequence", .integer(event.sequence)), ("at", date(event.at)), ("type", .string(eventType(event.event))),
            ("device", .string(event.deviceID)), ("bundleID", .string(event.bundleID)),
        ]
        if let activityID = event.activityID { members.append(("activityID", .string(activityID))) }
        switch event.event {
        case .tokenIssued(let token, _, let kind, let environment):
            members += [("token", .string(token)), ("environment", .string(environment.rawValue))]
            switch kind {
            case .pushToStart(let type): members += [("tokenKind", .string("pushToStart")), ("attributesType", .string(type))]
            case .update: members.append(("tokenKind", .string("update")))
            case .widgets: members.append(("tokenKind", .string("widgets")))
            case .control(let controlKind): members += [("tokenKind", .string("control")), ("kind", .string(controlKind))]
            }
        case .tokenRetired(let token, let at, _):
            members += [("token", .string(token)), ("retiredAt", date(at))]
        case .activityStarted(_, _, let type, let attributes):
            members += [("attributesType", .string(type)), ("attributes", attributes)]
        case .contentUpdated(_, _, let content):
            members += [
                ("contentState", content.state), ("staleDate", date(content.staleDate)),
                ("relevanceScore", JSONValue.double(content.relevanceScore) ?? .null),
            ]
        case .stateChanged(_, _, let state, let cause):
            members += [("state", .string(state.rawValue)), ("cause", .string(cause.rawValue))]
        case .authorizationChanged(_, let enabled, let frequent):
            members += [("activitiesEnabled", .bool(enabled)), ("frequentPushesEnabled", .bool(frequent))]
        case .widgetPushInfoChanged, .controlPushInfoChanged:
            break
        case .surfacesReloaded(_, let type, let kinds):
            members += [("pushType", .string(type.rawValue)), ("kinds", .array(kinds.map(JSONValue.string)))]
        }
        return .object(members)
    }
}
