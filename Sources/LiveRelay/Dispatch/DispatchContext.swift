import APNs
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging

/// What the dispatcher works with, built once by the service (`RelayService.dispatchContext`): the
/// outbox, its policy and clock, where it reports, how it is woken and handed pushes, and how a
/// push finds the APNs client that sends it.
package struct DispatchContext: Sendable {
    let outbox: any OutboxStore & SessionAndLeaseStore
    let policy: DispatchPolicy
    let now: @Sendable () -> Date
    let logger: Logger
    let metrics: RelayMetrics
    /// Wakes the dispatcher when pushes are queued or due.
    let signal: OutboxSignal
    /// Where accepting writes hand over the pushes they claimed.
    let handOver: DispatchHandOver
    /// Tells watchers (the dashboard's live pages) that what the store holds changed.
    let noteChange: @Sendable () -> Void
    /// The client that sends a push and its topic: its app's, in its environment. Throws a
    /// `RelayError` when the push can never go (the app is gone, the environment not served).
    let route: @Sendable (DeliveryRecord) async throws -> (client: APNsClient, topic: BundleID)
}

extension RelayService {
    /// What a dispatcher of this service works with.
    package var dispatchContext: DispatchContext {
        DispatchContext(
            outbox: store, policy: configuration.dispatch, now: now, logger: logger, metrics: metrics, signal: outboxSignal, handOver: handOver,
            noteChange: { self.noteChange() },
            route: { delivery in
                let app = try await self.app(delivery.bundleID)
                return (try self.apnsClient(for: app, in: delivery.environment), try BundleID(app.bundleID))
            })
    }
}
