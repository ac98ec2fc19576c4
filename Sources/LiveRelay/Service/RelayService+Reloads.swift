import APNs
import Foundation
import LiveActivityKit
import LiveRelayStore

/// Reloading an app's widgets and controls (iOS 26, iOS 18): a push to each token the audience
/// holds, through the outbox as every push goes.
extension RelayService {
    /// Queues a reload of the app's widgets or controls of `request.kinds` (or every one) on the
    /// devices of its audience, past what each device's day allows held back.
    package func reload(
        app bundleID: String, _ type: ReloadPushType, _ request: ReloadRequest, idempotency: IdempotencyClaim? = nil
    ) async throws -> AcceptedRequest {
        try await reload(app: try await app(bundleID), type, request, context: WriteContext(idempotency: idempotency))
    }

    /// The same, for a schedule's run too (`context.scheduleID`); one with a later `at` is kept
    /// as a schedule.
    func reload(app: AppRecord, _ type: ReloadPushType, _ request: ReloadRequest, context: WriteContext) async throws -> AcceptedRequest {
        if let kinds = request.kinds {
            guard !kinds.isEmpty, kinds.count <= SurfaceRegistration.limit else {
                throw RelayError.invalid("kinds", "must list 1 to \(SurfaceRegistration.limit) kinds, or be left out for every one")
            }
            for (index, kind) in kinds.enumerated() { try Self.checkName(kind, field: "kinds[\(index)]", longest: 200) }
        }
        if let at = request.at, at > now() {
            return try await schedule(app: app.bundleID, key: "", .reload(type, request), at: at, context: context)
        }
        let acceptedAt = now()
        let requestID = GeneratedUUID.string()
        var context = context
        context.handOver = handOver.offer(at: acceptedAt, policy: configuration.dispatch)
        context.traceParent = RelayTracing.currentTraceParent()
        do {
            let accepted = try await RelayTracing.storeTransaction("accept \(type.rawValue) reload", app: app.bundleID, key: "", requestID: requestID)
            {
                try await store.acceptReload(
                    app: app.bundleID, type: type, audience: request.audience, since: acceptedAt - ReloadPlanner.window, context: context
                ) { [bundleID = app.bundleID] snapshot in
                    ReloadPlanner().plan(app: bundleID, type, request, snapshot: snapshot, at: acceptedAt, requestID: requestID)
                }
            }
            dispatch(accepted.claimed, action: "reload", requestID: requestID, pushes: accepted.outcome.deliveries, at: acceptedAt)
            return .reloaded(accepted.outcome)
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }
}
