import Foundation

/// The iOS a simulated iPhone runs: what its ActivityKit offers depends on it (spec §1.2, §3.1,
/// §14.1). A new device runs `SystemVersion.newDevice` unless told otherwise.
public struct SystemVersion: Sendable, Hashable, Comparable, Codable, CustomStringConvertible {
    public var major: Int
    public var minor: Int

    public init(_ major: Int, _ minor: Int = 0) {
        (self.major, self.minor) = (major, minor)
    }

    /// The oldest simulated: push-to-start arrived in iOS 17.2.
    public static let oldest = SystemVersion(17, 2)
    public static let newDevice = SystemVersion(26, 0)
    /// The versions an "update iOS" moves through, in order (then minor versions of the last).
    public static let releases = [SystemVersion(17, 2), SystemVersion(18, 0), SystemVersion(26, 0), SystemVersion(27, 0)]

    /// `"18"`, `"17.2"`; nil for anything else or older than `oldest`.
    public init?(_ text: String) {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let major = Int(parts[0]), parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) }),
            let minor = parts.count == 2 ? Int(parts[1]) : 0, major < 100, (0..<100).contains(minor)
        else { return nil }
        self.init(major, minor)
        guard self >= Self.oldest else { return nil }
    }

    /// What an "update iOS" installs: the next release, or the next minor version of the last.
    public var next: SystemVersion {
        Self.releases.first { $0 > self } ?? SystemVersion(major, minor + 1)
    }

    public var description: String { "\(major).\(minor)" }

    public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.major, lhs.minor) < (rhs.major, rhs.minor) }

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

    public var introduced: SystemVersion {
        switch self {
        case .channels, .inputPushToken: SystemVersion(18)
        case .scheduledStarts: SystemVersion(26)
        }
    }

    public var name: String {
        switch self {
        case .channels: "broadcast channels"
        case .inputPushToken: "input-push-token"
        case .scheduledStarts: "scheduled starts"
        }
    }
}
