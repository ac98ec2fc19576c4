import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import Testing

/// Sending a failed push again: its rule alone, then each engine carrying it out.
@Suite struct DeliveryRetryTests {
    @Test func onlyAFailedPushToALiveTargetWithNothingNewerIsRetried() {
        #expect(DeliveryRetry.refusal(status: .failed, target: .live, newerPush: nil) == nil)
        for status in DeliveryStatus.allCases where status != .failed {
            #expect(DeliveryRetry.refusal(status: status, target: .live, newerPush: nil) == .notFailed(status))
        }
        #expect(DeliveryRetry.refusal(status: .failed, target: .gone("dead"), newerPush: nil) == .targetGone("dead"))
        #expect(DeliveryRetry.refusal(status: .failed, target: .live, newerPush: 9) == .newerPush(id: 9))
    }

    @Test func aLaterPushToTheSameDeviceIsNewerWhateverItsToken() {
        func push(_ id: Int64, _ target: DeliveryTarget, _ status: DeliveryStatus, key: String = "order-1") -> DeliveryRecord {
            DeliveryRecord(
                id: id, bundleID: testApp, key: key, event: .update, target: target, environment: .sandbox, payload: [], priority: .immediate,
                priorityReason: "requested", expiration: nil, timestamp: id, requestID: "r\(id)", status: status, attempts: 1,
                nextAttemptAt: t0, createdAt: t0)
        }
        let failed = push(1, .activityToken(deviceID: "iphone-1", token: "old"), .failed)
        #expect(DeliveryRetry.isNewer(push(2, .activityToken(deviceID: "iphone-1", token: "rotated"), .sent), than: failed))
        #expect(DeliveryRetry.isNewer(push(2, .activityToken(deviceID: "iphone-1", token: "old"), .queued), than: failed))
        #expect(!DeliveryRetry.isNewer(push(2, .activityToken(deviceID: "iphone-1", token: "old"), .failed), than: failed))
        #expect(!DeliveryRetry.isNewer(push(2, .activityToken(deviceID: "iphone-2", token: "other"), .sent), than: failed))
        #expect(!DeliveryRetry.isNewer(push(2, .activityToken(deviceID: "iphone-1", token: "old"), .sent, key: "order-2"), than: failed))
        #expect(!DeliveryRetry.isNewer(push(0, .activityToken(deviceID: "iphone-1", token: "old"), .sent), than: failed))
        #expect(!DeliveryRetry.isNewer(push(2, .pushToStartToken(deviceID: "iphone-1", token: "p2s"), .sent), than: failed))
    }

    /// A key with one device whose update (the second push) failed; returns the failed push.
    private func failedUpdate(_ store: any RelayStore, reason: String = "BadExpirationDate", tokenIsDead: Bool = false) async throws -> DeliveryRecord
    {
        try await store.savePushToStartToken(pushToStart("iphone-1"))
        try await store.start("order-1")
        try await store.registerActivity("order-1", on: ["iphone-1"])
        try await store.change("order-1", body: "on the way", at: t0 + 10)
        let claimed = try await store.claimDeliveries(dueBy: t0 + 10, limit: 10, leaseUntil: t0 + 70)
        let update = try #require(claimed.first { $0.event == .update })
        try await store.recordOutcomes([(update.id, .failed(status: 400, reason: reason, tokenIsDead: tokenIsDead))], at: t0 + 11)
        return update
    }

    @Test(arguments: StoreKind.allCases) func aRetryQueuesTheSamePushBesideTheFailedOneOnce(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let failed = try await failedUpdate(store)
            guard case .retried(let retry) = try await store.retryDelivery(id: failed.id, app: nil, at: t0 + 20) else {
                Issue.record("the failed update should be retried")
                return
            }
            #expect(retry.id > failed.id)
            #expect(retry.status == .queued && retry.attempts == 0 && retry.nextAttemptAt == t0 + 20)
            #expect(retry.payload == failed.payload && retry.target == failed.target && retry.requestID == failed.requestID)
            #expect(retry.priority == failed.priority && retry.timestamp == failed.timestamp && retry.environment == failed.environment)
            #expect(retry.priorityReason == "retry of push \(failed.id)")
            // The failure stays as it was; a second retry finds the first one newer.
            let history = try await store.deliveries(DeliveryQuery(key: "order-1", reason: "BadExpirationDate"))
            #expect(history.map(\.id) == [failed.id] && history[0].status == .failed)
            #expect(try await store.retryDelivery(id: failed.id, app: nil, at: t0 + 21) == .refused(.newerPush(id: retry.id)))
            #expect(try await store.retryDelivery(id: retry.id, app: nil, at: t0 + 21) == .refused(.notFailed(.queued)))
            #expect(try await store.retryDelivery(id: 999_999, app: nil, at: t0 + 21) == .notFound)
            // A push of another app is not there for a caller bound to one.
            #expect(try await store.retryDelivery(id: failed.id, app: "com.example.other", at: t0 + 21) == .notFound)
            #expect(try await store.claimDeliveries(dueBy: t0 + 21, limit: 10, leaseUntil: t0 + 80).map(\.id) == [retry.id])
        }
    }

    @Test(arguments: StoreKind.allCases) func twoRetriesAtOnceQueueOnePush(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let failed = try await failedUpdate(store)
            async let first = store.retryDelivery(id: failed.id, app: nil, at: t0 + 20)
            async let second = store.retryDelivery(id: failed.id, app: nil, at: t0 + 20)
            let outcomes = [try await first, try await second]
            #expect(outcomes.filter { if case .retried = $0 { true } else { false } }.count == 1)
            #expect(try await store.deliveries(DeliveryQuery(key: "order-1", status: .queued)).count == 1)
        }
    }

    @Test(arguments: StoreKind.allCases) func aDeadTokenOrANewerPushRefusesTheRetry(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let dead = try await failedUpdate(store, reason: "BadDeviceToken", tokenIsDead: true)
            #expect(try await store.retryDelivery(id: dead.id, app: nil, at: t0 + 20) == .refused(.targetGone("the token is dead (BadDeviceToken)")))

            try await kind.withStore { subject in
                let other = subject.store
                let failed = try await failedUpdate(other)
                try await other.change("order-1", body: "delivered", at: t0 + 30)
                let newer = try #require(try await other.deliveries(DeliveryQuery(key: "order-1", status: .queued)).first)
                #expect(try await other.retryDelivery(id: failed.id, app: nil, at: t0 + 31) == .refused(.newerPush(id: newer.id)))
            }
        }
    }
}
