import Foundation
import LiveActivityKit

/// The content an activity shows: its decoded-valid `ContentState` as JSON, stale date and
/// relevance.
public struct ActivityContentState: Sendable, Hashable {
    public var state: JSONValue
    public var staleDate: Date?
    public var relevanceScore: Double

    public init(state: JSONValue, staleDate: Date? = nil, relevanceScore: Double = 0) {
        self.state = state
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
    }
}

/// How long ActivityKit lets an activity live (spec §8.1).
public enum ActivityLifetime {
    /// An activity is ended by the system after 8 hours.
    public static let maximumActive: TimeInterval = 8 * 3600
    /// After ending it may stay on the Lock Screen up to 4 more hours.
    public static let maximumOnLockScreenAfterEnd = ActivityUIDismissalPolicy.longestAfterEnd
}

/// One activity's lifecycle as ActivityKit runs it: pending, active, stale, ended, dismissed.
/// A value: every input returns what happened, and time moves only through `advance(to:)`.
public struct ActivityStateMachine: Sendable, Hashable, Codable {
    public private(set) var state: ActivityState
    public private(set) var content: ActivityContentState
    /// When it became (or becomes, while pending) active.
    public private(set) var startDate: Date
    public private(set) var endDate: Date?
    /// When the ended activity leaves the Lock Screen.
    public private(set) var dismissalDate: Date?
    /// The newest update timestamp applied; older or equal ones are ignored.
    public private(set) var lastTimestamp: Date?

    /// Why an input changed nothing, or what it changed.
    public enum Outcome: Sendable, Hashable {
        case applied
        /// Its timestamp is not newer than the last applied one.
        case ignoredAsOlder(last: Date)
        /// The activity has ended: it takes no more updates.
        case ignoredAfterEnd
        /// Not started yet.
        case ignoredWhilePending
    }

    /// A change of `state` caused by time or by an input.
    public struct Transition: Sendable, Hashable {
        public var from: ActivityState
        public var to: ActivityState
        public var at: Date
        public var cause: Cause

        public enum Cause: String, Sendable, Hashable, Codable {
            case scheduledStart = "scheduled start date reached"
            case staleDate = "stale date passed"
            case update = "newer content arrived"
            case endedByApp = "ended by the app"
            case endedByPush = "ended by a push"
            case endedByPerson = "removed by the person"
            case endedBySystem = "ended by the system"
            case eightHourLimit = "8-hour limit reached"
            case dismissalPolicy = "dismissal date reached"
        }
    }

    /// A started activity (`startDate` ≤ now) or a scheduled one (`startDate` later: pending).
    public init(content: ActivityContentState, startDate: Date, now: Date, timestamp: Date? = nil) {
        self.state = startDate > now ? .pending : .active
        self.content = content
        self.startDate = startDate
        self.lastTimestamp = timestamp
    }

    /// Whether ActivityKit still counts it against the app's and the device's limits.
    public var isOngoing: Bool { state == .pending || state == .active || state == .stale }

    /// The next moment at which time alone changes something.
    public var nextDeadline: Date? {
        switch state {
        case .pending: startDate
        case .active:
            [content.staleDate, startDate + ActivityLifetime.maximumActive].compactMap { $0 }.min()
        case .stale: startDate + ActivityLifetime.maximumActive
        case .ended: dismissalDate
        case .dismissed: nil
        }
    }

    /// Applies every time-driven change up to `now`, in order.
    public mutating func advance(to now: Date) -> [Transition] {
        var transitions: [Transition] = []
        while let deadline = nextDeadline, deadline <= now {
            switch state {
            case .pending:
                transitions.append(move(to: .active, at: deadline, .scheduledStart))
            case .active where content.staleDate == deadline:
                transitions.append(move(to: .stale, at: deadline, .staleDate))
            case .active, .stale:
                transitions.append(end(at: deadline, cause: .eightHourLimit, dismissal: .default))
            case .ended:
                transitions.append(move(to: .dismissed, at: deadline, .dismissalPolicy))
            case .dismissed:
                return transitions
            }
        }
        return transitions
    }

    /// New content (a push `update`, or `Activity.update` in the app). A stale activity becomes
    /// active again unless the new stale date has passed too.
    public mutating func update(_ newContent: ActivityContentState, timestamp: Date?, at now: Date) -> (Outcome, [Transition]) {
        if let refusal = refusal(timestamp: timestamp) { return (refusal, []) }
        content = newContent
        if let timestamp { lastTimestamp = timestamp }
        var transitions: [Transition] = []
        if state == .stale, newContent.staleDate.map({ $0 > now }) ?? true {
            transitions.append(move(to: .active, at: now, .update))
        }
        return (.applied, transitions + advance(to: now))
    }

    /// Ends the activity, optionally with final content (without it the last content stays).
    public mutating func end(
        _ finalContent: ActivityContentState?, timestamp: Date?, dismissal: ActivityUIDismissalPolicy,
        cause: Transition.Cause, at now: Date
    ) -> (Outcome, [Transition]) {
        if let refusal = refusal(timestamp: timestamp) { return (refusal, []) }
        if let finalContent { content = finalContent }
        if let timestamp { lastTimestamp = timestamp }
        let ended = end(at: now, cause: cause, dismissal: dismissal)
        return (.applied, [ended] + advance(to: now))
    }

    /// The person removed it from the Lock Screen: it ends (if it had not) and is dismissed.
    public mutating func dismissByPerson(at now: Date) -> [Transition] {
        var transitions: [Transition] = []
        if isOngoing { transitions.append(end(at: now, cause: .endedByPerson, dismissal: .immediate)) }
        if state != .dismissed { transitions.append(move(to: .dismissed, at: now, .endedByPerson)) }
        return transitions
    }

    private func refusal(timestamp: Date?) -> Outcome? {
        if state == .pending { return .ignoredWhilePending }
        if !isOngoing { return .ignoredAfterEnd }
        if let timestamp, let lastTimestamp, timestamp <= lastTimestamp { return .ignoredAsOlder(last: lastTimestamp) }
        return nil
    }

    private mutating func end(at now: Date, cause: Transition.Cause, dismissal: ActivityUIDismissalPolicy) -> Transition {
        endDate = now
        let latest = now + ActivityLifetime.maximumOnLockScreenAfterEnd
        dismissalDate =
            switch dismissal {
            case .default: latest
            case .immediate: now
            case .after(let date): min(max(date, now), latest)
            }
        return move(to: .ended, at: now, cause)
    }

    private mutating func move(to newState: ActivityState, at date: Date, _ cause: Transition.Cause) -> Transition {
        let transition = Transition(from: state, to: newState, at: date, cause: cause)
        state = newState
        return transition
    }
}
