import Foundation
import LiveRelayStore
import Synchronization

/// The running dispatcher's door for the pushes an accepting request claimed itself (see
/// `HandOver`): a small request is sent at once, without a transaction to claim it.
final class DispatchHandOver: Sendable {
    struct Door: Sendable {
        /// Whether the dispatcher can take more now; when it is behind, requests queue their
        /// pushes instead, where newer ones can still supersede them.
        var hasRoom: @Sendable () -> Bool
        var take: @Sendable ([DeliveryRecord]) -> Void
    }

    private let door = Mutex<Door?>(nil)

    func open(_ door: Door) {
        self.door.withLock { $0 = door }
    }

    func close() {
        door.withLock { $0 = nil }
    }

    /// The hand-over for a request accepted at `now`, if a dispatcher runs with room.
    func offer(at now: Date, policy: DispatchPolicy) -> HandOver? {
        guard policy.handOverLimit > 0, let door = door.withLock({ $0 }), door.hasRoom() else { return nil }
        return HandOver(leaseUntil: now + policy.lease, limit: policy.handOverLimit)
    }

    /// Gives claimed pushes to the dispatcher. One that stopped meanwhile leaves them to their
    /// lease: they are due again when it runs out, or at the next start.
    func give(_ claimed: [DeliveryRecord]) {
        door.withLock { $0 }?.take(claimed)
    }
}
