import Foundation
import LiveActivityKit

/// Sending a failed push again, by hand (the dashboard, `POST /v1/deliveries/{id}/retry`): the
/// failure stays in the outbox's history, and a new push with the same payload, request and
/// target is queued beside it, due at once.
package enum DeliveryRetry: Sendable, Hashable {
    /// Why a push cannot be sent again.
    package enum Refusal: Sendable, Hashable, CustomStringConvertible {
        /// Only a dead letter is retried: anything else is still on its way, or got there.
        case notFailed(DeliveryStatus)
        /// The token (or channel) is no longer one to send to.
        case targetGone(String)
        /// A later push to the same target is queued, on its way or sent: this one's content is old.
        case newerPush(id: Int64)

        package var description: String {
            switch self {
            case .notFailed(let status): "only a failed push is retried; this one is \(status.rawValue)"
            case .targetGone(let why): "its target is gone: \(why)"
            case .newerPush(let id): "push \(id), sent to the same target after it, is newer"
            }
        }
    }

    /// What became of the target since the push failed.
    package enum TargetState: Sendable, Hashable {
        case live
        case gone(String)
    }

    /// The answer a store gives.
    package enum Outcome: Sendable, Hashable {
        case retried(DeliveryRecord)
        case refused(Refusal)
        case notFound
    }

    /// Whether `later` makes `push`'s content old: a later push of the same key to the same device
    /// (whatever its token, which may have rotated) or channel, queued, on its way or sent.
    /// (`StoreStatements.newerPush` asks the same of the store.)
    package static func isNewer(_ later: DeliveryRecord, than push: DeliveryRecord) -> Bool {
        let (kind, device, _, channel) = later.target.columns
        let (pushKind, pushDevice, _, pushChannel) = push.target.columns
        return later.id > push.id && later.bundleID == push.bundleID && later.key == push.key
            && (kind, device, channel) == (pushKind, pushDevice, pushChannel)
            && [.queued, .sending, .sent].contains(later.status)
    }

    /// Whether the push may be sent again, from what the store read in one transaction.
    package static func refusal(status: DeliveryStatus, target: TargetState, newerPush: Int64?) -> Refusal? {
        guard status == .failed else { return .notFailed(status) }
        if case .gone(let why) = target { return .targetGone(why) }
        if let newerPush { return .newerPush(id: newerPush) }
        return nil
    }

    /// The target's state from the row its kind reads (`StoreStatements.retryTarget`): nil when
    /// there is no row (a push-to-start token replaced since, a channel unknown).
    static func targetState(_ target: DeliveryTarget, row: (any StoreRow)?) -> TargetState {
        guard let row else {
            switch target {
            case .pushToStartToken: return .gone("the device has registered another push-to-start token since")
            case .activityToken: return .gone("the device no longer has this activity token")
            case .channel(let id): return .gone("no channel \(id)")
            case .surface(let type, _, _): return .gone("the device no longer has this \(type == .widgets ? "widget" : "control") token")
            }
        }
        switch target {
        case .activityToken:
            let state = row.string(0)
            return state == ActivityTokenState.live.rawValue ? .live : .gone("the token is \(state)\(row.text(1).map { " (\($0))" } ?? "")")
        case .pushToStartToken:
            return row.text(0).map { .gone("the push-to-start token is dead (\($0))") } ?? .live
        case .channel:
            return row.date(0) == nil ? .live : .gone("the channel was deleted")
        case .surface:
            return .live
        }
    }
}
