import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// Starting, updating and ending keys.
extension RelayService {
    /// Starts the app's `key` on the audience's devices through their push-to-start tokens, or schedules it.
    package func start(
        app bundleID: String, key: String, _ request: StartRequest, idempotency: IdempotencyClaim? = nil
    ) async throws -> AcceptedRequest {
        try await start(app: try await app(bundleID), key: key, request, context: WriteContext(idempotency: idempotency))
    }

    func start(app: AppRecord, key: String, _ request: StartRequest, context: WriteContext) async throws -> AcceptedRequest {
        try Self.checkKey(key)
        try StartPlanner.checkKey(key, in: request)
        // Checked against every version's contract before anything is written or created, and
        // against those of the audience's devices when it runs.
        let contracts = try await currentContracts(app: app.bundleID).contracts(for: request.attributesType)
        _ = try contracts.check(audience: nil, versions: request.versions) { contract throws(RelayError) in
            try StartPlanner.check(request, against: contract)
        }
        try DeviceForesight.checkStart(request, startsAt: max(now(), request.at ?? .distantPast))
        if let at = request.at, at > now() {
            return try await schedule(app: app.bundleID, key: key, .start(request), at: at, context: context)
        }
        var channelIDs: [PushEnvironment: String] = [:]
        switch request.channel {
        case nil:
            break
        case .existing(let id):
            guard let channel = try await store.channel(id: id), channel.deletedAt == nil, channel.bundleID == app.bundleID else {
                throw RelayError.notFound("channel.id", "no live channel \(id) of \(app.bundleID) made by this server")
            }
            channelIDs[channel.environment] = id
        case .create(let policy):
            // A channel lives in one environment: one in each the audience spans (in the first
            // served when it has no device yet).
            var needed = try await store.audienceEnvironments(
                app: app.bundleID, attributesType: request.attributesType, audience: request.audience
            ).intersection(environments)
            if needed.isEmpty, let first = PushEnvironment.allCases.first(where: environments.contains) { needed = [first] }
            for environment in PushEnvironment.allCases where needed.contains(environment) {
                channelIDs[environment] = try await createChannel(for: app, key: key, in: environment, storagePolicy: policy)
            }
        }
        let acceptedAt = now()
        let channels = channelIDs
        let payloads = try StartPlanner.payloads(request, channelIDs: channels, at: acceptedAt)
        let planner = StartPlanner(environments: environments, governor: governor)
        let requestID = GeneratedUUID.string()
        var context = context
        context.handOver = handOver.offer(at: acceptedAt, policy: configuration.dispatch)
        context.traceParent = RelayTracing.currentTraceParent()
        do {
            let accepted = try await RelayTracing.storeTransaction("accept start", app: app.bundleID, key: key, requestID: requestID) {
                try await store.acceptStart(
                    app: app.bundleID, key: key, attributesType: request.attributesType, audience: request.audience, context: context
                ) { [bundleID = app.bundleID] tokens in
                    try planner.plan(
                        app: bundleID, key: key, request, payloads: payloads, channelIDs: channels, tokens: tokens, contracts: contracts,
                        at: acceptedAt, requestID: requestID)
                }
            }
            dispatch(accepted.claimed, accepted.outcome, at: acceptedAt)
            return .accepted(accepted.outcome)
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Updates or ends the app's `key`: one push per live update token, or one broadcast per
    /// channel when the key is bound to channels; or schedules it.
    package func change(
        app bundleID: String, key: String, _ request: ChangeRequest, idempotency: IdempotencyClaim? = nil
    ) async throws -> AcceptedRequest {
        try await change(app: try await app(bundleID), key: key, request, context: WriteContext(idempotency: idempotency))
    }

    func change(app: AppRecord, key: String, _ request: ChangeRequest, context: WriteContext) async throws -> AcceptedRequest {
        try Self.checkKey(key)
        let contracts = try await currentContracts(app: app.bundleID)
        if let at = request.at, at > now() {
            // A key that exists already is checked against its type's contracts now, not only when due.
            if let content = request.contentState, let activity = try await store.activity(app: app.bundleID, key: key) {
                _ = try contracts.contracts(for: activity.attributesType).check(audience: nil, versions: request.versions) {
                    contract throws(RelayError) in try ContractCheck.contentState(content, contract)
                }
            }
            return try await schedule(app: app.bundleID, key: key, .change(request), at: at, context: context)
        }
        let acceptedAt = now()
        let planner = ChangePlanner(
            governor: governor, channelStorageWindow: configuration.channelStorageWindow, contracts: contracts)
        let requestID = GeneratedUUID.string()
        var context = context
        context.handOver = handOver.offer(at: acceptedAt, policy: configuration.dispatch)
        context.traceParent = RelayTracing.currentTraceParent()
        do {
            let accepted = try await RelayTracing.storeTransaction("accept \(request.event)", app: app.bundleID, key: key, requestID: requestID) {
                try await store.acceptChange(
                    app: app.bundleID, key: key, budget: planner.budget(for: request, at: acceptedAt), context: context
                ) { snapshot in
                    try planner.plan(key: key, request, snapshot: snapshot, at: acceptedAt, requestID: requestID)
                }
            }
            dispatch(accepted.claimed, accepted.outcome, at: acceptedAt)
            metrics.noteBudget(accepted.outcome.budgetUse, app: app.bundleID, key: key, at: acceptedAt)
            return .accepted(accepted.outcome)
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Gives the dispatcher the pushes the request claimed, or wakes it to claim what was queued.
    func dispatch(_ claimed: [DeliveryRecord], _ accepted: Acceptance, at acceptedAt: Date) {
        dispatch(claimed, action: accepted.action.rawValue, requestID: accepted.requestID, pushes: accepted.deliveries, at: acceptedAt)
    }

    /// The same for any request's pushes: counted under its action (`start`, …, `reload`).
    func dispatch(_ claimed: [DeliveryRecord], action: String, requestID: String, pushes: Int, at acceptedAt: Date) {
        metrics.count(Metric.requestsAcceptedTotal, ["action": action])
        metrics.noteAccepted(requestID: requestID, pushes: pushes, at: acceptedAt)
        noteChange()
        if claimed.isEmpty {
            outboxSignal.queued()
        } else {
            handOver.give(claimed)
        }
    }
}
