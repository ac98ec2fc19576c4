import Foundation
import LiveActivityKit

// ActivityKit's API, for app-side logic written and tested on Linux against a simulated device.
// The names follow ActivityKit; the one addition is the app (`AppProcess`), which on an iPhone
// is the process the code runs in.

/// An app installed on a simulated device, seen from inside it.
public struct AppProcess: Sendable {
    public let fleet: DeviceFleet
    public let deviceID: String
    public let bundleID: String

    /// `ActivityAuthorizationInfo`.
    public var areActivitiesEnabled: Bool { app?.areActivitiesEnabled ?? false }
    public var frequentPushesEnabled: Bool { app?.frequentPushesEnabled ?? false }

    private var app: SimulatedApp? { try? fleet.device(deviceID).apps[bundleID] }

    /// Brings the app to the foreground (only then may it request activities) or sends it back.
    public func setForeground(_ inForeground: Bool) throws {
        try fleet.withDevice(deviceID) { device, _ in (device.setForeground(bundleID, inForeground), []) }
    }
}

extension DeviceFleet {
    /// Installs `app` on a device and returns it running; its push-to-start tokens are issued.
    @discardableResult
    public func install(_ app: SimulatedApp, on deviceID: String) throws -> AppProcess {
        try withDevice(deviceID) { device, now in ((), device.install(app, at: now)) }
        return AppProcess(fleet: self, deviceID: deviceID, bundleID: app.bundleID)
    }
}

/// A Live Activity of the app, as ActivityKit's `Activity<Attributes>`.
public struct Activity<Attributes: ActivityAttributes>: Sendable, Identifiable {
    public let id: String
    public let app: AppProcess

    /// The activity as the device holds it now; `nil` once it is forgotten after dismissal.
    private var current: SimulatedActivity? { try? app.fleet.device(app.deviceID).activity(id) }

    public var attributes: Attributes {
        get throws {
            guard let current else { throw ActivityGone(activityID: id) }
            return try current.attributes.decoded(as: Attributes.self)
        }
    }

    public var activityState: ActivityState { current?.state ?? .dismissed }

    public var content: ActivityContent<Attributes.ContentState> {
        get throws {
            guard let current else { throw ActivityGone(activityID: id) }
            return try Self.typed(current.content)
        }
    }

    /// The current update token; `nil` until the system issues it (see `pushTokenUpdates`).
    public var pushToken: Data? { current?.pushToken.map { DeviceToken(unchecked: $0).data } }

    // MARK: Starting

    /// `Activity.request(attributes:content:pushType:style:alertConfiguration:start:)`, in `app`.
    public static func request(
        in app: AppProcess, attributes: Attributes, content: ActivityContent<Attributes.ContentState>,
        pushType: PushType? = nil, style: ActivityStyle = .standard, alertConfiguration: AlertConfiguration? = nil,
        start: Date? = nil
    ) throws -> Activity<Attributes> {
        let attributesJSON = try JSONValue(encoding: attributes)
        let contentState = try ActivityContentState(content)
        let id = try app.fleet.withDevice(app.deviceID) { device, now in
            let type = String(describing: Attributes.self)
            let alert = alertConfiguration.map { ShownAlert($0, at: start ?? now) }
            let pushType: ActivityPushType =
                switch pushType {
                case nil: .none
                case .token: .token
                case .channel(let channelID): .channel(channelID)
                }
            return try device.request(
                bundleID: app.bundleID, attributesType: type, attributes: attributesJSON, content: contentState,
                pushType: pushType, style: style, alert: alert, start: start, at: now)
        }
        return Activity(id: id, app: app)
    }

    /// `Activity.activities`: the app's activities of this type that are not dismissed.
    public static func activities(in app: AppProcess) -> [Activity<Attributes>] {
        let type = String(describing: Attributes.self)
        let device = try? app.fleet.device(app.deviceID)
        return (device?.activities ?? [])
            .filter { $0.bundleID == app.bundleID && $0.attributesType == type && $0.state != .dismissed }
            .map { Activity(id: $0.id, app: app) }
    }

    // MARK: The app's changes

    /// `Activity.update(_:alertConfiguration:timestamp:)`.
    public func update(_ content: ActivityContent<Attributes.ContentState>, alertConfiguration: AlertConfiguration? = nil, timestamp: Date? = nil)
        throws
    {
        let contentState = try ActivityContentState(content)
        try app.fleet.withDevice(app.deviceID) { device, now in
            (
                (),
                device.update(
                    activityID: id, content: contentState, alert: alertConfiguration.map { ShownAlert($0, at: now) }, timestamp: timestamp, at: now)
            )
        }
    }

    /// `Activity.end(_:dismissalPolicy:)`.
    public func end(_ content: ActivityContent<Attributes.ContentState>?, dismissalPolicy: ActivityUIDismissalPolicy = .default) throws {
        let contentState = try content.map(ActivityContentState.init)
        try app.fleet.withDevice(app.deviceID) { device, now in
            ((), device.end(activityID: id, content: contentState, dismissalPolicy: dismissalPolicy, at: now))
        }
    }

    // MARK: Sequences

    /// `Activity.pushTokenUpdates`: the update token once issued (at once if it is already), then
    /// every new one; finishes when the activity is dismissed.
    public var pushTokenUpdates: FleetSequence<Data> {
        let id = id
        return app.fleet.sequence(
            on: app.deviceID, initial: { device in device.activity(id)?.pushToken.map { [DeviceToken(unchecked: $0).data] } ?? [] }
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
        return app.fleet.sequence(on: app.deviceID) { event in
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
        return app.fleet.sequence(on: app.deviceID) { event in
            switch event.event {
            case .stateChanged(id, _, .dismissed, _): .last(.dismissed)
            case .stateChanged(id, _, let state, _): .element(state)
            default: .skip
            }
        }
    }

    /// `Activity.activityUpdates`: activities of this type the app gains from now on, including
    /// those started by push.
    public static func activityUpdates(in app: AppProcess) -> FleetSequence<Activity<Attributes>> {
        let type = String(describing: Attributes.self)
        return app.fleet.sequence(on: app.deviceID) { event in
            guard case .activityStarted(let id, app.bundleID, type, _) = event.event else { return .skip }
            return .element(Activity(id: id, app: app))
        }
    }

    /// `Activity.pushToStartToken`.
    public static func pushToStartToken(in app: AppProcess) -> Data? {
        let type = String(describing: Attributes.self)
        return (try? app.fleet.device(app.deviceID).apps[app.bundleID]?.pushToStartTokens[type]).flatMap { $0 }.map {
            DeviceToken(unchecked: $0).data
        }
    }

    /// `Activity.pushToStartTokenUpdates`: the current push-to-start token, then each new one.
    public static func pushToStartTokenUpdates(in app: AppProcess) -> FleetSequence<Data> {
        let type = String(describing: Attributes.self)
        return app.fleet.sequence(
            on: app.deviceID,
            initial: { device in
                device.apps[app.bundleID]?.pushToStartTokens[type].map { [DeviceToken(unchecked: $0).data] } ?? []
            }
        ) { event in
            guard case .tokenIssued(let token, app.bundleID, .pushToStart(type), _) = event.event else { return .skip }
            return .element(DeviceToken(unchecked: token).data)
        }
    }

    static func typed(_ content: ActivityContentState) throws -> ActivityContent<Attributes.ContentState> {
        ActivityContent(
            state: try content.state.decoded(as: Attributes.ContentState.self), staleDate: content.staleDate, relevanceScore: content.relevanceScore)
    }
}

/// The device no longer holds the activity: it was dismissed and forgotten.
public struct ActivityGone: Error, Hashable, CustomStringConvertible {
    public var activityID: String
    public var description: String { "the activity \(activityID) was dismissed and is gone from the device" }
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
