import Foundation
import LiveActivityKit
import LiveRelayStore
import Testing

/// The webhooks' store contract, on every engine: what an endpoint is sent, in what order, and
/// what failures do to its deliveries and to it.
struct WebhookStoreTests {
    func endpoint(_ id: String, types: Set<EventType>? = nil, app: String = testApp, at: Date = t0) -> WebhookEndpointRecord {
        WebhookEndpointRecord(
            id: id, bundleID: app, url: "https://hooks.example.com/\(id)", eventTypes: types, secret: "whsec_\(id)", createdAt: at)
    }

    func failure(at: Date) -> WebhookAttempt { WebhookAttempt(at: at, status: 503, error: "HTTP 503", latencyMilliseconds: 12, excerpt: "down") }
    func success(at: Date) -> WebhookAttempt { WebhookAttempt(at: at, status: 204, latencyMilliseconds: 3) }

    /// What a claim took: each delivery as `endpoint type key device`.
    func claim(_ store: any RelayStore, at: Date, limit: Int = 100, leaseUntil: Date? = nil) async throws -> [ClaimedWebhookDelivery] {
        try await store.claimWebhookDeliveries(dueBy: at, limit: limit, leaseUntil: leaseUntil ?? at + 30)
    }

    func names(_ claimed: [ClaimedWebhookDelivery]) -> [String] {
        claimed.map { "\($0.endpointID) \($0.event.type.rawValue) \($0.event.key) \($0.event.deviceID ?? "-")" }.sorted()
    }

    /// An app's endpoints are limited: of many creations at once, no more than the limit are kept
    /// (a count then an insert kept 24 of 60 under a limit of 20), and another app's are not counted.
    @Test(arguments: StoreKind.allCases) func manyEndpointsMadeAtOnceKeepNoMoreThanTheLimit(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            _ = try await store.insertWebhookEndpoint(endpoint("we_other", app: "com.example.other"), limit: 1)
            let kept = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<60 { group.addTask { try await store.insertWebhookEndpoint(endpoint("we_\(index)"), limit: 20) } }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(kept == 20)
            #expect(try await store.webhookEndpoints(app: testApp).count == 20)
            #expect(try await store.webhookEndpoints(app: "com.example.other").count == 1)
        }
    }

    /// An endpoint holds no more of the sender than its share: of 30 due to a receiver that hangs,
    /// 8 are claimed, and another app's endpoint, due later, comes in the same claim; while those 8
    /// are in flight, none more of its are claimed. (One claim over every endpoint in order kept a
    /// healthy endpoint waiting minutes behind hanging ones.)
    @Test(arguments: StoreKind.allCases) func anEndpointHasNoMoreThanItsShareInFlight(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let other = "com.example.other"
            _ = try await store.insertWebhookEndpoint(endpoint("we_hanging", at: t0), limit: .max)
            _ = try await store.insertWebhookEndpoint(endpoint("we_healthy", app: other, at: t0), limit: .max)
            for index in 0..<30 {
                try await store.saveActivityToken(activityToken("order-\(index)", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            }
            try await store.saveActivityToken(activityToken("match", "iphone-9", at: t0 + 2, app: other), attributesType: deliveryType)
            let first = try await store.claimWebhookDeliveries(dueBy: t0 + 3, limit: 200, perEndpoint: 8, leaseUntil: t0 + 60)
            #expect(first.filter { $0.endpointID == "we_hanging" }.count == 8)
            #expect(first.filter { $0.endpointID == "we_healthy" }.count == 1)
            // In flight still: nothing more of the hanging endpoint's.
            #expect(try await store.claimWebhookDeliveries(dueBy: t0 + 4, limit: 200, perEndpoint: 8, leaseUntil: t0 + 60).isEmpty)
            // Three answered: three more.
            let answered = first.filter { $0.endpointID == "we_hanging" }.prefix(3).map { ($0.id, WebhookOutcome.delivered(success(at: t0 + 5))) }
            try await store.recordWebhookOutcomes(answered, disableFailingSince: t0 - 86_400, at: t0 + 5)
            #expect(try await store.claimWebhookDeliveries(dueBy: t0 + 6, limit: 200, perEndpoint: 8, leaseUntil: t0 + 60).count == 3)
        }
    }

    @Test(arguments: StoreKind.allCases) func anEndpointIsSentItsAppsEventsOfItsTypesFromItsCreationInOrderPerKey(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("before", "iphone-1"), attributesType: deliveryType)
            _ = try await store.insertWebhookEndpoint(endpoint("we_all", at: t0 + 1), limit: .max)
            _ = try await store.insertWebhookEndpoint(endpoint("we_ends", types: [.activityEnded], at: t0 + 1), limit: .max)
            _ = try await store.insertWebhookEndpoint(endpoint("we_other", app: "com.example.other", at: t0 + 1), limit: .max)
            #expect(try await store.webhookEndpoints(app: testApp).map(\.id) == ["we_all", "we_ends"])
            #expect(try await store.webhookEndpoint(id: "we_ends")?.eventTypes == [.activityEnded])

            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 2), attributesType: deliveryType)
            try await store.saveActivityToken(activityToken("order-2", "iphone-1", at: t0 + 3), attributesType: deliveryType)
            _ = try await store.endActivityOnDevice(
                app: testApp, key: "order-1", deviceID: "iphone-1", state: .dismissed, cause: "person", at: t0 + 4)

            // Of each key, only its oldest event waits to be posted: order-1's end waits for its start.
            let first = try await claim(store, at: t0 + 5)
            #expect(
                names(first) == [
                    "we_all activity.started order-1 iphone-1", "we_all activity.started order-2 iphone-1",
                    "we_ends activity.ended order-1 iphone-1",
                ])
            #expect(first.allSatisfy { $0.attempts == 0 && $0.secret == "whsec_\($0.endpointID)" })
            // Claimed, each is leased: none again, and order-1's next waits for its delivery.
            #expect(try await claim(store, at: t0 + 6).isEmpty)
            try await store.recordWebhookOutcomes(
                first.map { ($0.id, WebhookOutcome.delivered(success(at: t0 + 6))) }, disableFailingSince: t0 - 86400, at: t0 + 6)
            let second = try await claim(store, at: t0 + 7)
            #expect(names(second) == ["we_all activity.ended order-1 iphone-1", "we_ends activity.ended order-1 -"])
            try await store.recordWebhookOutcomes(
                second.map { ($0.id, WebhookOutcome.delivered(success(at: t0 + 7))) }, disableFailingSince: t0 - 86400, at: t0 + 7)
            #expect(names(try await claim(store, at: t0 + 8)) == ["we_all activity.ended order-1 -"])

            let history = try await store.webhookDeliveries(endpointID: "we_ends", limit: 10)
            #expect(history.map(\.status) == [.delivered, .delivered])
            #expect(history.first?.lastAttempt?.status == 204)
            #expect(history.allSatisfy { $0.attempts == 1 })
        }
    }

    @Test(arguments: StoreKind.allCases) func aFailedDeliveryHoldsItsKeyUntilItIsDeliveredOrGivenUp(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            _ = try await store.insertWebhookEndpoint(endpoint("we_1"), limit: .max)
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            _ = try await store.endActivityOnDevice(app: testApp, key: "order-1", deviceID: "iphone-1", state: .ended, cause: "app", at: t0 + 2)
            let started = try #require(try await claim(store, at: t0 + 3).first)
            try await store.recordWebhookOutcomes(
                [(started.id, .retry(failure(at: t0 + 3), at: t0 + 8))], disableFailingSince: t0 - 86400, at: t0 + 3)
            #expect(try await store.webhookEndpoint(id: "we_1")?.failingSince == t0 + 3)
            // Not due yet, and the key's later events wait behind it.
            #expect(try await claim(store, at: t0 + 7).isEmpty)
            let again = try await claim(store, at: t0 + 8)
            #expect(again.map(\.id) == [started.id])
            #expect(again.first?.attempts == 1)
            try await store.recordWebhookOutcomes(
                [(started.id, .gaveUp(failure(at: t0 + 8)))], disableFailingSince: t0 - 86400, at: t0 + 8)
            let failed = try #require(try await store.webhookDeliveries(endpointID: "we_1", limit: 10).first { $0.id == started.id })
            #expect(failed.status == .failed)
            #expect(failed.attempts == 2)
            #expect(failed.lastAttempt?.excerpt == "down")
            // Given up, it holds nothing up.
            #expect(names(try await claim(store, at: t0 + 9)) == ["we_1 activity.ended order-1 iphone-1"])
        }
    }

    @Test(arguments: StoreKind.allCases) func anEndpointFailingLongEnoughIsDisabledAndResumesWhenEnabled(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            _ = try await store.insertWebhookEndpoint(endpoint("we_1"), limit: .max)
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            let first = try #require(try await claim(store, at: t0 + 2).first)
            var disabled = try await store.recordWebhookOutcomes(
                [(first.id, .retry(failure(at: t0 + 2), at: t0 + 3))], disableFailingSince: t0 - 86400, at: t0 + 2)
            #expect(disabled.isEmpty)
            // A delivery clears the failing; failing again starts it over.
            try await store.saveActivityToken(activityToken("order-2", "iphone-1", at: t0 + 3), attributesType: deliveryType)
            let two = try await claim(store, at: t0 + 3)
            #expect(two.count == 2)
            try await store.recordWebhookOutcomes(
                [(two[0].id, .delivered(success(at: t0 + 4))), (two[1].id, .retry(failure(at: t0 + 4), at: t0 + 5))],
                disableFailingSince: t0 - 86400, at: t0 + 4)
            #expect(try await store.webhookEndpoint(id: "we_1")?.failingSince == nil)
            let last = try #require(try await claim(store, at: t0 + 5).first)
            disabled = try await store.recordWebhookOutcomes(
                [(last.id, .retry(failure(at: t0 + 5), at: t0 + 6))], disableFailingSince: t0 + 4, at: t0 + 5)
            #expect(disabled.isEmpty, "failing since t0+5, not before t0+4")
            let after = try #require(try await claim(store, at: t0 + 6).first)
            disabled = try await store.recordWebhookOutcomes(
                [(after.id, .retry(failure(at: t0 + 6), at: t0 + 7))], disableFailingSince: t0 + 5, at: t0 + 6)
            #expect(disabled == ["we_1"])
            var endpoint = try #require(try await store.webhookEndpoint(id: "we_1"))
            #expect(!endpoint.enabled)
            #expect(endpoint.disabledReason?.contains("HTTP 503") == true)
            // Disabled: nothing is posted, and new events wait.
            try await store.saveActivityToken(activityToken("order-3", "iphone-1", at: t0 + 7), attributesType: deliveryType)
            #expect(try await claim(store, at: t0 + 8).isEmpty)
            endpoint.enabled = true
            endpoint.disabledReason = nil
            endpoint.failingSince = nil
            #expect(try await store.updateWebhookEndpoint(endpoint))
            #expect(names(try await claim(store, at: t0 + 9)).count == 2, "the one waiting, and order-3's start")
        }
    }

    @Test(arguments: StoreKind.allCases) func aClaimIsLeasedAndDueAgainWhenItsLeaseRunsOut(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            _ = try await store.insertWebhookEndpoint(endpoint("we_1"), limit: .max)
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            let first = try await claim(store, at: t0 + 2, leaseUntil: t0 + 10)
            #expect(first.count == 1)
            #expect(try await claim(store, at: t0 + 9).isEmpty)
            let again = try await claim(store, at: t0 + 10)
            #expect(again.map(\.id) == first.map(\.id))
            #expect(again.map(\.event.id) == first.map(\.event.id), "the same event id, for the receiver to de-duplicate")
            // A restart: alone on its store (SQLite), no one holds a claim any more; shared
            // (PostgreSQL), another instance may.
            try await store.releaseClaims(at: t0 + 11)
            #expect(try await claim(store, at: t0 + 12).count == (kind.isShared ? 0 : 1))
        }
    }

    @Test(arguments: StoreKind.allCases) func aTestGoesToItsEndpointAloneAndAnEventCanBeRedelivered(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            _ = try await store.insertWebhookEndpoint(endpoint("we_1"), limit: .max)
            _ = try await store.insertWebhookEndpoint(endpoint("we_2"), limit: .max)
            let id = try await store.recordTestEvent(
                NewEvent(.webhookTest, bundleID: testApp, key: "", data: [("endpointID", .string("we_2"))]), endpointID: "we_2", at: t0 + 1)
            let tests = try await claim(store, at: t0 + 2)
            #expect(tests.map(\.endpointID) == ["we_2"])
            #expect(tests.first?.event.id == id)
            #expect(tests.first?.event.type == .webhookTest)
            try await store.recordWebhookOutcomes(
                tests.map { ($0.id, WebhookOutcome.delivered(success(at: t0 + 2))) }, disableFailingSince: t0 - 86400, at: t0 + 2)
            #expect(try await claim(store, at: t0 + 3).isEmpty)

            #expect(try await store.redeliverWebhookEvent(endpointID: "we_2", eventID: id, at: t0 + 4))
            #expect(try await store.redeliverWebhookEvent(endpointID: "we_1", eventID: id, at: t0 + 4))
            #expect(try await !store.redeliverWebhookEvent(endpointID: "we_1", eventID: "evt_none", at: t0 + 4))
            #expect(try await !store.redeliverWebhookEvent(endpointID: "we_none", eventID: id, at: t0 + 4))
            let again = try await claim(store, at: t0 + 4)
            #expect(again.map(\.endpointID).sorted() == ["we_1", "we_2"])
            #expect(again.allSatisfy { $0.attempts == 0 && $0.event.id == id })

            #expect(try await store.deleteWebhookEndpoint(id: "we_2"))
            #expect(try await !store.deleteWebhookEndpoint(id: "we_2"))
            #expect(try await store.webhookDeliveries(endpointID: "we_2", limit: 10).isEmpty)
            #expect(try await store.webhookEndpoints(app: nil).map(\.id) == ["we_1"])
        }
    }

    /// Two instances claiming at once never share a delivery, nor two of one key.
    @Test(arguments: StoreKind.allCases) func twoWritersClaimDisjointDeliveriesAndOneOfEachKey(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            _ = try await one.insertWebhookEndpoint(endpoint("we_1"), limit: .max)
            for key in 1...30 {
                try await one.saveActivityToken(activityToken("order-\(key)", "iphone-1", at: t0 + 1), attributesType: deliveryType)
                try await one.saveActivityToken(activityToken("order-\(key)", "iphone-2", at: t0 + 1), attributesType: deliveryType)
            }
            try await subject.reopened { two async throws in
                let claims = try await withThrowingTaskGroup(of: [ClaimedWebhookDelivery].self) { group in
                    for store in [one, two, one, two] {
                        group.addTask { try await store.claimWebhookDeliveries(dueBy: t0 + 2, limit: 10, leaseUntil: t0 + 60) }
                    }
                    var all: [ClaimedWebhookDelivery] = []
                    for try await claim in group { all += claim }
                    return all
                }
                #expect(claims.count == 30)
                #expect(Set(claims.map(\.event.key)).count == 30, "two events of one key were claimed at once")
            }
        }
    }
}
