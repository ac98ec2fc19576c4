import Foundation
import LiveActivityKit
import LiveRelayStore
import Testing

/// Retention's store contract, on every engine: what is past its time goes, a batch at a time;
/// what is still to send or post, what is newer, and what something still points to stays.
struct RetentionStoreTests {
    let day: TimeInterval = 86_400

    /// Runs `kind` with batches of `limit` until one deletes nothing of it; each batch's counts.
    func batches(_ store: any RelayStore, _ kind: PruneKind, before cutoff: Date, limit: Int) async throws -> [[String: Int]] {
        var all: [[String: Int]] = []
        while true {
            let counts = try await store.prune(kind, before: cutoff, limit: limit).filter { $0.value > 0 }
            if counts.isEmpty { return all }
            all.append(counts)
            #expect(all.count < 50, "a kind that never runs out")
            if all.count >= 50 { return all }
        }
    }

    @Test(arguments: StoreKind.allCases) func oldFinishedPushesGoInBatchesWithTheirPayloadsButNotWhatIsStillToSend(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for device in ["iphone-1", "iphone-2", "iphone-3"] { try await store.savePushToStartToken(pushToStart(device)) }
            try await store.start("old-sent", at: t0)
            try await store.sendEverythingDue(at: t0)
            try await store.start("new", at: t0 + 40 * day)
            try await store.sendEverythingDue(at: t0 + 40 * day + 1)

            // Two of the three old ones, then the last with the payload the three shared.
            let cutoff = t0 + 30 * day
            #expect(try await batches(store, .deliveries, before: cutoff, limit: 2) == [["deliveries": 2], ["deliveries": 1, "payloads": 1]])
            #expect(try await store.deliveries(DeliveryQuery(key: "old-sent", limit: 10)).isEmpty)
            #expect(try await store.statuses(key: "new") == ["start new→iphone-1": .sent, "start new→iphone-2": .sent, "start new→iphone-3": .sent])
        }
    }

    @Test(arguments: StoreKind.allCases) func aPushStillToSendIsKeptHoweverOldAndItsPayloadWithIt(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for device in ["iphone-1", "iphone-2"] { try await store.savePushToStartToken(pushToStart(device)) }
            try await store.start("stuck", at: t0)
            // One of the two is answered; the other stays claimed.
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            try await store.recordOutcomes([(claimed[0].id, .sent(status: 200, apnsID: nil))], at: t0)
            #expect(try await batches(store, .deliveries, before: t0 + 30 * day, limit: 10) == [["deliveries": 1]])
            let left = try await store.deliveries(DeliveryQuery(key: "stuck", limit: 10))
            #expect(left.map(\.status) == [.sending])
            #expect(left.map { String(decoding: $0.payload, as: UTF8.self) } == ["start stuck"])
        }
    }

    /// A version's contract goes once no live token has the version and it was not registered
    /// again within the window; the contract for any version, and a pinned one, stay.
    @Test(arguments: StoreKind.allCases) func aContractOfAVersionNoDeviceRunsGoesAfterItsWindow(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let contract = try JSONValue(parsing: #"{"attributes": {}, "contentState": {}}"#)
            for (version, at, pinned) in [
                ("", t0, false), ("1.0 (1)", t0, false), ("1.1 (2)", t0, true), ("2.0 (7)", t0, false), ("2.1 (8)", t0, false),
                ("3.0 (9)", t0 + 10 * day, false),
            ] {
                try await store.saveContract(
                    ContractRecord(
                        bundleID: testApp, attributesType: deliveryType, appVersion: version, contract: contract, updatedAt: at, pinned: pinned))
            }
            var started = pushToStart("iphone-1")
            started.appVersion = "2.0 (7)"
            try await store.savePushToStartToken(started)
            var token = activityToken("order-1", "iphone-2")
            token.appVersion = "2.1 (8)"
            _ = try await store.saveActivityToken(token, attributesType: deliveryType)
            #expect(try await batches(store, .unusedContractVersions, before: t0 + 7 * day, limit: 10) == [["contracts": 1]])
            #expect(try await store.contracts().map(\.appVersion) == ["", "1.1 (2)", "2.0 (7)", "2.1 (8)", "3.0 (9)"])
            // A device whose update token ended no longer holds its version.
            try await store.change("order-1", event: .end, body: "end", at: t0 + 8 * day)
            #expect(try await batches(store, .unusedContractVersions, before: t0 + 7 * day, limit: 10) == [["contracts": 1]])
            #expect(try await store.contracts().map(\.appVersion) == ["", "1.1 (2)", "2.0 (7)", "3.0 (9)"])
        }
    }

    @Test(arguments: StoreKind.allCases) func anEndedActivityGoesWithItsTokensAfterItsWindowAndALiveOneStays(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for key in ["ended-long-ago", "ended-lately", "live"] { try await store.registerActivity(key, on: ["iphone-1", "iphone-2"]) }
            try await store.change("ended-long-ago", event: .end, body: "end", at: t0)
            try await store.change("ended-lately", event: .end, body: "end", at: t0 + 10 * day)
            let cutoff = t0 + 7 * day
            #expect(try await batches(store, .endedActivities, before: cutoff, limit: 10) == [["activities": 1, "activity_tokens": 2]])
            #expect(try await store.activity(app: testApp, key: "ended-long-ago") == nil)
            #expect(try await store.activity(app: testApp, key: "ended-lately")?.state == .ended)
            #expect(try await store.activity(app: testApp, key: "live")?.state == .active)
        }
    }

    @Test(arguments: StoreKind.allCases) func eventsGoOnceNoWebhookDeliveryWaitsForThem(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            _ = try await store.insertWebhookEndpoint(
                WebhookEndpointRecord(id: "we_1", bundleID: testApp, url: "https://hooks.example.com/1", secret: "whsec_1", createdAt: t0),
                limit: .max)
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            try await store.saveActivityToken(activityToken("order-2", "iphone-1", at: t0 + 2), attributesType: deliveryType)
            let claimed = try await store.claimWebhookDeliveries(dueBy: t0 + 3, limit: 10, leaseUntil: t0 + 30)
            #expect(claimed.count == 2)
            let cutoff = t0 + 30 * day
            // Both events wait to be posted: nothing goes.
            #expect(try await batches(store, .events, before: cutoff, limit: 10).isEmpty)
            // order-1's is posted: its event and then its delivery go; order-2's wait still.
            let first = try #require(claimed.first { $0.event.key == "order-1" })
            try await store.recordWebhookOutcomes(
                [(first.id, .delivered(WebhookAttempt(at: t0 + 4, status: 204)))], disableFailingSince: t0 - day, at: t0 + 4)
            #expect(try await batches(store, .events, before: cutoff, limit: 10) == [["events": 1]])
            #expect(try await batches(store, .webhookDeliveries, before: cutoff, limit: 10) == [["webhook_deliveries": 1]])
            #expect(try await store.events(EventQuery(bundleID: testApp)).map(\.key) == ["order-2"])
            #expect(try await store.webhookDeliveries(endpointID: "we_1", limit: 10).count == 1)
            // Newer than the cutoff, nothing goes.
            #expect(try await batches(store, .events, before: t0, limit: 10).isEmpty)
        }
    }

    /// A disabled endpoint keeps no event past its time: its deliveries of them go with them (301
    /// events survived minutes of pruning behind one). And an app's waits keep only its own
    /// events, not every app's.
    @Test(arguments: StoreKind.allCases) func neitherADisabledEndpointNorAnotherAppsWaitKeepsTheLog(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let other = "com.example.other"
            for (id, app) in [("we_1", testApp), ("we_2", other)] {
                _ = try await store.insertWebhookEndpoint(
                    WebhookEndpointRecord(id: id, bundleID: app, url: "https://hooks.example.com/\(id)", secret: "whsec_1", createdAt: t0),
                    limit: .max)
            }
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            try await store.saveActivityToken(activityToken("order-9", "iphone-9", at: t0 + 2, app: other), attributesType: deliveryType)
            #expect(try await store.claimWebhookDeliveries(dueBy: t0 + 3, limit: 10, leaseUntil: t0 + 30).count == 2)
            var disabled = try #require(try await store.webhookEndpoint(id: "we_1"))
            disabled.enabled = false
            disabled.disabledReason = "disabled by its owner"
            #expect(try await store.updateWebhookEndpoint(disabled))

            let cutoff = t0 + 30 * day
            #expect(try await batches(store, .events, before: cutoff, limit: 10) == [["events": 1, "webhook_deliveries": 1]])
            #expect(try await store.events(EventQuery(bundleID: testApp)).isEmpty)
            #expect(try await store.events(EventQuery(bundleID: other)).map(\.key) == ["order-9"])
            #expect(try await store.webhookDeliveries(endpointID: "we_1", limit: 10).isEmpty)
            #expect(try await store.webhookDeliveries(endpointID: "we_2", limit: 10).first?.status == .pending)

            // Enabled again, it is posted what is still kept, and nothing of what went.
            disabled.enabled = true
            #expect(try await store.updateWebhookEndpoint(disabled))
            #expect(try await store.claimWebhookDeliveries(dueBy: cutoff + 60, limit: 10, leaseUntil: cutoff + 90).map(\.endpointID) == ["we_2"])
        }
    }

    /// Events no one read or was posted (on PostgreSQL, still unnumbered) go too.
    @Test(arguments: StoreKind.allCases) func eventsNobodyReadGoToo(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0), attributesType: deliveryType)
            #expect(try await batches(store, .events, before: t0 + 30 * day, limit: 10) == [["events": 1]])
        }
    }

    @Test(arguments: StoreKind.allCases) func idempotencyKeysSessionsSchedulesAndDeletedChannelsGoAfterTheirTime(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.savePushToStartToken(pushToStart("iphone-1"))
            try await store.start(
                "order-1", at: t0, context: WriteContext(idempotency: IdempotencyClaim(apiKeyID: "key-1", key: "once", requestHash: "h")))
            try await store.insertDashboardSession(
                DashboardSessionRecord(idHash: Data([1]), apiKeyID: "key-1", formToken: "f", signedInAt: t0, expiresAt: t0 + 3600))
            try await store.insertDashboardSession(
                DashboardSessionRecord(idHash: Data([2]), apiKeyID: "key-1", formToken: "f", signedInAt: t0, expiresAt: t0 + 3 * day))
            for (id, due) in [("sch_done", t0), ("sch_pending", t0 + 1)] {
                try await store.insertSchedule(
                    ScheduleRecord(id: id, bundleID: testApp, key: "order-1", action: .update, request: .object([]), dueAt: due, createdAt: t0),
                    context: WriteContext())
            }
            _ = try await store.cancelSchedule(id: "sch_done", at: t0)
            try await store.saveChannel(
                ChannelRecord(channelID: "ch-gone", bundleID: testApp, environment: .sandbox, key: nil, storagePolicy: 0, createdAt: t0))
            try await store.markChannelDeleted(id: "ch-gone", at: t0)
            try await store.saveChannel(
                ChannelRecord(channelID: "ch-live", bundleID: testApp, environment: .sandbox, key: nil, storagePolicy: 0, createdAt: t0))

            #expect(try await batches(store, .idempotencyKeys, before: t0, limit: 10).isEmpty)
            #expect(try await batches(store, .idempotencyKeys, before: t0 + day + 1, limit: 10) == [["idempotency_keys": 1]])
            #expect(try await store.idempotentAnswer(apiKeyID: "key-1", key: "once") == nil)
            #expect(try await batches(store, .dashboardSessions, before: t0 + day, limit: 10) == [["dashboard_sessions": 1]])
            #expect(try await batches(store, .schedules, before: t0 + 30 * day, limit: 10) == [["schedules": 1]])
            #expect(try await store.schedule(id: "sch_pending")?.state == .pending)
            #expect(try await store.schedule(id: "sch_done") == nil)
            #expect(try await batches(store, .deletedChannels, before: t0 + 7 * day, limit: 10) == [["channels": 1]])
            #expect(try await store.channel(id: "ch-gone") == nil)
            #expect(try await store.channel(id: "ch-live") != nil)
        }
    }
}
