import Foundation
import LiveActivityKit

/// What a device does with a Live Activity push APNs accepted: the rules of spec §3 and §8 as the
/// device applies them. A push the device cannot use is dropped and logged, never answered:
/// APNs has already said 200.
extension SimulatedDevice {
    /// Where a token leads on this device.
    public enum TokenTarget: Sendable, Hashable {
        case pushToStart(bundleID: String, attributesType: String)
        case activity(id: String, bundleID: String)
        case widgets(bundleID: String)
        case control(bundleID: String, kind: String)
    }

    public func target(of token: String) -> TokenTarget? {
        let token = token.lowercased()
        if let activity = activities.first(where: { $0.pushToken == token && $0.lifecycle.isOngoing }) {
            return .activity(id: activity.id, bundleID: activity.bundleID)
        }
        for app in apps.values {
            if let type = app.pushToStartTokens.first(where: { $0.value == token })?.key {
                return .pushToStart(bundleID: app.bundleID, attributesType: type)
            }
        }
        return surfaceTarget(of: token)
    }

    /// A push to one of this device's tokens, arriving from APNs.
    public mutating func receive(_ push: DevicePush, at now: Date) -> [DeviceEvent] {
        var events = advance(to: now)
        guard let target = target(of: push.token) else {
            write("dropped a push to token \(push.token.prefix(8))…, which no app or activity holds", nil, at: now)
            return events
        }
        let bundleID =
            switch target {
            case .pushToStart(let bundleID, _), .activity(_, let bundleID), .widgets(let bundleID), .control(let bundleID, _): bundleID
            }
        guard isOnline else {
            if let expiration = push.expiration, expiration <= now {
                write("offline: a push with apns-expiration \(Int(expiration.timeIntervalSince1970)) is not stored", bundleID, at: now)
            } else {
                storeWhileOffline(push, bundleID: bundleID)
                write("offline: APNs keeps this push (one per app; it replaces an older one)", bundleID, at: now)
            }
            return events
        }
        events += deliver(push, at: now, deferredAlready: false)
        return events
    }

    /// A broadcast on a channel: every ongoing activity subscribed to it takes it.
    public mutating func receiveBroadcast(channelID: String, payload: JSONValue, priority: Int, at now: Date) -> [DeviceEvent] {
        var events = advance(to: now)
        let subscribed = activities.filter { $0.pushType == .channel(channelID) && $0.lifecycle.isOngoing }.map(\.id)
        for activityID in subscribed {
            events += applyRemote(payload, toActivity: activityID, source: "channel \(channelID)", at: now)
        }
        return events
    }

    /// Delivers now, or holds it: priority 5 waits for the opportunistic delay, priority 10
    /// beyond the hourly budget waits for room; either way the newest per target wins.
    mutating func deliver(_ push: DevicePush, at now: Date, deferredAlready: Bool) -> [DeviceEvent] {
        guard let target = target(of: push.token) else {
            write("dropped a push: its token \(push.token.prefix(8))… is no longer valid", nil, at: now)
            return []
        }
        switch target {
        case .pushToStart(let bundleID, let attributesType):
            return startByPush(push.payload, bundleID: bundleID, tokenType: attributesType, token: push.token, at: now)
        case .widgets(let bundleID):
            return reload(push, .widgets, bundleID: bundleID, controlKind: nil, at: now)
        case .control(let bundleID, let kind):
            return reload(push, .controls, bundleID: bundleID, controlKind: kind, at: now)
        case .activity(let activityID, let bundleID):
            if !deferredAlready, let app = apps[bundleID] {
                if push.priority < 10 {
                    hold(push, key: activityID, until: now + settings.opportunisticDelay)
                    write(
                        "priority \(push.priority): delivered opportunistically in \(Int(settings.opportunisticDelay)) s (newer pushes replace it)",
                        bundleID, activityID: activityID, at: now)
                    return []
                }
                if let roomAt = spendPriority10Budget(of: app, at: now) {
                    hold(push, key: activityID, until: roomAt)
                    write("priority 10 over the hourly budget: deferred until \(roomAt)", bundleID, activityID: activityID, at: now)
                    return []
                }
            }
            return applyRemote(push.payload, toActivity: activityID, source: "a push", at: now)
        }
    }

    /// `event: start` to a push-to-start token.
    mutating func startByPush(_ payload: JSONValue, bundleID: String, tokenType: String, token: String, at now: Date) -> [DeviceEvent] {
        guard let app = apps[bundleID] else { return [] }
        func drop(_ why: String) -> [DeviceEvent] {
            write("dropped a start push: \(why)", bundleID, at: now)
            return []
        }
        guard !wasKilledByUpdate(pushToStartToken: token) else {
            return drop("its push-to-start token predates the iOS update and starts nothing (switch Live Activities off and on for a new one)")
        }
        let aps = payload["aps"]
        guard let event = aps?["event"]?.stringValue else { return drop("aps.event is missing") }
        guard event == "start" else { return drop("a push-to-start token takes only event start, got \(event)") }
        guard let alert = shownAlert(aps?["alert"], at: now) else { return drop("aps.alert is required to start an activity") }
        guard let type = aps?["attributes-type"]?.stringValue else { return drop("aps.attributes-type is missing") }
        guard type == tokenType else { return drop("attributes-type \(type) is not the type of this push-to-start token (\(tokenType))") }
        guard let attributes = aps?["attributes"] else { return drop("aps.attributes is missing") }
        guard let state = aps?["content-state"] else { return drop("aps.content-state is missing") }
        if aps?["input-push-channel"] != nil, !supports(.channels) {
            return drop(
                "input-push-channel needs iOS \(ActivityKitFeature.channels.introduced) and this iPhone runs iOS \(systemVersion): nothing starts")
        }
        if let exhausted = spendPushToStartBudget(of: app, at: now) {
            return drop(
                "push-to-start budget was exhausted (budget=-\(exhausted.over)); the app may start by push again at \(exhausted.roomAt)")
        }
        let activityID: String
        do {
            activityID = try admit(app: app, attributesType: type, attributes: attributes, content: state)
        } catch {
            return drop(error.description)
        }
        var pushType = ActivityPushType.none
        if let channel = aps?["input-push-channel"]?.stringValue {
            pushType = .channel(channel)
        } else if aps?["input-push-token"] == .number("1") || !supports(.inputPushToken) {
            // Before iOS 18 the key is not read, and a push-started activity gets an update token anyway.
            pushType = .token
        }
        var events = begin(
            activityID: activityID, app: app, attributesType: type, attributes: attributes,
            content: contentState(state, aps: aps), pushType: pushType, style: .standard, startDate: now,
            timestamp: unixDate(aps?["timestamp"]), at: now)
        setAlert(alert, on: activityID)
        if settings.rotatesPushToStartTokenAfterUse {
            events += rotatePushToStartToken(bundleID: bundleID, attributesType: tokenType, at: now)
        }
        return events + advance(to: now)
    }

    /// `event: update` or `event: end` to an activity (by its token or a channel).
    mutating func applyRemote(_ payload: JSONValue, toActivity activityID: String, source: String, at now: Date) -> [DeviceEvent] {
        guard let activity = activity(activityID) else { return [] }
        func drop(_ why: String) -> [DeviceEvent] {
            write("dropped \(source): \(why)", activity.bundleID, activityID: activityID, at: now)
            return []
        }
        let aps = payload["aps"]
        guard let event = aps?["event"]?.stringValue else { return drop("aps.event is missing") }
        guard event == "update" || event == "end" else { return drop("an activity takes event update or end, got \(event)") }
        let state = aps?["content-state"]
        if let state, let type = apps[activity.bundleID]?.attributeTypes[activity.attributesType] {
            do {
                try type.checkContentState(state)
            } catch {
                return drop("content-state does not decode into \(type.name).ContentState: \(error)")
            }
        }
        let content = state.map { contentState($0, aps: aps) }
        let timestamp = unixDate(aps?["timestamp"])
        if event == "update" {
            guard let content else { return drop("aps.content-state is required on update") }
            return apply(.update(content, alert: shownAlert(aps?["alert"], at: now)), to: activityID, timestamp: timestamp, source: source, at: now)
        }
        let policy: ActivityUIDismissalPolicy = unixDate(aps?["dismissal-date"]).map { .after($0) } ?? .default
        return apply(
            .end(content, policy, alert: shownAlert(aps?["alert"], at: now), cause: .endedByPush),
            to: activityID, timestamp: timestamp, source: source, at: now)
    }

    private func contentState(_ state: JSONValue, aps: JSONValue?) -> ActivityContentState {
        ActivityContentState(state: state, staleDate: unixDate(aps?["stale-date"]), relevanceScore: aps?["relevance-score"]?.doubleValue ?? 0)
    }

    private func unixDate(_ value: JSONValue?) -> Date? {
        value?.doubleValue.map { Date(timeIntervalSince1970: $0) }
    }

    /// The alert as shown: literal text, or the localization key where the text is localized.
    private func shownAlert(_ alert: JSONValue?, at now: Date) -> ShownAlert? {
        guard let alert, case .object = alert else { return nil }
        func text(_ key: String) -> String {
            if let literal = alert[key]?.stringValue { return literal }
            return alert[key]?["loc-key"]?.stringValue ?? ""
        }
        let sound = alert["sound"]?.stringValue
        return ShownAlert(title: text("title"), body: text("body"), sound: sound, at: now)
    }
}
