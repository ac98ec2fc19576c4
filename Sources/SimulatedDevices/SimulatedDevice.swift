import Foundation
import LiveActivityKit

/// Something the rest of the world must learn from a device: APNs learns about tokens, observers
/// about activities. Returned by every device operation, in order.
public enum DeviceEvent: Sendable, Hashable {
    /// A token APNs must now route to this device.
    case tokenIssued(token: String, bundleID: String, kind: TokenKind, environment: PushEnvironment)
    /// A token APNs must refuse with `410 Unregistered` from `at` on.
    case tokenRetired(token: String, at: Date, bundleID: String)
    /// An activity appeared (`Activity.activityUpdates`).
    case activityStarted(activityID: String, bundleID: String, attributesType: String, attributes: JSONValue)
    /// New content was applied (`Activity.contentUpdates`).
    case contentUpdated(activityID: String, bundleID: String, content: ActivityContentState)
    /// `Activity.activityStateUpdates`.
    case stateChanged(activityID: String, bundleID: String, to: ActivityState, cause: ActivityStateMachine.Transition.Cause)
    /// The person switched the app's Live Activities or frequent updates on or off in Settings
    /// (`ActivityAuthorizationInfo`'s `activityEnablementUpdates`, `frequentPushEnablementUpdates`).
    case authorizationChanged(bundleID: String, activitiesEnabled: Bool, frequentPushesEnabled: Bool)

    /// WidgetKit's handler calls (iOS 26): the app's widget token or widgets changed
    /// (`WidgetPushHandler.pushTokenDidChange(_:widgets:)`), or its controls or their tokens
    /// (`ControlPushHandler.pushTokensDidChange(controls:)`, which always passes all of them).
    /// What the handler is given is the device's `surfaces` of the app at that moment.
    case widgetPushInfoChanged(bundleID: String)
    case controlPushInfoChanged(bundleID: String)
    /// A widgets or controls push reloaded the app's widgets or controls of these kinds.
    case surfacesReloaded(bundleID: String, type: ReloadPushType, kinds: [String])

    public enum TokenKind: Sendable, Hashable {
        case update(activityID: String)
        case pushToStart(attributesType: String)
        /// The app's widget token, one per app and device.
        case widgets
        /// A control's token.
        case control(kind: String)

        /// The push type APNs routes to a token of this kind.
        public var pushType: APNsPushType {
            switch self {
            case .update, .pushToStart: .liveActivity
            case .widgets: .widgets
            case .control: .controls
            }
        }
    }
}

/// A push as APNs hands it to the device.
public struct DevicePush: Sendable, Hashable {
    public var token: String
    public var payload: JSONValue
    /// 10 unless given (`apns-priority`).
    public var priority: Int
    /// `apns-expiration`: `nil` (absent) lets APNs store it; 0 means deliver now or never.
    public var expiration: Date?
    public var receivedAt: Date

    public init(token: String, payload: JSONValue, priority: Int = 10, expiration: Date? = nil, receivedAt: Date) {
        self.token = token.lowercased()
        self.payload = payload
        self.priority = priority
        self.expiration = expiration
        self.receivedAt = receivedAt
    }
}

/// A simulated iPhone or iPad: its apps, their activities, and ActivityKit's rules (spec §8).
/// A value: every operation takes the current time and returns the events it caused.
public struct SimulatedDevice: Sendable {
    public let id: String
    public var model: DeviceModel
    public var hasPairedWatch: Bool
    /// Optional: a kept state file of an earlier release has none (those devices ran as iOS 26).
    private var installedVersion: SystemVersion?
    public var systemVersion: SystemVersion { installedVersion ?? .newDevice }
    /// Optional: a kept state file of an earlier release has none (portrait, nothing connected).
    private var keptSurroundings: Surroundings?
    /// How the iPhone is held and what it is connected to.
    public var surroundings: Surroundings {
        get { keptSurroundings ?? Surroundings() }
        set { keptSurroundings = newValue }
    }
    public private(set) var isOnline = true
    public private(set) var isLocked = true
    public private(set) var apps: [String: SimulatedApp] = [:]
    /// Every activity not yet forgotten, oldest first.
    public private(set) var activities: [SimulatedActivity] = []
    public private(set) var log: [DeviceLogEntry] = []
    /// Shared by every device of a fleet: one copy, not one per device.
    private var sharedSettings: SharedSettings
    public var settings: DeviceRuntimeSettings { sharedSettings.value }
    /// APNs keeps one push per app while the device is offline.
    private var storedWhileOffline: [String: DevicePush] = [:]
    /// Priority-10 deliveries per app in the last hour.
    private var priority10Deliveries: [String: [Date]] = [:]
    /// Push-to-start starts per app in the last hour (optional: a kept state file of an earlier
    /// release has none).
    private var pushToStartStarts: [String: [Date]]?
    /// Pushes waiting for the opportunistic delay or for budget, newest per target.
    private var deferred: [String: HeldPush] = [:]
    private var tokenGenerator: TokenGenerator
    /// Push-to-start tokens an iOS update killed (`updateOS`): APNs still takes pushes to them.
    private var tokensKilledByUpdate: Set<String> = []
    /// Optional: a kept state file of an earlier release has none (no widgets were placed).
    private var keptSurfaces: [String: AppSurfaces]?
    /// Each app's widgets and controls, by bundle id.
    public internal(set) var surfaces: [String: AppSurfaces] {
        get { keptSurfaces ?? [:] }
        set { keptSurfaces = newValue.isEmpty ? nil : newValue }
    }

    public init(
        id: String, model: DeviceModel = .iPhoneWithDynamicIsland, hasPairedWatch: Bool = false,
        systemVersion: SystemVersion = .newDevice, settings: DeviceRuntimeSettings = .init(), seed: UInt64? = nil
    ) {
        self.init(
            id: id, model: model, hasPairedWatch: hasPairedWatch, systemVersion: systemVersion, settings: SharedSettings(settings), seed: seed)
    }

    init(id: String, model: DeviceModel, hasPairedWatch: Bool, systemVersion: SystemVersion, settings: SharedSettings, seed: UInt64?) {
        self.id = id
        self.model = model
        self.hasPairedWatch = hasPairedWatch
        self.installedVersion = systemVersion
        self.sharedSettings = settings
        self.tokenGenerator = TokenGenerator(seed: seed)
    }

    public func activity(_ id: String) -> SimulatedActivity? { activities.first { $0.id == id } }

    // MARK: Apps

    /// Installs (or replaces) an app; returns its push-to-start tokens, one per attribute type.
    public mutating func install(_ app: SimulatedApp, at now: Date) -> [DeviceEvent] {
        var app = app
        app.pushToStartTokens = [:]
        apps[app.bundleID] = app
        var events: [DeviceEvent] = []
        for type in app.attributeTypes.keys.sorted() { events += issuePushToStartToken(bundleID: app.bundleID, type: type) }
        write("installed, \(app.attributeTypes.count) attribute type(s)", app.bundleID, at: now)
        return events
    }

    /// Changes the person's settings for an app; turning Live Activities off ends its activities.
    public mutating func setSettings(
        of bundleID: String, liveActivitiesEnabled: Bool? = nil, frequentUpdatesEnabled: Bool? = nil, at now: Date
    ) -> [DeviceEvent] {
        guard let before = apps[bundleID] else { return [] }
        if let liveActivitiesEnabled { apps[bundleID]?.liveActivitiesEnabled = liveActivitiesEnabled }
        if let frequentUpdatesEnabled { apps[bundleID]?.frequentUpdatesEnabled = frequentUpdatesEnabled }
        guard let after = apps[bundleID] else { return [] }
        var events: [DeviceEvent] = []
        if (before.areActivitiesEnabled, before.frequentPushesEnabled) != (after.areActivitiesEnabled, after.frequentPushesEnabled) {
            events.append(
                .authorizationChanged(
                    bundleID: bundleID, activitiesEnabled: after.areActivitiesEnabled, frequentPushesEnabled: after.frequentPushesEnabled))
        }
        if after.liveActivitiesEnabled {
            guard !before.liveActivitiesEnabled else { return events }
            // Switched back on: a token an iOS update killed is replaced (what people did, §14.2).
            for (type, token) in after.pushToStartTokens.sorted(by: { $0.key < $1.key }) where tokensKilledByUpdate.contains(token) {
                tokensKilledByUpdate.remove(token)
                events += rotatePushToStartToken(bundleID: bundleID, attributesType: type, at: now)
            }
            return events
        }
        write("Live Activities turned off: ending the app's activities", bundleID, at: now)
        return events + endAll(of: bundleID, cause: .endedBySystem, at: now)
    }

    public mutating func setForeground(_ bundleID: String, _ inForeground: Bool) {
        apps[bundleID]?.isInForeground = inForeground
    }

    /// Whether this device's iOS offers `feature`.
    public func supports(_ feature: ActivityKitFeature) -> Bool { systemVersion.offers(feature) }

    /// An iOS update (to `version`, or the next release) that, as iOS 27.0 did (spec §14.2),
    /// silently kills every app's push-to-start tokens: APNs keeps answering 200 to starts sent to
    /// them, and nothing appears. iOS is never downgraded: an older `version` changes nothing.
    mutating func updateOS(to version: SystemVersion?, at now: Date) -> [DeviceEvent] {
        let version = version ?? systemVersion.next
        guard version > systemVersion else {
            write("iOS \(version) is not newer than iOS \(systemVersion): nothing to install", nil, at: now)
            return []
        }
        installedVersion = version
        for app in apps.values { tokensKilledByUpdate.formUnion(app.pushToStartTokens.values) }
        write(
            "iOS updated to \(version): the apps' push-to-start tokens start nothing now, while APNs still answers 200, until Live Activities are switched off and on",
            nil, at: now)
        return []
    }

    /// Whether an iOS update killed this push-to-start token.
    public func wasKilledByUpdate(pushToStartToken token: String) -> Bool { tokensKilledByUpdate.contains(token.lowercased()) }

    /// Replaces a push-to-start token, as the system does now and then.
    public mutating func rotatePushToStartToken(bundleID: String, attributesType: String, at now: Date) -> [DeviceEvent] {
        guard let old = apps[bundleID]?.pushToStartTokens[attributesType] else { return [] }
        return [.tokenRetired(token: old, at: now, bundleID: bundleID)] + issuePushToStartToken(bundleID: bundleID, type: attributesType)
    }

    // MARK: The app's side of ActivityKit

    /// `Activity.request(attributes:content:pushType:style:alertConfiguration:start:)`.
    public mutating func request(
        bundleID: String, attributesType: String, attributes: JSONValue, content: ActivityContentState,
        pushType: ActivityPushType = .none, style: ActivityStyle = .standard, alert: ShownAlert? = nil,
        start: Date? = nil, at now: Date
    ) throws(ActivityAuthorizationError) -> (activityID: String, events: [DeviceEvent]) {
        guard let app = apps[bundleID] else { throw .denied("\(bundleID) is not installed") }
        guard app.isInForeground else { throw .visibility }
        if case .channel = pushType, !supports(.channels) { throw .unsupported(.channels, on: systemVersion) }
        if let start, start > now {
            guard supports(.scheduledStarts) else { throw .unsupported(.scheduledStarts, on: systemVersion) }
            guard alert != nil else { throw .missingAlert }
        }
        // Time first: an activity past its 8-hour limit no longer counts against the maximums.
        var events = advance(to: now)
        let activityID = try admit(app: app, attributesType: attributesType, attributes: attributes, content: content.state)
        events += begin(
            activityID: activityID, app: app, attributesType: attributesType, attributes: attributes, content: content,
            pushType: pushType, style: style, startDate: start ?? now, timestamp: now, at: now)
        if let alert { setAlert(alert, on: activityID) }
        events += advance(to: now)
        return (activityID, events)
    }

    /// `Activity.update(_:alertConfiguration:timestamp:)`.
    public mutating func update(activityID: String, content: ActivityContentState, alert: ShownAlert? = nil, timestamp: Date? = nil, at now: Date)
        -> [DeviceEvent]
    {
        apply(.update(content, alert: alert), to: activityID, timestamp: timestamp ?? now, source: "the app", at: now)
    }

    /// `Activity.end(_:dismissalPolicy:)`.
    public mutating func end(
        activityID: String, content: ActivityContentState?, dismissalPolicy: ActivityUIDismissalPolicy, timestamp: Date? = nil, at now: Date
    ) -> [DeviceEvent] {
        apply(.end(content, dismissalPolicy, alert: nil, cause: .endedByApp), to: activityID, timestamp: timestamp ?? now, source: "the app", at: now)
    }

    /// Asks for a new update token (an "APNs routing event"): the old one is retired once the new one is issued.
    public mutating func rotateUpdateToken(activityID: String, at now: Date) -> [DeviceEvent] {
        guard let index = activities.firstIndex(where: { $0.id == activityID }), activities[index].pushType == .token,
            activities[index].lifecycle.isOngoing
        else { return [] }
        activities[index].tokenDueAt = now
        return advance(to: now)
    }

    // MARK: The person

    /// The person swipes the activity away.
    public mutating func dismissByPerson(activityID: String, at now: Date) -> [DeviceEvent] {
        guard let index = activities.firstIndex(where: { $0.id == activityID }) else { return [] }
        let transitions = activities[index].lifecycle.dismissByPerson(at: now)
        // The app hears one state, `.dismissed` (spec §8.1, "user removal of the UI"): not an
        // end first, which it would take for the system's.
        let events = record(transitions, of: index, at: now).filter { event in
            if case .stateChanged(_, _, .ended, .endedByPerson) = event { false } else { true }
        }
        return events + advance(to: now)
    }

    /// Locking ends transient activities.
    public mutating func setLocked(_ locked: Bool, at now: Date) -> [DeviceEvent] {
        isLocked = locked
        guard locked else { return [] }
        var events: [DeviceEvent] = []
        for index in activities.indices where activities[index].style == .transient && activities[index].lifecycle.isOngoing {
            let (_, transitions) = activities[index].lifecycle.end(nil, timestamp: nil, dismissal: .immediate, cause: .endedBySystem, at: now)
            events += record(transitions, of: index, at: now)
        }
        return events + advance(to: now)
    }

    /// Offline, pushes wait at APNs (one per app); back online, the stored ones arrive.
    public mutating func setOnline(_ online: Bool, at now: Date) -> [DeviceEvent] {
        isOnline = online
        guard online else { return [] }
        var events: [DeviceEvent] = []
        for bundleID in storedWhileOffline.keys.sorted() {
            guard let push = storedWhileOffline.removeValue(forKey: bundleID) else { continue }
            if let expiration = push.expiration, expiration < now {
                write("a push stored while offline expired at \(expiration) and was discarded", bundleID, at: now)
                continue
            }
            events += receive(push, at: now)
        }
        return events + advance(to: now)
    }

    // MARK: Time

    /// Everything time does up to `now`: scheduled starts, stale dates, the 8-hour limit,
    /// dismissals, token issuing and retiring, deferred pushes.
    public mutating func advance(to now: Date) -> [DeviceEvent] {
        var events: [DeviceEvent] = []
        for index in activities.indices {
            let transitions = activities[index].lifecycle.advance(to: now)
            events += record(transitions, of: index, at: now)
            if let due = activities[index].tokenDueAt, due <= now, activities[index].lifecycle.isOngoing {
                activities[index].tokenDueAt = nil
                if let old = activities[index].pushToken { events.append(.tokenRetired(token: old, at: due, bundleID: activities[index].bundleID)) }
                let token = tokenGenerator.next()
                activities[index].pushToken = token
                events.append(
                    .tokenIssued(
                        token: token, bundleID: activities[index].bundleID, kind: .update(activityID: activities[index].id),
                        environment: environment(of: activities[index].bundleID)))
            }
            if let retiring = activities[index].retiringToken, retiring.at <= now {
                activities[index].retiringToken = nil
                events.append(.tokenRetired(token: retiring.token, at: retiring.at, bundleID: activities[index].bundleID))
            }
        }
        // Forget dismissed activities once their token is retired.
        activities.removeAll { $0.state == .dismissed && $0.retiringToken == nil }
        for key in deferred.isEmpty ? [] : deferred.keys.sorted() {
            guard let waiting = deferred[key], waiting.dueAt <= now else { continue }
            deferred[key] = nil
            events += deliver(waiting.push, at: waiting.dueAt, deferredAlready: true)
        }
        return events
    }

    /// The next moment at which time alone changes something on this device.
    public var nextDeadline: Date? {
        let fromActivities = activities.flatMap { [$0.lifecycle.nextDeadline, $0.tokenDueAt, $0.retiringToken?.at] }.compactMap { $0 }
        return (fromActivities + deferred.values.map(\.dueAt)).min()
    }

    // MARK: Internals

    mutating func write(_ message: String, _ bundleID: String?, activityID: String? = nil, at now: Date) {
        log.append(DeviceLogEntry(at: now, bundleID: bundleID, activityID: activityID, message: message))
        if log.count > settings.logCapacity { log.removeFirst(log.count - settings.logCapacity) }
    }

    /// The checks of `Activity.request` and of a push-to-start, in ActivityKit's terms.
    mutating func admit(app: SimulatedApp, attributesType: String, attributes: JSONValue, content: JSONValue) throws(ActivityAuthorizationError)
        -> String
    {
        guard app.areActivitiesEnabled else {
            throw .denied(app.supportsLiveActivities ? "the person turned Live Activities off for this app" : "NSSupportsLiveActivities is not set")
        }
        guard let type = app.attributeTypes[attributesType] else { throw .unsupportedTarget(attributesType) }
        do {
            try type.checkAttributes(attributes)
            try type.checkContentState(content)
        } catch {
            throw .doesNotDecode(error)
        }
        let size = ActivityData.size(attributes, content)
        guard size <= settings.maximumActivityDataBytes else { throw .attributesTooLarge(size, limit: settings.maximumActivityDataBytes) }
        let ongoing = activities.filter(\.lifecycle.isOngoing)
        guard ongoing.count(where: { $0.bundleID == app.bundleID }) < settings.maximumActivitiesPerApp else {
            throw .targetMaximumExceeded(settings.maximumActivitiesPerApp)
        }
        guard ongoing.count < settings.maximumActivitiesPerDevice else { throw .globalMaximumExceeded(settings.maximumActivitiesPerDevice) }
        return UUID(uuidString: tokenGenerator.uuid())!.uuidString
    }

    mutating func begin(
        activityID: String, app: SimulatedApp, attributesType: String, attributes: JSONValue, content: ActivityContentState,
        pushType: ActivityPushType, style: ActivityStyle, startDate: Date, timestamp: Date?, at now: Date
    ) -> [DeviceEvent] {
        var activity = SimulatedActivity(
            id: activityID, bundleID: app.bundleID, attributesType: attributesType, attributes: attributes,
            lifecycle: ActivityStateMachine(content: content, startDate: startDate, now: now, timestamp: timestamp),
            pushType: pushType, style: style)
        if pushType == .token { activity.tokenDueAt = now + settings.tokenIssueDelay }
        if let stale = content.staleDate, stale <= startDate {
            activity.isShown = false
            write(
                "activity \(attributesType) starts with its stale date \(stale) already passed: created stale, never shown on the Lock Screen",
                app.bundleID, activityID: activityID, at: now)
        }
        activities.append(activity)
        let how =
            switch pushType {
            case .none: "no push"
            case .token: "push type token"
            case .channel(let id): "channel \(id)"
            }
        write(
            "activity \(attributesType) \(activity.state == .pending ? "scheduled for \(startDate)" : "started") (\(how))",
            app.bundleID, activityID: activityID, at: now)
        return [.activityStarted(activityID: activityID, bundleID: app.bundleID, attributesType: attributesType, attributes: attributes)]
    }

    mutating func setAlert(_ alert: ShownAlert, on activityID: String) {
        guard let index = activities.firstIndex(where: { $0.id == activityID }) else { return }
        activities[index].lastAlert = alert
    }

    /// Events for state changes; on dismissal the update token is scheduled to retire.
    mutating func record(_ transitions: [ActivityStateMachine.Transition], of index: Int, at now: Date) -> [DeviceEvent] {
        var events: [DeviceEvent] = []
        for transition in transitions {
            events.append(
                .stateChanged(activityID: activities[index].id, bundleID: activities[index].bundleID, to: transition.to, cause: transition.cause))
            if transition.to == .ended { activities[index].endCause = transition.cause }
            write(
                "\(transition.from) → \(transition.to): \(transition.cause.rawValue)", activities[index].bundleID,
                activityID: activities[index].id, at: transition.at)
            if transition.to == .dismissed {
                activities[index].tokenDueAt = nil
                if let token = activities[index].pushToken {
                    activities[index].retiringToken = RetiringToken(token: token, at: transition.at + settings.tokenPurgeDelay)
                }
            }
        }
        return events
    }

    enum Change {
        case update(ActivityContentState, alert: ShownAlert?)
        case end(ActivityContentState?, ActivityUIDismissalPolicy, alert: ShownAlert?, cause: ActivityStateMachine.Transition.Cause)
    }

    mutating func apply(_ change: Change, to activityID: String, timestamp: Date?, source: String, at now: Date) -> [DeviceEvent] {
        var events = advance(to: now)
        guard let index = activities.firstIndex(where: { $0.id == activityID }) else { return events }
        let outcome: ActivityStateMachine.Outcome
        let transitions: [ActivityStateMachine.Transition]
        let alert: ShownAlert?
        switch change {
        case .update(let content, let updateAlert):
            (outcome, transitions) = activities[index].lifecycle.update(content, timestamp: timestamp, at: now)
            alert = updateAlert
        case .end(let content, let policy, let endAlert, let cause):
            (outcome, transitions) = activities[index].lifecycle.end(content, timestamp: timestamp, dismissal: policy, cause: cause, at: now)
            alert = endAlert
        }
        if outcome == .applied, let alert { activities[index].lastAlert = alert }
        switch outcome {
        case .applied:
            events.append(.contentUpdated(activityID: activityID, bundleID: activities[index].bundleID, content: activities[index].content))
        case .ignoredAsOlder(let last):
            write(
                "ignored an update from \(source): its timestamp \(timestamp.map { "\($0)" } ?? "-") is not newer than \(last)",
                activities[index].bundleID, activityID: activityID, at: now)
        case .ignoredAfterEnd:
            write("ignored an update from \(source): the activity has ended", activities[index].bundleID, activityID: activityID, at: now)
        case .ignoredWhilePending:
            write("ignored an update from \(source): the activity has not started", activities[index].bundleID, activityID: activityID, at: now)
        }
        return events + record(transitions, of: index, at: now) + advance(to: now)
    }

    mutating func endAll(of bundleID: String, cause: ActivityStateMachine.Transition.Cause, at now: Date) -> [DeviceEvent] {
        var events: [DeviceEvent] = []
        for index in activities.indices where activities[index].bundleID == bundleID && activities[index].lifecycle.isOngoing {
            let (_, transitions) = activities[index].lifecycle.end(nil, timestamp: nil, dismissal: .immediate, cause: cause, at: now)
            events += record(transitions, of: index, at: now)
        }
        return events + advance(to: now)
    }

    /// A token never issued before on this device.
    mutating func newToken() -> String { tokenGenerator.next() }

    mutating func issuePushToStartToken(bundleID: String, type: String) -> [DeviceEvent] {
        let token = tokenGenerator.next()
        apps[bundleID]?.pushToStartTokens[type] = token
        return [.tokenIssued(token: token, bundleID: bundleID, kind: .pushToStart(attributesType: type), environment: environment(of: bundleID))]
    }

    /// Which APNs environment the installed build's tokens belong to.
    func environment(of bundleID: String) -> PushEnvironment {
        apps[bundleID]?.environment ?? .sandbox
    }

    // Pushes live in SimulatedDevice+Pushes.swift; these are its hooks into the private state.
    mutating func storeWhileOffline(_ push: DevicePush, bundleID: String) { storedWhileOffline[bundleID] = push }
    /// Holds `push` for `key` until `dueAt`; a newer push replaces a held one but keeps its turn.
    mutating func hold(_ push: DevicePush, key: String, until dueAt: Date) {
        deferred[key] = HeldPush(push: push, dueAt: min(deferred[key]?.dueAt ?? dueAt, dueAt))
    }
    mutating func spendPriority10Budget(of app: SimulatedApp, at now: Date) -> Date? {
        let budget = app.frequentPushesEnabled ? settings.frequentUpdatesBudgetPerHour : settings.priority10BudgetPerHour
        return Self.spend(hourlyBudget: budget, from: &priority10Deliveries[app.bundleID, default: []], at: now)
    }

    /// Spends one of the app's push-to-start starts; nil, or how far past the budget it is (as
    /// ActivityKit's "budget=-5" says) and when the next start fits.
    mutating func spendPushToStartBudget(of app: SimulatedApp, at now: Date) -> (over: Int, roomAt: Date)? {
        var starts = pushToStartStarts ?? [:]
        defer { pushToStartStarts = starts }
        guard let roomAt = Self.spend(hourlyBudget: settings.pushToStartBudgetPerHour, from: &starts[app.bundleID, default: []], at: now)
        else { return nil }
        // `spend` kept the last hour's starts, this one not among them.
        return (starts[app.bundleID, default: []].count - settings.pushToStartBudgetPerHour + 1, roomAt)
    }

    /// Spends one of `budget` uses an hour kept in `uses`: nil when it fits, else when one does.
    private static func spend(hourlyBudget budget: Int, from uses: inout [Date], at now: Date) -> Date? {
        spend(budget, per: 3600, from: &uses, at: now)
    }

    /// Spends one of `budget` uses a `window` kept in `uses`: nil when it fits, else when one does.
    static func spend(_ budget: Int, per window: TimeInterval, from uses: inout [Date], at now: Date) -> Date? {
        uses = uses.filter { $0 > now - window }
        guard uses.count < budget else { return budget > 0 ? uses[uses.count - budget] + window : now + window }
        uses.append(now)
        return nil
    }
}

// MARK: Kept across restarts

/// Everything a device is, for a `FleetSnapshot`; its settings by value (the fleet shares them
/// again with `share(_:)`).
extension SimulatedDevice: Codable {
    /// Takes the fleet's settings object when the values are the same: one copy for many devices.
    mutating func share(_ fleetSettings: SharedSettings) {
        if sharedSettings.value == fleetSettings.value { sharedSettings = fleetSettings }
    }
}

/// A push held for the opportunistic delay or for budget.
struct HeldPush: Sendable, Codable {
    var push: DevicePush
    var dueAt: Date
}

/// Settings held once for many devices.
final class SharedSettings: Sendable, Codable {
    let value: DeviceRuntimeSettings
    init(_ value: DeviceRuntimeSettings) { self.value = value }

    /// Kept as the settings themselves: a restored device has its own copy until it is shared.
    init(from decoder: any Decoder) throws { value = try DeviceRuntimeSettings(from: decoder) }
    func encode(to encoder: any Encoder) throws { try value.encode(to: encoder) }
}

/// Random 80-byte tokens (160 hex characters, like ActivityKit's) and UUIDs; seeded for
/// repeatable tests.
struct TokenGenerator: Sendable, Codable {
    private var state: UInt64

    init(seed: UInt64?) { state = seed ?? UInt64.random(in: 1...UInt64.max) }

    /// SplitMix64.
    private mutating func nextWord() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// 80 random bytes as 160 lowercase hex characters, the length of Live Activity tokens.
    mutating func next() -> String {
        (0..<10).map { _ in Self.hex(nextWord()) }.joined()
    }

    /// A random (version 4) UUID.
    mutating func uuid() -> String {
        let hex = Array(Self.hex(nextWord()) + Self.hex(nextWord()))
        return "\(String(hex[0..<8]))-\(String(hex[8..<12]))-4\(String(hex[13..<16]))-a\(String(hex[17..<20]))-\(String(hex[20..<32]))"
    }

    /// 16 hex digits, zero-padded.
    private static func hex(_ word: UInt64) -> String {
        let text = String(word, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }
}
