import Foundation
import LiveActivityKit

/// How an iPhone is held and what it is connected to: the surfaces beyond its own screen (spec §14.1).
public struct Surroundings: Sendable, Hashable, Codable {
    /// Held in landscape: the Dynamic Island shows activities only from iOS 27, at limited width.
    public var isLandscape = false
    /// Connected to a car: the CarPlay Dashboard shows activities from iOS 26.
    public var isInCarPlay = false
    /// Paired with a Mac on macOS 26: its menu bar shows the iPhone's activities from iOS 18.
    public var hasPairedMac = false

    public init(isLandscape: Bool = false, isInCarPlay: Bool = false, hasPairedMac: Bool = false) {
        (self.isLandscape, self.isInCarPlay, self.hasPairedMac) = (isLandscape, isInCarPlay, hasPairedMac)
    }
}

/// What a device shows of its Live Activities at one moment, as data (spec §8.5, §8.6, §14.1): the
/// Lock Screen list, the Dynamic Island, the banner of devices without one, StandBy, the Watch,
/// CarPlay and a paired Mac's menu bar.
public struct DevicePresentation: Sendable, Hashable {
    /// Visible activities, most relevant first (relevance score, then the earliest start).
    public var lockScreen: [PresentedActivity]
    /// `nil` on devices without a Dynamic Island.
    public var dynamicIsland: DynamicIsland?
    /// An alerting update on a device without a Dynamic Island lights the Lock Screen with a banner.
    public var banner: PresentedAlert?
    /// `nil` without a paired Watch.
    public var watch: Watch?
    /// Whether the person sees the Lock Screen (locked) or the Dynamic Island (unlocked) now.
    public var isLocked: Bool
    /// Held in landscape (iOS 27: compact and minimal at limited width, `isDynamicIslandLimitedInWidth`).
    public var isLandscape: Bool = false
    public var isDynamicIslandLimitedInWidth: Bool = false
    /// `nil` on an iPad: the most relevant activity's Lock Screen view at twice its size, and
    /// another app's minimal one above it.
    public var standBy: StandBy?
    /// `nil` unless in a car (iOS 26+): the most relevant ongoing activity, in the `small` family
    /// when the widget has one, otherwise its Lock Screen view; its buttons do nothing there.
    public var carPlay: CarPlay?
    /// `nil` without a paired Mac (iPhone on iOS 18+): the activities in the menu bar, the most
    /// relevant one open in its Lock Screen view.
    public var macMenuBar: MacMenuBar?

    public struct StandBy: Sendable, Hashable {
        public var main: PresentedActivity?
        public var other: PresentedActivity?
        /// StandBy draws the Lock Screen view at 200% (spec §14.1).
        public var scale: Double { 2 }
    }

    public struct CarPlay: Sendable, Hashable {
        public var activity: PresentedActivity?
    }

    public struct MacMenuBar: Sendable, Hashable {
        public var activities: [PresentedActivity]
        public var opened: PresentedActivity? { activities.first }
    }

    public enum DynamicIsland: Sendable, Hashable {
        case empty
        /// One app has activities: its most relevant one, leading and trailing around the camera.
        case compact(PresentedActivity)
        /// Several apps have activities: two apps' most relevant ones, one attached to the island
        /// and one detached beside it. The system chooses; here the more relevant is attached.
        case minimal(attached: PresentedActivity, detached: PresentedActivity)
        /// Briefly, for an alerting update: the expanded presentation of that activity.
        case expanded(PresentedActivity, alert: ShownAlert)
    }

    /// The Smart Stack shows the most relevant activity; alerts show their title and body.
    public struct Watch: Sendable, Hashable {
        public var smartStack: PresentedActivity?
        public var alert: PresentedAlert?
    }
}

/// One activity as presented.
public struct PresentedActivity: Sendable, Hashable {
    public var activityID: String
    public var bundleID: String
    public var attributesType: String
    public var attributes: JSONValue
    public var state: ActivityState
    /// `context.isStale` in the widget.
    public var isStale: Bool
    public var relevanceScore: Double
    public var content: JSONValue
    public var startDate: Date

    public init(
        activityID: String, bundleID: String, attributesType: String, attributes: JSONValue, state: ActivityState, isStale: Bool,
        relevanceScore: Double, content: JSONValue, startDate: Date
    ) {
        (self.activityID, self.bundleID, self.attributesType, self.attributes, self.state) = (activityID, bundleID, attributesType, attributes, state)
        (self.isStale, self.relevanceScore, self.content, self.startDate) = (isStale, relevanceScore, content, startDate)
    }
}

/// An alert being shown, and the activity it belongs to.
public struct PresentedAlert: Sendable, Hashable {
    public var activityID: String
    public var alert: ShownAlert
}

extension SimulatedDevice {
    /// The presentations at `now` (after `advance(to: now)`; this reads, it does not apply time).
    public func presentation(at now: Date) -> DevicePresentation {
        let byRelevance =
            activities
            .filter { $0.isShown && ($0.state == .active || $0.state == .stale || $0.state == .ended) }
            .sorted { lhs, rhs in
                lhs.content.relevanceScore != rhs.content.relevanceScore
                    ? lhs.content.relevanceScore > rhs.content.relevanceScore
                    : (lhs.lifecycle.startDate, lhs.id) < (rhs.lifecycle.startDate, rhs.id)
            }
        let lockScreen = byRelevance.map { PresentedActivity($0, at: now) }
        // The alert on screen: the most recent one still within its presentation time.
        let alerting =
            byRelevance
            .compactMap { activity in activity.lastAlert.map { (activity, $0) } }
            .filter { _, alert in alert.at <= now && now < alert.at + settings.alertPresentationDuration }
            .max { $0.1.at < $1.1.at }
        let shownAlert = alerting.map { PresentedAlert(activityID: $0.0.id, alert: $0.1) }

        var island: DevicePresentation.DynamicIsland?
        let landscape = surroundings.isLandscape && model != .iPad
        if model.hasDynamicIsland {
            if landscape, !supports(.landscapeDynamicIsland) {
                // Before iOS 27 a landscape Dynamic Island shows no activity.
                island = .empty
            } else if let (activity, alert) = alerting {
                island = .expanded(PresentedActivity(activity, at: now), alert: alert)
            } else {
                // Ended activities leave the island at once; each app shows its most relevant one.
                var seenApps: Set<String> = []
                let perApp = byRelevance.filter { $0.lifecycle.isOngoing && seenApps.insert($0.bundleID).inserted }
                island =
                    switch perApp.count {
                    case 0: .empty
                    case 1: .compact(PresentedActivity(perApp[0], at: now))
                    default: .minimal(attached: PresentedActivity(perApp[0], at: now), detached: PresentedActivity(perApp[1], at: now))
                    }
            }
        }
        let ongoing = lockScreen.filter { $0.state != .ended }
        let standByMain = lockScreen.first
        let standBy =
            model == .iPad
            ? nil
            : DevicePresentation.StandBy(
                main: standByMain, other: standByMain.flatMap { main in ongoing.first { $0.bundleID != main.bundleID } })
        var presentation = DevicePresentation(
            lockScreen: lockScreen,
            dynamicIsland: island,
            banner: model.hasDynamicIsland ? nil : shownAlert,
            watch: hasPairedWatch ? .init(smartStack: ongoing.first ?? lockScreen.first, alert: shownAlert) : nil,
            isLocked: isLocked)
        presentation.isLandscape = landscape
        presentation.isDynamicIslandLimitedInWidth = landscape && model.hasDynamicIsland && supports(.landscapeDynamicIsland)
        presentation.standBy = standBy
        if surroundings.isInCarPlay, model != .iPad, supports(.carPlay) { presentation.carPlay = .init(activity: ongoing.first) }
        if surroundings.hasPairedMac, model != .iPad, supports(.macMenuBar) { presentation.macMenuBar = .init(activities: ongoing) }
        return presentation
    }
}

extension PresentedActivity {
    init(_ activity: SimulatedActivity, at now: Date) {
        self.init(
            activityID: activity.id, bundleID: activity.bundleID, attributesType: activity.attributesType, attributes: activity.attributes,
            state: activity.state,
            isStale: activity.content.staleDate.map { $0 <= now } == true, relevanceScore: activity.content.relevanceScore,
            content: activity.content.state,
            startDate: activity.lifecycle.startDate)
    }
}
