import Foundation
import LiveActivityKit

/// What the server can tell a device would do with a request, before anything is queued: what
/// people saw iPhones do since iOS 18 with pushes APNs answered `200` for (spec §14.2), and
/// ActivityKit's own limits (§5). What would never show is refused; what would surprise the sender
/// is accepted with a warning.
enum DeviceForesight {
    /// A start that would never show: refused. One whose stale date is not after the moment it
    /// starts (`startsAt`: now, or its schedule's time) is created stale and never put on the Lock
    /// Screen (§14.2.1); one whose attributes and content state exceed 4 KB is refused by
    /// ActivityKit (`attributesTooLarge`).
    static func checkStart(_ request: StartRequest, startsAt: Date) throws(RelayError) {
        if let stale = request.staleDate, let why = LiveActivityPayload.staleOnArrival(staleDate: stale, startsAt: startsAt) {
            throw RelayError(.unprocessable, .staleOnArrival, message: why, field: "staleDate")
        }
        let size = ActivityData.size(request.attributes, request.contentState)
        guard size <= ActivityData.limit else {
            throw RelayError(
                .tooLarge, .activityDataTooLarge,
                message:
                    "the attributes and content state are \(size) bytes together, over ActivityKit's \(ActivityData.limit): the iPhone would refuse the start (attributesTooLarge)",
                field: "attributes")
        }
    }

    /// An update or end, checked against the content it sends (`contentState`: the request's, or
    /// the key's last): refused when that is over ActivityKit's limit (a broadcast may carry 5 KB,
    /// the device takes 4); otherwise what would surprise: a stale date already passed shows the
    /// activity stale at once, and an alert alerts the person whatever the priority (§14.2.4).
    static func warnings(for request: ChangeRequest, contentState: JSONValue, at now: Date) throws(RelayError) -> [String] {
        let size = ActivityData.size(contentState)
        guard size <= ActivityData.limit else {
            throw RelayError(
                .tooLarge, .activityDataTooLarge,
                message: "is \(size) bytes, over ActivityKit's \(ActivityData.limit): the iPhone would drop the \(request.event.rawValue)",
                field: "contentState")
        }
        var warnings: [String] = []
        if let stale = request.staleDate, stale <= now {
            warnings.append("staleDate \(stale.iso8601) has passed: the iPhone shows the activity as stale at once")
        }
        if request.alert != nil, case .fixed(let priority) = request.priority, priority != .immediate {
            warnings.append(
                "the alert alerts the person although the priority is \(priority.rawValue): iPhones alert for an alert whatever the priority")
        }
        return warnings
    }
}
