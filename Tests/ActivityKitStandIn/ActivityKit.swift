// A stand-in of the ActivityKit declarations LiveRelayKit's adapter and the README's snippet use,
// in the shapes of the iOS 26 SDK as Apple documents them
// (https://developer.apple.com/documentation/activitykit): `Activity` a generic class that is not
// `Sendable`, `PushType` a structure, each sequence a structure of its own, `pending` an
// iOS 26 case. It only declares: `.ci/typecheck-adapter` compiles LiveRelayKit against it on
// Linux, as Xcode compiles it against ActivityKit, so that a shape the adapter gets wrong fails
// CI rather than an app's build. Nothing here runs.
import Foundation

public protocol ActivityAttributes: Decodable, Encodable {
    associatedtype ContentState: Decodable, Encodable, Hashable
}

public enum ActivityState: Equatable, Hashable, Sendable {
    case active
    case ended
    case dismissed
    @available(iOS 16.2, *) case stale
    @available(iOS 26.0, *) case pending
}

public struct PushType: Equatable, Sendable {
    private init() {}
    public static var token: PushType { fatalError("a stand-in") }
    @available(iOS 18.0, *) public static func channel(_ channelId: String) -> PushType { fatalError("a stand-in") }
}

public struct ActivityContent<State>: Equatable, Hashable where State: Decodable, State: Encodable, State: Hashable {
    public let state: State
    public let staleDate: Date?
    public let relevanceScore: Double
    public init(state: State, staleDate: Date?, relevanceScore: Double = 0) { fatalError("a stand-in") }
}

public struct ActivityUIDismissalPolicy: Equatable, Hashable, Sendable {
    private init() {}
    public static let `default` = ActivityUIDismissalPolicy()
    public static let immediate = ActivityUIDismissalPolicy()
    public static func after(_ date: Date) -> ActivityUIDismissalPolicy { fatalError("a stand-in") }
}

/// A sequence of ActivityKit's: a structure whose elements arrive one by one.
public struct StandInIterator<Element>: AsyncIteratorProtocol {
    public mutating func next() async -> Element? { fatalError("a stand-in") }
}

public class ActivityAuthorizationInfo {
    public init() {}
    public var areActivitiesEnabled: Bool { fatalError("a stand-in") }
    public var frequentPushesEnabled: Bool { fatalError("a stand-in") }
    public var activityEnablementUpdates: ActivityEnablementUpdates { fatalError("a stand-in") }
    public var frequentPushEnablementUpdates: FrequentPushEnablementUpdates { fatalError("a stand-in") }

    public struct ActivityEnablementUpdates: AsyncSequence {
        public typealias Element = Bool
        public func makeAsyncIterator() -> StandInIterator<Bool> { fatalError("a stand-in") }
    }

    public struct FrequentPushEnablementUpdates: AsyncSequence {
        public typealias Element = Bool
        public func makeAsyncIterator() -> StandInIterator<Bool> { fatalError("a stand-in") }
    }
}

public class Activity<Attributes>: Identifiable where Attributes: ActivityAttributes {
    public var id: String { fatalError("a stand-in") }
    public var attributes: Attributes { fatalError("a stand-in") }
    public var activityState: ActivityState { fatalError("a stand-in") }
    public var pushToken: Data? { fatalError("a stand-in") }
    public var pushTokenUpdates: PushTokenUpdates { fatalError("a stand-in") }
    public var activityStateUpdates: ActivityStateUpdates { fatalError("a stand-in") }
    @available(iOS 16.2, *)
    public func end(_ content: ActivityContent<Attributes.ContentState>?, dismissalPolicy: ActivityUIDismissalPolicy = .default) async {
        fatalError("a stand-in")
    }
    public static var activities: [Activity<Attributes>] { fatalError("a stand-in") }
    public static var activityUpdates: ActivityUpdates { fatalError("a stand-in") }
    @available(iOS 17.2, *) public static var pushToStartToken: Data? { fatalError("a stand-in") }
    @available(iOS 17.2, *) public static var pushToStartTokenUpdates: PushTokenUpdates { fatalError("a stand-in") }

    public struct PushTokenUpdates: AsyncSequence {
        public typealias Element = Data
        public func makeAsyncIterator() -> StandInIterator<Data> { fatalError("a stand-in") }
    }

    public struct ActivityStateUpdates: AsyncSequence {
        public typealias Element = ActivityState
        public func makeAsyncIterator() -> StandInIterator<ActivityState> { fatalError("a stand-in") }
    }

    public struct ActivityUpdates: AsyncSequence {
        public typealias Element = Activity<Attributes>
        public func makeAsyncIterator() -> StandInIterator<Activity<Attributes>> { fatalError("a stand-in") }
    }
}
