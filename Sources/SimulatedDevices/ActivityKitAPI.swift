import Foundation
import LiveActivityKit

// ActivityKit's API, for app-side logic written and tested on Linux against a simulated device,
// in ActivityKit's shapes, so that the same code compiles against ActivityKit: `Activity` is a
// class that is not `Sendable`, its `attributes` and `content` do not throw, `update` and `end`
// are `async`, `PushType` is a structure. The one addition is the app the code runs in
// (`AppProcess`), which on an iPhone is the process: several simulated apps share this one, so
// each runs its code inside `app.run { … }`, and ActivityKit's static members (`Activity.request`,
// `Activity.activities`, `ActivityAuthorizationInfo()`) act for the app of the task that calls them.

/// An app installed on a simulated device, seen from inside it.
public struct AppProcess: Sendable {
    public let fleet: DeviceFleet
    public let deviceID: String
    public let bundleID: String

    /// The app whose code the current task runs (`run(_:)`).
    @TaskLocal public static var current: AppProcess?

    /// Runs `body` as the app's code: ActivityKit's static members act for this app in it, and in
    /// the tasks it creates.
    public func run<Value>(_ body: () async throws -> Value) async rethrows -> Value {
        try await Self.$current.withValue(self, operation: body)
    }

    var app: SimulatedApp? { try? fleet.device(deviceID).apps[bundleID] }

    /// Brings the app to the foreground (only then may it request activities) or sends it back.
    public func setForeground(_ inForeground: Bool) throws {
        try fleet.withDevice(deviceID) { device, _ in (device.setForeground(bundleID, inForeground), []) }
    }
}

/// Code that uses ActivityKit outside `AppProcess.run`: on an iPhone, it always runs in an app.
public struct NotInAnApp: Error, Hashable, CustomStringConvertible {
    public var description: String { "ActivityKit was called outside an app: run the code in app.run { … }" }
}

extension DeviceFleet {
    /// Installs `app` on a device and returns it running; its push-to-start tokens are issued.
    @discardableResult
    public func install(_ app: SimulatedApp, on deviceID: String) throws -> AppProcess {
        try withDevice(deviceID) { device, now in ((), device.install(app, at: now)) }
        return AppProcess(fleet: self, deviceID: deviceID, bundleID: app.bundleID)
    }
}

/// How a Live Activity receives remote updates, as ActivityKit's `PushType`: a structure of
/// constants, not an enumeration to switch over.
public struct PushType: Sendable, Hashable {
    let kind: ActivityPushType

    /// Its own update token.
    public static var token: PushType { PushType(kind: .token) }
    /// A broadcast channel (iOS 18), by its base64 channel id.
    public static func channel(_ name: String) -> PushType { PushType(kind: .channel(name)) }
}

/// `ActivityAuthorizationInfo`: whether the app of the current task may show Live Activities.
public struct ActivityAuthorizationInfo {
    private let process: AppProcess?

    public init() {
        process = AppProcess.current
    }

    public var areActivitiesEnabled: Bool { process?.app?.areActivitiesEnabled ?? false }
    public var frequentPushesEnabled: Bool { process?.app?.frequentPushesEnabled ?? false }

    /// Each change of `areActivitiesEnabled`, from now on.
    public var activityEnablementUpdates: FleetSequence<Bool> {
        updates { enabled, _ in enabled }
    }

    /// Each change of `frequentPushesEnabled`, from now on.
    public var frequentPushEnablementUpdates: FleetSequence<Bool> {
        updates { _, frequent in frequent }
    }

    private func updates(_ value: @escaping (Bool, Bool) -> Bool) -> FleetSequence<Bool> {
        guard let process else { return .finished }
        let bundleID = process.bundleID
        var last = value(areActivitiesEnabled, frequentPushesEnabled)
        return process.fleet.sequence(on: process.deviceID) { event in
            guard case .authorizationChanged(bundleID, let enabled, let frequent) = event.event, value(enabled, frequent) != last else {
                return .skip
            }
            last = value(enabled, frequent)
            return .element(last)
        }
    }
}

/// A Live Activity of the app, as ActivityKit's `Activity<Attributes>`.
public final class Activity<Attributes: ActivityAttributes>: Identifiable {
    public let id: String
    /// Set once at the start, as in ActivityKit.
    public let attributes: Attributes
    private let process: AppProcess
    /// The content last read or set by the app, shown once the device forgets the activity.
    private var lastContent: ActivityContent<Attributes.ContentState>

    private init(id: String, attributes: Attributes, content: ActivityContent<Attributes.ContentState>, process: AppProcess) {
        self.id = id
        self.attributes = attributes
        self.lastContent = content
        self.process = process
    }

    /// The activity of the device's, typed; `nil` when its attributes or content do not decode
    /// into this type (ActivityKit gives an app only activities of its types).
    convenience init?(_ activity: SimulatedActivity, in process: AppProcess) {
        guard let attributes = try? activity.attributes.decoded(as: Attributes.self), let content = try? Self.typed(activity.content) else {
            return nil
        }
        self.init(id: activity.id, attributes: attributes, content: content, process: process)
    }

    /// The activity as the device holds it now; `nil` once it is forgotten after dismissal.
    private var current: SimulatedActivity? { try? process.fleet.device(process.deviceID).activity(id) }

    public var activityState: ActivityState { current?.state ?? .dismissed }

    public var content: ActivityContent<Attributes.ContentState> {
        if let current, let content = try? Self.typed(current.content) { lastContent = content }
        return lastContent
    }

    /// The current update token; `nil` until the system issues it (see `pushTokenUpdates`).
    public var pushToken: Data? { current?.pushToken.map { DeviceToken(unchecked: $0).data } }

    // MARK: Starting

    /// `Activity.request(attributes:content:pushType:style:alertConfiguration:start:)`, in the
    /// current task's app.
    public static func request(
        attributes: Attributes, content: ActivityContent<Attributes.ContentState>, pushType: PushType? = nil, style: ActivityStyle = .standard,
        alertConfiguration: AlertConfiguration? = nil, start: Date? = nil
    ) throws -> Activity<Attributes> {
        guard let process = AppProcess.current else { throw NotInAnApp() }
        let attributesJSON = try JSONValue(encoding: attributes)
        let contentState = try ActivityContentState(content)
        let id = try process.fleet.withDevice(process.deviceID) { device, now in
            let alert = alertConfiguration.map { ShownAlert($0, at: start ?? now) }
            return try device.request(
                bundleID: process.bundleID, attributesType: String(describing: Attributes.self), attributes: attributesJSON, content: contentState,
                pushType: pushType?.kind ?? .none, style: style, alert: alert, start: start, at: now)
        }
        return Activity(id: id, attributes: attributes, content: content, process: process)
    }

    /// `Activity.activities`: the current task's app's activities of this type that are not dismissed.
    public static var activities: [Activity<Attributes>] {
        guard let process = AppProcess.current else { return [] }
        let type = String(describing: Attributes.self)
        let device = try? process.fleet.device(process.deviceID)
        return (device?.activities ?? [])
            .filter { $0.bundleID == process.bundleID && $0.attributesType == type && $0.state != .dismissed }
            .compactMap { Activity($0, in: process) }
    }

    // MARK: The app's changes

    /// `Activity.update(_:alertConfiguration:timestamp:)`. As in ActivityKit, it does not throw:
    /// an update the activity cannot take (ended, older than its last) is written in the device's log.
    public func update(
        _ content: ActivityContent<Attributes.ContentState>, alertConfiguration: AlertConfiguration? = nil, timestamp: Date? = nil
    ) async {
        guard let contentState = try? ActivityContentState(content) else { return }
        lastContent = content
        let id = id
        try? process.fleet.withDevice(process.deviceID) { device, now in
            (
                (),
                device.update(
                    activityID: id, content: contentState, alert: alertConfiguration.map { ShownAlert($0, at: now) }, timestamp: timestamp, at: now)
            )
        }
    }

    /// `Activity.end(_:dismissalPolicy:)`.
    public func end(_ content: ActivityContent<Attributes.ContentState>?, dismissalPolicy: ActivityUIDismissalPolicy = .default) async {
        let contentState = content.flatMap { try? ActivityContentState($0) }
        if let content { lastContent = content }
        let id = id
        try? process.fleet.withDevice(process.deviceID) { device, now in
            ((), device.end(activityID: id, content: contentState, dismissalPolicy: dismissalPolicy, at: now))
        }
    }

    // MARK: Sequences

    /// `Activity.pushTokenUpdates`: the update token once issued (at once if it is already), then
    /// every new one; finishes when the activity is dismissed.
    public var pushTokenUpdates: FleetSequence<Data> {
        let id = id
        return process.fleet.sequence(
            on: process.deviceID, initial: { device in device.activity(id)?.pushToken.map { [DeviceToken(unchecked: $0).data] } ?? [] }
        ) { event in
            switch event.event {
            case .tokenIssued(let token, _, .update(id), _): .element(DeviceToken(unchecked: token).data)
            case .stateChanged(id, _, .dismissed, _): .finish
            default: .skip
            }
        }
    }

    /// `Activity.contentUpdates`: each content applied from now on.
    public var contentUpdates: FleetSequence<ActivityContent<Attributes.ContentState>> {
        let id = id
        return process.fleet.sequence(on: process.deviceID) { event in
            switch event.event {
            case .contentUpdated(id, _, let content): (try? Self.typed(content)).map { .element($0) } ?? .skip
            case .stateChanged(id, _, .dismissed, _): .finish
            default: .skip
            }
        }
    }

    /// `Activity.activityStateUpdates`: each state from now on, ending with `.dismissed`.
    public var activityStateUpdates: FleetSequence<ActivityState> {
        let id = id
        return process.fleet.sequence(on: process.deviceID) { event in
            switch event.event {
            case .stateChanged(id, _, .dismissed, _): .last(.dismissed)
            case .stateChanged(id, _, let state, _): .element(state)
            default: .skip
            }
        }
    }

    /// `Activity.activityUpdates`: activities of this type the current task's app gains from now
    /// on, including those started by push.
    public static var activityUpdates: FleetSequence<Activity<Attributes>> {
        guard let process = AppProcess.current else { return .finished }
        let type = String(describing: Attributes.self)
        return process.fleet.sequence(on: process.deviceID) { event in
            guard case .activityStarted(let id, process.bundleID, type, _) = event.event,
                let activity = try? process.fleet.device(process.deviceID).activity(id), let typed = Activity(activity, in: process)
            else { return .skip }
            return .element(typed)
        }
    }

    /// `Activity.pushToStartToken`.
    public static var pushToStartToken: Data? {
        let type = String(describing: Attributes.self)
        return AppProcess.current?.app?.pushToStartTokens[type].map { DeviceToken(unchecked: $0).data }
    }

    /// `Activity.pushToStartTokenUpdates`: the current push-to-start token, then each new one.
    public static var pushToStartTokenUpdates: FleetSequence<Data> {
        guard let process = AppProcess.current else { return .finished }
        let type = String(describing: Attributes.self)
        return process.fleet.sequence(
            on: process.deviceID,
            initial: { device in
                device.apps[process.bundleID]?.pushToStartTokens[type].map { [DeviceToken(unchecked: $0).data] } ?? []
            }
        ) { event in
            guard case .tokenIssued(let token, process.bundleID, .pushToStart(type), _) = event.event else { return .skip }
            return .element(DeviceToken(unchecked: token).data)
        }
    }

    static func typed(_ content: ActivityContentState) throws -> ActivityContent<Attributes.ContentState> {
        ActivityContent(
            state: try content.state.decoded(as: Attributes.ContentState.self), staleDate: content.staleDate, relevanceScore: content.relevanceScore)
    }
}

/// One of ActivityKit's sequences, read from the fleet's event log: what the device already
/// holds (for token sequences), then each matching event, until the activity is gone or the
/// iterating task is cancelled.
public struct FleetSequence<Element>: AsyncSequence {
    public typealias Failure = Never

    enum Step {
        case skip
        case element(Element)
        /// Yield this one and finish.
        case last(Element)
        case finish
    }

    let initial: [Element]
    let events: AsyncStream<FleetEvent>
    let step: (FleetEvent) -> Step

    /// A sequence with nothing in it: what code outside an app is given.
    static var finished: FleetSequence {
        FleetSequence(initial: [], events: AsyncStream { $0.finish() }, step: { _ in .finish })
    }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var initial: IndexingIterator<[Element]>
        var events: AsyncStream<FleetEvent>.Iterator
        let step: (FleetEvent) -> Step
        var finished = false

        public mutating func next(isolation actor: isolated (any Actor)? = #isolation) async -> Element? {
            if let first = initial.next() { return first }
            while !finished, let event = await events.next(isolation: actor) {
                switch step(event) {
                case .skip: continue
                case .element(let element): return element
                case .last(let element):
                    finished = true
                    return element
                case .finish:
                    finished = true
                }
            }
            return nil
        }

        public mutating func next() async -> Element? { await next(isolation: nil) }
    }

    public func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(initial: initial.makeIterator(), events: events.makeAsyncIterator(), step: step)
    }
}

extension DeviceFleet {
    /// A sequence over one device's events, starting exactly where `initial` read the device.
    func sequence<Element>(
        on deviceID: String, initial: @escaping (SimulatedDevice) -> [Element] = { _ in [] },
        _ step: @escaping (FleetEvent) -> FleetSequence<Element>.Step
    ) -> FleetSequence<Element> {
        // Read under the fleet's lock: no event can slip between the snapshot and the subscription.
        let snapshot = try? withDevice(deviceID) { device, _ in ((initial(device), events.lastSequence), []) }
        let stream = events.subscribe(after: snapshot?.1 ?? events.lastSequence)
        return FleetSequence(initial: snapshot?.0 ?? [], events: stream) { event in
            event.deviceID == deviceID ? step(event) : .skip
        }
    }
}

extension ShownAlert {
    init(_ configuration: AlertConfiguration, at date: Date) {
        func text(_ text: AlertConfiguration.Text) -> String {
            switch text {
            case .literal(let literal): literal
            case .localized(let key, _): key
            }
        }
        self.init(title: text(configuration.title), body: text(configuration.body), sound: configuration.sound?.payloadValue, at: date)
    }
}

extension ActivityContentState {
    init<State: Codable & Hashable>(_ content: ActivityContent<State>) throws {
        self.init(state: try JSONValue(encoding: content.state), staleDate: content.staleDate, relevanceScore: content.relevanceScore)
    }
}

extension DeviceToken {
    /// A token the device generated itself: already lowercase hex.
    init(unchecked hex: String) {
        self = try! DeviceToken(hex)
    }
}
