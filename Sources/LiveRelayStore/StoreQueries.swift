import Foundation
import LiveActivityKit

// What a listing asks for: filters, pages and their cursors.

/// Which deliveries to list, newest first.
public struct DeliveryQuery: Sendable, Hashable {
    /// Only the app's (nil: every app's).
    public var bundleID: String?
    public var key: String?
    public var status: DeliveryStatus?
    /// Only those APNs answered with this reason (`BadDeviceToken`), or that the outbox gave it.
    public var reason: String?
    /// Only deliveries with a smaller id (the page before).
    public var before: Int64?
    public var limit: Int
    /// With each push's bytes (one read per payload; a page of single-key updates has one each).
    /// No listing shows them: without, a record's payload is empty.
    public var includePayloads: Bool

    public init(
        bundleID: String? = nil, key: String? = nil, status: DeliveryStatus? = nil, reason: String? = nil, before: Int64? = nil, limit: Int = 100,
        includePayloads: Bool = true
    ) {
        self.bundleID = bundleID
        self.key = key
        self.status = status
        self.reason = reason
        self.before = before
        self.limit = limit
        self.includePayloads = includePayloads
    }
}

/// A page of activities, newest first.
public struct ActivityQuery: Sendable, Hashable {
    /// Only the app's (nil: every app's).
    public var bundleID: String?
    public var state: ActivityKeyState?
    public var attributesType: String?
    /// Keys that contain this text, ignoring ASCII case.
    public var keyContains: String?
    /// Only activities after this one in the order (the next page).
    public var after: ActivityCursor?
    public var limit: Int

    public init(
        bundleID: String? = nil, state: ActivityKeyState? = nil, attributesType: String? = nil, keyContains: String? = nil,
        after: ActivityCursor? = nil, limit: Int = 50
    ) {
        self.bundleID = bundleID
        self.state = state
        self.attributesType = attributesType
        self.keyContains = keyContains
        self.after = after
        self.limit = limit
    }
}

/// Where a page of activities ends: newest first, then by app and key, so that the order is total.
public struct ActivityCursor: Sendable, Hashable {
    public var startedAt: Date
    public var bundleID: String
    public var key: String

    public init(startedAt: Date, bundleID: String, key: String) {
        self.startedAt = startedAt
        self.bundleID = bundleID
        self.key = key
    }

    public init(after activity: ActivityRecord) {
        self.init(startedAt: activity.startedAt, bundleID: activity.bundleID, key: activity.key)
    }
}
