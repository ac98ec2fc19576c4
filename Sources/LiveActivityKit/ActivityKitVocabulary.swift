import Foundation

/// The data of a Live Activity, as in ActivityKit: the stored properties are the static
/// attributes, set once at start (APNs `attributes`); `ContentState` is the dynamic part,
/// replaced by every update (APNs `content-state`). Both are decoded on the device with a default
/// `JSONDecoder`, so an app can share these types with the server unchanged.
public protocol ActivityAttributes: Codable {
    associatedtype ContentState: Codable & Hashable
}

/// The content of a Live Activity at one moment, as in ActivityKit.
public struct ActivityContent<State: Codable & Hashable>: Hashable {
    public var state: State
    /// When the system marks the activity stale; `nil` means never.
    public var staleDate: Date?
    /// Orders the app's activities on the Lock Screen and picks the one in the Dynamic Island:
    /// higher is more relevant. Any `Double`; ActivityKit's default is 0.
    public var relevanceScore: Double

    public init(state: State, staleDate: Date?, relevanceScore: Double = 0) {
        self.state = state
        self.staleDate = staleDate
        self.relevanceScore = relevanceScore
    }
}

/// The alert of a start, or of an alerting update or end, as in ActivityKit. On iPhone it lights
/// the screen and shows the expanded presentation; a Watch shows title and body.
public struct AlertConfiguration: Sendable, Hashable, Codable {
    /// Literal text, or a key of the app's localisation files with the arguments to insert.
    public enum Text: Sendable, Hashable, Codable, ExpressibleByStringLiteral {
        case literal(String)
        case localized(key: String, arguments: [String])

        public init(stringLiteral value: String) { self = .literal(value) }
    }

    /// The sound played with the alert: the system default, or a sound file in the app bundle.
    public enum AlertSound: Sendable, Hashable, Codable {
        case `default`
        case named(String)

        /// The APNs `sound` value: `"default"` or the file name.
        public var payloadValue: String {
            switch self {
            case .default: "default"
            case .named(let file): file
            }
        }
    }

    public var title: Text
    public var body: Text
    /// `nil` sends the alert without a sound.
    public var sound: AlertSound?

    public init(title: Text, body: Text, sound: AlertSound? = .default) {
        self.title = title
        self.body = body
        self.sound = sound
    }
}

/// When an ended Live Activity leaves the Lock Screen, as in ActivityKit.
public enum ActivityUIDismissalPolicy: Sendable, Hashable {
    /// The system removes it, at most four hours after it ended.
    case `default`
    /// Removed at once.
    case immediate
    /// Removed at the given date, but never later than four hours after it ended.
    case after(Date)

    /// The longest an ended activity stays on the Lock Screen (Apple: four hours).
    public static let longestAfterEnd: TimeInterval = 4 * 3600
}

/// The lifecycle state of a Live Activity, as in ActivityKit.
public enum ActivityState: String, Sendable, Hashable, Codable, CaseIterable {
    /// Scheduled, not started yet (iOS 26).
    case pending
    case active
    /// Its stale date passed without a newer update.
    case stale
    /// Ended; may still be visible on the Lock Screen, takes no more updates.
    case ended
    /// Gone from the screen.
    case dismissed
}

/// ActivityKit's limit on an activity's data: its static attributes and content state together
/// at a start, its content state at an update (4 KB, spec §5; `attributesTooLarge` beyond). The
/// server refuses what a device would, and the simulated devices refuse it as ActivityKit does.
public enum ActivityData {
    public static let limit = 4096

    /// The size the limit is measured on: compact JSON of each part, together (ActivityKit counts
    /// its own encoding of the Swift values; ours is within a few bytes of it).
    public static func size(_ parts: JSONValue...) -> Int {
        parts.reduce(0) { $0 + $1.serialized.count }
    }
}
