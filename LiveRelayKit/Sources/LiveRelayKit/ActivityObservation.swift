import Foundation

/// What an adapter saw ActivityKit do, in ActivityKit's terms: the only input of LiveRelayKit's
/// decisions. The ActivityKit adapter and the simulated iPhones' adapter both translate their
/// sequences into these, so that everything after is the same code.
@_spi(Adapter) public enum ActivityObservation: Sendable, Hashable, Codable {
    /// `Activity<T>.pushToStartTokenUpdates` gave a token for the attributes type.
    case pushToStartToken(attributesType: String, token: Data)
    /// `Activity<T>.activityUpdates` (or the app's own request) gave an activity; `key` is the
    /// value of the attribute the backend keys it by; `scheduled`, its `activityState` was
    /// `.pending` (iOS 26: requested with a later start date).
    case activity(id: String, attributesType: String, key: String, pushType: PushTarget, scheduled: Bool = false)
    /// `activity.pushTokenUpdates` gave a token.
    case activityToken(activityID: String, token: Data)
    /// `activity.activityStateUpdates` gave a state.
    case activityState(activityID: String, state: ObservedState)
    /// The app ended the activity itself (`activity.end(…)`), just before ActivityKit reports `.ended`.
    case endedByApp(activityID: String)
    /// `ActivityAuthorizationInfo`: Live Activities switched on or off, frequent updates allowed or not.
    case authorization(activitiesEnabled: Bool, frequentPushesEnabled: Bool)
    /// The person signed in to the app as this user, or out (`nil`): the app's word, not ActivityKit's.
    case user(String?)
    /// `WidgetPushHandler.pushTokenDidChange(_:widgets:)` (iOS 26): the app's widget token and
    /// the widgets placed; no token once WidgetKit has none (no widget left).
    case widgetPushInfo(token: Data?, widgets: [Report.Widget])
    /// `ControlPushHandler.pushTokensDidChange(controls:)` (iOS 18): every control and its token.
    case controlPushInfo([ObservedControl])
}

/// A control as `ControlInfo` gives it: its kind and `pushInfo?.token`.
@_spi(Adapter) public struct ObservedControl: Sendable, Hashable, Codable {
    public var kind: String
    public var token: Data

    public init(kind: String, token: Data) {
        self.kind = kind
        self.token = token
    }
}

/// How an activity receives its pushes, as it was requested (`PushType`).
@_spi(Adapter) public enum PushTarget: Sendable, Hashable, Codable {
    /// No pushes: the app updates it itself.
    case none
    /// Pushes to its own update token (`.token`).
    case token
    /// Broadcast pushes on a channel (`.channel(id)`, iOS 18); `nil`: the key's channel, which
    /// the server knows (ActivityKit does not tell an app the channel of an activity a push started).
    case channel(String?)
}

/// `ActivityState`, as LiveRelayKit needs it.
@_spi(Adapter) public enum ObservedState: String, Sendable, Hashable, Codable {
    /// Scheduled, not started yet (iOS 26).
    case pending
    case active
    case stale
    case ended
    case dismissed
}
