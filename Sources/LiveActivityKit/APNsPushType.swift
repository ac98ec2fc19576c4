/// The `apns-push-type`s a device token of ours is for: each token serves one, and its pushes go
/// to the topic `<bundle id><suffix>` (Apple's table of push types and topics, spec §3).
public enum APNsPushType: String, Sendable, Hashable, CaseIterable, Codable {
    /// An activity's update or push-to-start token.
    case liveActivity = "liveactivity"
    /// The token WidgetKit hands an app's widget extension (iOS 26): one per app and device.
    case widgets
    /// A control's token (`ControlPushInfo.token`): one per control.
    case controls

    /// Literal, not built from the raw value: the emulator compares it for every push.
    public var topicSuffix: String {
        switch self {
        case .liveActivity: ".push-type.liveactivity"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        }
    }
}

/// A push that tells the system an app's widgets or controls have new content: WidgetKit then
/// reloads their timelines, as `reloadAllTimelines()` would, within the system's reload budget.
/// The body is always the same; APNs carries it to one device token, never as a broadcast.
public enum ReloadPushType: String, Sendable, Hashable, CaseIterable, Codable {
    case widgets
    case controls

    public var pushType: APNsPushType {
        switch self {
        case .widgets: .widgets
        case .controls: .controls
        }
    }

    /// `{"aps":{"content-changed":true}}`, the body Apple documents for both.
    public static let body: [UInt8] = Array(#"{"aps":{"content-changed":true}}"#.utf8)

    /// Whether a body asks for a reload, as WidgetKit reads it: an object whose `aps` holds
    /// `content-changed: true`. Other members are allowed and ignored.
    public static func asksForReload(_ payload: JSONValue) -> Bool {
        payload["aps"]?["content-changed"] == .bool(true)
    }
}
