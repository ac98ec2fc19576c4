import Foundation
import LiveActivityKit

// What a listing asks for: filters, pages and their cursors.

/// Which deliveries to list, newest first.
package struct DeliveryQuery: Sendable, Hashable {
    /// Only the app's (nil: every app's).
    package var bundleID: String?
    package var key: String?
    package var status: DeliveryStatus?
    /// Only those APNs answered with this reason (`BadDeviceToken`), or that the outbox gave it.
    package var reason: String?
    /// Only deliveries with a smaller id (the page before).
    package var before: Int64?
    package var limit: Int
    /// With each push's bytes (one read per payload; a page of single-key updates has one each).
    /// No listing shows them: without, a record's payload is empty.
    package var includePayloads: Bool

    package init(
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
package struct ActivityQuery: Sendable, Hashable {
    /// Only the app's (nil: every app's).
    package var bundleID: String?
    package var state: ActivityKeyState?
    package var attributesType: String?
    /// Keys that contain this text, ignoring ASCII case.
    package var keyContains: String?
    /// Only activities after this one in the order (the next page).
    package var after: ActivityCursor?
    package var limit: Int

    package init(
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
package struct ActivityCursor: Sendable, Hashable {
    package var startedAt: Date
    package var bundleID: String
    package var key: String

    package init(startedAt: Date, bundleID: String, key: String) {
        self.startedAt = startedAt
        self.bundleID = bundleID
        self.key = key
    }

    package init(after activity: ActivityRecord) {
        self.init(startedAt: activity.startedAt, bundleID: activity.bundleID, key: activity.key)
    }
}
