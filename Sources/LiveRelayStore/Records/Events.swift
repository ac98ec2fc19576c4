import Foundation
import LiveActivityKit

/// What happened to an app's activities that its backend needs to hear: written in the same
/// transaction as the change that causes it, and read in order (`GET /v1/events`). Per key, and
/// per device only for what needs attention: a fan-out's pushes that succeeded are the
/// deliveries' history, not events.
package enum EventType: String, Sendable, Hashable, CaseIterable, Codable {
    /// A device reported the activity: its first update token, or that it listens to the key's channel.
    case activityStarted = "activity.started"
    /// APNs accepted a push-to-start, and the device did not report the activity within the
    /// confirmation window: it may have dropped the start without a word. Once per key and device.
    case activityStartUnconfirmed = "activity.start_unconfirmed"
    /// The activity ended: on one device (with `deviceID`, as the device reported it), on every
    /// device that had it (`allDevices`), or the key itself (by the backend, or at 8 hours).
    case activityEnded = "activity.ended"
    /// A channel of the key was deleted at APNs (its key ended, and the storage window passed).
    case channelDeleted = "channel.deleted"
    /// APNs refused a token for good (`Unregistered`, `BadDeviceToken`, `ExpiredToken`).
    case tokenInvalidated = "token.invalidated"
    /// A push failed for good: it will not be sent again.
    case pushFailed = "push.failed"
    /// A widget or control reload failed for good (`target` says which): it will not be sent again.
    case reloadFailed = "widget.reload_failed"
    /// `auto` sent a change at priority 5 to targets of the key whose priority-10 budget is
    /// spent: the device may delay those updates. Once an hour per key at most.
    case budgetExhausted = "budget.exhausted"
    /// Sent on request to one webhook endpoint, to try it (`POST /v1/webhooks/{id}/test`).
    case webhookTest = "webhook.test"
}

/// An event as it is written, before the store numbers it.
package struct NewEvent: Sendable, Hashable {
    package var type: EventType
    package var bundleID: String
    package var environment: PushEnvironment?
    package var key: String
    package var deviceID: String?
    /// What the event says beyond who and where: a JSON object.
    package var data: JSONValue

    package init(
        _ type: EventType, bundleID: String, key: String, environment: PushEnvironment? = nil, deviceID: String? = nil,
        data: JSONValue.Members = []
    ) {
        self.type = type
        self.bundleID = bundleID
        self.environment = environment
        self.key = key
        self.deviceID = deviceID
        self.data = .object(data)
    }
}

/// An event as it is read: numbered in the order it is to be read in.
package struct EventRecord: Sendable, Hashable {
    /// Its place in the log: what `after` names to read on from it.
    package var sequence: Int64
    /// Unique and stable: what a receiver de-duplicates by (`evt_…`).
    package var id: String
    package var type: EventType
    package var bundleID: String
    package var environment: PushEnvironment?
    package var key: String
    package var deviceID: String?
    package var occurredAt: Date
    package var data: JSONValue

    package init(
        sequence: Int64, id: String, type: EventType, bundleID: String, environment: PushEnvironment?, key: String, deviceID: String?,
        occurredAt: Date, data: JSONValue
    ) {
        self.sequence = sequence
        self.id = id
        self.type = type
        self.bundleID = bundleID
        self.environment = environment
        self.key = key
        self.deviceID = deviceID
        self.occurredAt = occurredAt
        self.data = data
    }
}

/// A page of the log, in order.
package struct EventQuery: Sendable, Hashable {
    /// The app (nil: every app).
    package var bundleID: String?
    /// Events after this place in the log.
    package var after: Int64
    package var types: Set<EventType>?
    package var key: String?
    package var limit: Int
    /// The newest first (the dashboard's page), not the order to read on in.
    package var newestFirst: Bool

    package init(
        bundleID: String? = nil, after: Int64 = 0, types: Set<EventType>? = nil, key: String? = nil, limit: Int = 100, newestFirst: Bool = false
    ) {
        self.newestFirst = newestFirst
        self.bundleID = bundleID
        self.after = after
        self.types = types
        self.key = key
        self.limit = limit
    }
}

extension NewEvent {
    /// A new event's id: from a random start, so that no two instances make the same one.
    static func newID() -> String {
        "evt_" + GeneratedUUID.string(dashes: false)
    }
}
