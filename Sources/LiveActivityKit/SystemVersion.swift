import Foundation

/// The iOS a device runs, as far as Live Activities go: what its ActivityKit offers depends on it
/// (spec §1.2, §3.1, §14.1). Apps report it with their push-to-start tokens (LiveRelayKit sends
/// `UIDevice`'s version), so the server can reach each device the way it can be reached; a simulated
/// iPhone runs `SystemVersion.newDevice` unless told otherwise.
public struct SystemVersion: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public var major: Int
    public var minor: Int
    public var patch: Int

    public init(_ major: Int, _ minor: Int = 0, _ patch: Int = 0) {
        (self.major, self.minor, self.patch) = (major, minor, patch)
    }

    /// The oldest there is here: push-to-start arrived in iOS 17.2.
    public static let oldest = SystemVersion(17, 2)
    public static let newDevice = SystemVersion(26, 0)
    /// The versions an "update iOS" moves through, in order (then minor versions of the last).
    public static let releases = [SystemVersion(17, 2), SystemVersion(18, 0), SystemVersion(26, 0), SystemVersion(27, 0)]

    /// `"18"`, `"17.2"`, `"17.6.1"`; nil for anything else or older than `oldest`.
    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...3).contains(parts.count), parts.allSatisfy({ (1...2).contains($0.count) && $0.allSatisfy { $0 >= "0" && $0 <= "9" } })
        else { return nil }
        let numbers = parts.compactMap { Int($0) }
        self.init(numbers[0], numbers.count > 1 ? numbers[1] : 0, numbers.count > 2 ? numbers[2] : 0)
        guard self >= Self.oldest else { return nil }
    }

    /// Whether ActivityKit on this version offers `feature`.
    public func offers(_ feature: ActivityKitFeature) -> Bool { self >= feature.introduced }

    /// What an "update iOS" installs: the next release, or the next minor version of the last.
    public var next: SystemVersion {
        Self.releases.first { $0 > self } ?? SystemVersion(major, minor + 1)
    }

    public var description: String { patch == 0 ? "\(major).\(minor)" : "\(major).\(minor).\(patch)" }

    public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.major, lhs.minor, lhs.patch) < (rhs.major, rhs.minor, rhs.patch) }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let version = SystemVersion(text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "not an iOS version: \(text)"))
        }
        self = version
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

/// What ActivityKit offers from which iOS: one place for the versions every rule names.
public enum ActivityKitFeature: Sendable, CaseIterable {
    /// Broadcast channels: `PushType.channel` and `input-push-channel` (iOS 18). A start with
    /// `input-push-channel` starts nothing before (spec §3.1).
    case channels
    /// `input-push-token` (iOS 18). Before it, the key is not read and a push-started activity is
    /// given an update token anyway (spec §3.1).
    case inputPushToken
    /// `Activity.request(…, start:)`, pending until its date (iOS 26, spec §14.1).
    case scheduledStarts
    /// A paired Mac on macOS 26 shows the iPhone's activities in its menu bar (iPhone on iOS 18+).
    case macMenuBar
    /// The CarPlay Dashboard shows activities (iOS 26): the `small` family, or the Lock Screen view.
    case carPlay
    /// Compact and minimal presentations in a landscape Dynamic Island, at limited width (iOS 27).
    case landscapeDynamicIsland
    /// Controls reloaded by push: `ControlPushHandler` and a token per control (iOS 18).
    case controlPushes
    /// Widgets reloaded by push: `WidgetPushHandler` and one token per app (iOS 26).
    case widgetPushes

    public var introduced: SystemVersion {
        switch self {
        case .channels, .inputPushToken, .macMenuBar, .controlPushes: SystemVersion(18)
        case .scheduledStarts, .carPlay, .widgetPushes: SystemVersion(26)
        case .landscapeDynamicIsland: SystemVersion(27)
        }
    }

    public var name: String {
        switch self {
        case .channels: "broadcast channels"
        case .inputPushToken: "input-push-token"
        case .scheduledStarts: "scheduled starts"
        case .macMenuBar: "activities on a paired Mac"
        case .carPlay: "activities in CarPlay"
        case .landscapeDynamicIsland: "a landscape Dynamic Island"
        case .controlPushes: "control pushes"
        case .widgetPushes: "widget pushes"
        }
    }
}
