import Foundation
import LiveActivityKit

/// The numbers ActivityKit and APNs do not publish, as settings (spec §7, §8.3).
public struct DeviceRuntimeSettings: Sendable, Hashable, Codable {
    /// Ongoing activities per app (`targetMaximumExceeded` beyond; the community sees about 5).
    public var maximumActivitiesPerApp: Int
    /// Ongoing activities per device (`globalMaximumExceeded` beyond; Apple does not say).
    public var maximumActivitiesPerDevice: Int
    /// Static attributes plus dynamic content state, in bytes (`attributesTooLarge` beyond).
    public var maximumActivityDataBytes: Int
    /// How long after a start the update token arrives (`pushTokenUpdates` is asynchronous).
    public var tokenIssueDelay: TimeInterval
    /// How long after dismissal the update token stays valid at APNs before `410`.
    public var tokenPurgeDelay: TimeInterval
    /// Whether a push-to-start token is replaced after a start push used it.
    public var rotatesPushToStartTokenAfterUse: Bool
    /// Priority-10 pushes per app per hour before the rest are deferred.
    public var priority10BudgetPerHour: Int
    /// The same with `NSSupportsLiveActivitiesFrequentUpdates` and the person's consent.
    public var frequentUpdatesBudgetPerHour: Int
    /// Push-to-start starts per app per hour before ActivityKit refuses the rest. Devices were seen
    /// refusing valid starts with "push-to-start budget was exhausted" (spec §14.2.2); Apple
    /// publishes neither its size nor its refill: 10 an hour is our assumption.
    public var pushToStartBudgetPerHour: Int
    /// How long a priority-5 push waits to be delivered (newest per activity wins meanwhile).
    public var opportunisticDelay: TimeInterval
    /// How long an alerting update shows the expanded Dynamic Island or the banner.
    public var alertPresentationDuration: TimeInterval
    /// Entries kept in each device's log.
    public var logCapacity: Int
    /// Reloads a day of one app's widgets (and, apart, of its controls) that pushes may cause;
    /// past it a push's reload is dropped. Apple: "a widget receives a budget of 40 to 70
    /// refreshes in a 24-hour period" when viewed often; 70 is our assumption for pushes.
    public var reloadsPerDay: Int

    public init(
        maximumActivitiesPerApp: Int = 5, maximumActivitiesPerDevice: Int = 10, maximumActivityDataBytes: Int = ActivityData.limit,
        tokenIssueDelay: TimeInterval = 1, tokenPurgeDelay: TimeInterval = 0, rotatesPushToStartTokenAfterUse: Bool = false,
        priority10BudgetPerHour: Int = 15, frequentUpdatesBudgetPerHour: Int = 3600, pushToStartBudgetPerHour: Int = 10,
        opportunisticDelay: TimeInterval = 30, alertPresentationDuration: TimeInterval = 8, logCapacity: Int = 200, reloadsPerDay: Int = 70
    ) {
        self.reloadsPerDay = reloadsPerDay
        self.pushToStartBudgetPerHour = pushToStartBudgetPerHour
        self.maximumActivitiesPerApp = maximumActivitiesPerApp
        self.maximumActivitiesPerDevice = maximumActivitiesPerDevice
        self.maximumActivityDataBytes = maximumActivityDataBytes
        self.tokenIssueDelay = tokenIssueDelay
        self.tokenPurgeDelay = tokenPurgeDelay
        self.rotatesPushToStartTokenAfterUse = rotatesPushToStartTokenAfterUse
        self.priority10BudgetPerHour = priority10BudgetPerHour
        self.frequentUpdatesBudgetPerHour = frequentUpdatesBudgetPerHour
        self.opportunisticDelay = opportunisticDelay
        self.alertPresentationDuration = alertPresentationDuration
        self.logCapacity = logCapacity
    }
}

extension DeviceRuntimeSettings {
    private enum CodingKeys: String, CodingKey {
        case maximumActivitiesPerApp, maximumActivitiesPerDevice, maximumActivityDataBytes, tokenIssueDelay, tokenPurgeDelay
        case rotatesPushToStartTokenAfterUse, priority10BudgetPerHour, frequentUpdatesBudgetPerHour, pushToStartBudgetPerHour
        case opportunisticDelay, alertPresentationDuration, logCapacity, reloadsPerDay
    }

    /// Each setting a kept state file lacks (one written before the setting existed) takes its default.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init()
        func read<Value: Decodable>(_ key: CodingKeys, into value: inout Value) throws {
            if let kept = try container.decodeIfPresent(Value.self, forKey: key) { value = kept }
        }
        try read(.maximumActivitiesPerApp, into: &maximumActivitiesPerApp)
        try read(.maximumActivitiesPerDevice, into: &maximumActivitiesPerDevice)
        try read(.maximumActivityDataBytes, into: &maximumActivityDataBytes)
        try read(.tokenIssueDelay, into: &tokenIssueDelay)
        try read(.tokenPurgeDelay, into: &tokenPurgeDelay)
        try read(.rotatesPushToStartTokenAfterUse, into: &rotatesPushToStartTokenAfterUse)
        try read(.priority10BudgetPerHour, into: &priority10BudgetPerHour)
        try read(.frequentUpdatesBudgetPerHour, into: &frequentUpdatesBudgetPerHour)
        try read(.pushToStartBudgetPerHour, into: &pushToStartBudgetPerHour)
        try read(.opportunisticDelay, into: &opportunisticDelay)
        try read(.alertPresentationDuration, into: &alertPresentationDuration)
        try read(.logCapacity, into: &logCapacity)
        try read(.reloadsPerDay, into: &reloadsPerDay)
    }
}

/// What kind of device it is, as far as presentations go.
public enum DeviceModel: String, Sendable, Hashable, CaseIterable, Codable {
    /// An iPhone with a Dynamic Island (iPhone 14 Pro and later).
    case iPhoneWithDynamicIsland
    /// An iPhone without one: alerting updates show a banner.
    case iPhone
    case iPad

    public var hasDynamicIsland: Bool { self == .iPhoneWithDynamicIsland }
}

/// An `ActivityAttributes` type the app's widget extension knows: its name (the push's
/// `attributes-type`) and how its static attributes and its `ContentState` decode — by a contract
/// (from the control API; the app reports it to its server), or by the real Swift types with
/// `JSONDecoder` (from Swift).
public struct ActivityAttributesType: Sendable, Hashable {
    public var name: String
    /// The schemas, when the type is given as a contract.
    public let contract: ActivityContract?
    private let decodeAttributes: @Sendable (JSONValue) throws(DecodingFailure) -> Void
    private let decodeContentState: @Sendable (JSONValue) throws(DecodingFailure) -> Void

    public init(_ contract: ActivityContract) {
        self.name = contract.attributesType
        self.contract = contract
        decodeAttributes = { json throws(DecodingFailure) in try contract.checkAttributes(json) }
        decodeContentState = { json throws(DecodingFailure) in try contract.checkContentState(json) }
    }

    public init(name: String, attributes: SwiftStruct, contentState: SwiftStruct) {
        self.init(ActivityContract(attributesType: name, attributes: attributes, contentState: contentState))
    }

    /// The type itself: pushes are decoded with a default `JSONDecoder`, as the widget does.
    public init<Attributes: ActivityAttributes & SendableMetatype>(_ type: Attributes.Type, name: String = String(describing: Attributes.self)) {
        self.name = name
        self.contract = nil
        decodeAttributes = { json throws(DecodingFailure) in try DecodingFailure.decode(Attributes.self, from: json) }
        decodeContentState = { json throws(DecodingFailure) in try DecodingFailure.decode(Attributes.ContentState.self, from: json) }
    }

    /// Throws what `JSONDecoder` would report decoding `json` as the static attributes.
    public func checkAttributes(_ json: JSONValue) throws(DecodingFailure) { try decodeAttributes(json) }
    /// Throws what `JSONDecoder` would report decoding `json` as the `ContentState`.
    public func checkContentState(_ json: JSONValue) throws(DecodingFailure) { try decodeContentState(json) }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.name == rhs.name && lhs.contract == rhs.contract }

    public func hash(into hasher: inout Hasher) { hasher.combine(name) }
}

/// An installed app: its Info.plist flags, the person's settings, its widget's attribute types.
public struct SimulatedApp: Sendable, Hashable {
    public var bundleID: String
    /// `NSSupportsLiveActivities`.
    public var supportsLiveActivities: Bool
    /// `NSSupportsLiveActivitiesFrequentUpdates`.
    public var supportsFrequentUpdates: Bool
    /// Settings › the app › Live Activities.
    public var liveActivitiesEnabled: Bool
    /// Settings › the app › More Frequent Updates.
    public var frequentUpdatesEnabled: Bool
    public var attributeTypes: [String: ActivityAttributesType]
    /// Only a foreground app may request an activity.
    public var isInForeground: Bool
    /// Where the build's tokens belong: sandbox for a development build, production for a
    /// TestFlight or App Store build.
    public var environment: PushEnvironment
    /// The build installed: `CFBundleShortVersionString` and `CFBundleVersion`, as one (`"1.0 (1)"`).
    public var version: String
    /// The current push-to-start token of each attribute type.
    public internal(set) var pushToStartTokens: [String: String] = [:]

    public init(
        bundleID: String, supportsLiveActivities: Bool = true, supportsFrequentUpdates: Bool = false,
        liveActivitiesEnabled: Bool = true, frequentUpdatesEnabled: Bool = true,
        attributeTypes: [ActivityAttributesType] = [], isInForeground: Bool = true, environment: PushEnvironment = .sandbox,
        version: String = SimulatedApp.firstVersion
    ) {
        self.environment = environment
        self.version = version
        self.bundleID = bundleID
        self.supportsLiveActivities = supportsLiveActivities
        self.supportsFrequentUpdates = supportsFrequentUpdates
        self.liveActivitiesEnabled = liveActivitiesEnabled
        self.frequentUpdatesEnabled = frequentUpdatesEnabled
        self.attributeTypes = Dictionary(attributeTypes.map { ($0.name, $0) }, uniquingKeysWith: { _, last in last })
        self.isInForeground = isInForeground
    }

    /// The version of an app installed without one named.
    public static let firstVersion = "1.0 (1)"

    /// `ActivityAuthorizationInfo().areActivitiesEnabled`.
    public var areActivitiesEnabled: Bool { supportsLiveActivities && liveActivitiesEnabled }
    /// `ActivityAuthorizationInfo().frequentPushesEnabled`.
    public var frequentPushesEnabled: Bool { supportsFrequentUpdates && frequentUpdatesEnabled }
}

/// How an activity receives remote updates (`PushType` in ActivityKit; `nil` there means none).
public enum ActivityPushType: Sendable, Hashable, Codable {
    case none
    case token
    case channel(String)
}

/// `ActivityStyle`.
public enum ActivityStyle: String, Sendable, Hashable, Codable {
    case standard
    /// Shown while the person is in a task; ends when the device locks.
    case transient
}

/// An alert as the device shows it.
public struct ShownAlert: Sendable, Hashable, Codable {
    public var title: String
    public var body: String
    public var sound: String?
    public var at: Date

    public init(title: String, body: String, sound: String? = nil, at: Date) {
        self.title = title
        self.body = body
        self.sound = sound
        self.at = at
    }
}

/// One Live Activity on a device.
public struct SimulatedActivity: Sendable, Hashable {
    public let id: String
    public let bundleID: String
    public let attributesType: String
    public let attributes: JSONValue
    public internal(set) var lifecycle: ActivityStateMachine
    public let pushType: ActivityPushType
    public let style: ActivityStyle
    /// The current update token (only with push type `.token`, once issued).
    public internal(set) var pushToken: String?
    /// When the next update token is issued, while one is due.
    var tokenDueAt: Date?
    /// The update token retired at dismissal, and when APNs starts refusing it.
    var retiringToken: RetiringToken?
    /// Why it ended, once it has: an app that launches later reads it with the activity's state.
    public internal(set) var endCause: ActivityStateMachine.Transition.Cause?
    public internal(set) var lastAlert: ShownAlert?
    /// False for one started with its stale date already passed: iPhones create it stale and
    /// never show it, on the Lock Screen or anywhere (seen on devices, spec §14.2.1; that an
    /// update with a later stale date does not bring it back is our assumption).
    public internal(set) var isShown = true

    public var state: ActivityState { lifecycle.state }
    public var content: ActivityContentState { lifecycle.content }

    public static func == (lhs: SimulatedActivity, rhs: SimulatedActivity) -> Bool {
        lhs.id == rhs.id && lhs.lifecycle == rhs.lifecycle && lhs.pushToken == rhs.pushToken && lhs.lastAlert == rhs.lastAlert
            && lhs.tokenDueAt == rhs.tokenDueAt && lhs.isShown == rhs.isShown
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}

/// An update token on its way out: APNs refuses it from `at` on.
struct RetiringToken: Sendable, Hashable, Codable {
    var token: String
    var at: Date
}

/// A line of the device's log, as `liveactivitiesd` would write it.
public struct DeviceLogEntry: Sendable, Hashable, Codable {
    public var at: Date
    public var bundleID: String?
    public var activityID: String?
    public var message: String
}

/// Why `Activity.request` failed (`ActivityAuthorizationError`).
public struct ActivityAuthorizationError: Error, Hashable, CustomStringConvertible {
    public let code: String
    public let message: String
    private init(_ code: String, _ message: String) {
        self.code = code
        self.message = message
    }
    public var description: String { "\(code): \(message)" }

    public static func denied(_ why: String) -> Self { .init("denied", why) }
    public static func attributesTooLarge(_ bytes: Int, limit: Int) -> Self {
        .init("attributesTooLarge", "attributes and content state take \(bytes) bytes; the limit is \(limit)")
    }
    public static func targetMaximumExceeded(_ limit: Int) -> Self {
        .init("targetMaximumExceeded", "the app already has \(limit) ongoing activities")
    }
    public static func globalMaximumExceeded(_ limit: Int) -> Self {
        .init("globalMaximumExceeded", "the device already has \(limit) ongoing activities")
    }
    public static let visibility = Self("visibility", "activities can only be requested while the app is in the foreground")
    public static func unsupportedTarget(_ type: String) -> Self {
        .init("unsupportedTarget", "the widget extension does not know the attributes type \(type)")
    }
    /// Not an ActivityKit error: the JSON given for a typed value does not decode into its type.
    public static func doesNotDecode(_ failure: DecodingFailure) -> Self { .init("doesNotDecode", failure.description) }
    public static let missingAlert = Self("missingAlertConfiguration", "a scheduled activity needs an alert configuration")
    /// What this device's iOS does not offer yet.
    public static func unsupported(_ feature: ActivityKitFeature, on version: SystemVersion) -> Self {
        .init("unsupported", "\(feature.name) need iOS \(feature.introduced); this device runs iOS \(version)")
    }
}
