import Foundation
import GRDB
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import Synchronization
import Testing

/// `AcceptingStore`'s contract, on every engine: starts, updates and ends written with their
/// pushes in one transaction, and schedules.
@Suite struct AcceptingStoreContractTests {
    // MARK: Accepting requests

    /// A reload sees the audience's tokens of its push type and each device's reloads of that
    /// type since its window began (queued, on their way or sent; not failed), and writes its
    /// pushes and its answer in one transaction; a 410 forgets the token.
    @Test(arguments: StoreKind.allCases) func aReloadSeesItsAudiencesTokensAndTheirDaysReloads(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            func widgets(_ device: String, _ token: String, user: String?) -> SurfaceTokenRecord {
                SurfaceTokenRecord(
                    bundleID: testApp, deviceID: device, pushType: .widgets, token: token,
                    widgets: [WidgetPlacement(kind: "order", family: "systemSmall")],
                    environment: .sandbox, userID: user, updatedAt: t0)
            }
            try await store.saveSurfaceTokens(app: testApp, deviceID: "iphone-1", type: .widgets, [widgets("iphone-1", "w1", user: "ana")])
            try await store.saveSurfaceTokens(app: testApp, deviceID: "iphone-2", type: .widgets, [widgets("iphone-2", "w2", user: "ben")])
            try await store.saveSurfaceTokens(
                app: testApp, deviceID: "iphone-2", type: .controls,
                [
                    SurfaceTokenRecord(
                        bundleID: testApp, deviceID: "iphone-2", pushType: .controls, kind: "door", token: "c2", environment: .sandbox, updatedAt: t0)
                ])
            var snapshot = try await store.reloadWidgets(.everyone, at: t0, since: t0 - 86_400)
            #expect(snapshot.tokens.map(\.token) == ["w1", "w2"] && snapshot.recentReloads.isEmpty)
            snapshot = try await store.reloadWidgets(.users(["ben"]), at: t0 + 1, since: t0 - 86_400)
            #expect(snapshot.tokens.map(\.token) == ["w2"] && snapshot.recentReloads == ["iphone-1": 1, "iphone-2": 1])
            snapshot = try await store.reloadWidgets(.devices(["iphone-1"]), at: t0 + 2, since: t0 + 1)
            #expect(snapshot.tokens.map(\.deviceID) == ["iphone-1"] && snapshot.recentReloads == ["iphone-2": 1], "since its window only")
            let pushes = try await store.deliveries(DeliveryQuery(key: "", includePayloads: true))
            #expect(pushes.count == 4 && pushes.allSatisfy { $0.event == .reload && $0.target.kind == .widgets && $0.payload == ReloadPushType.body })

            // Failed for good: not counted. Unregistered: the token is forgotten.
            let claimed = try await store.claimDeliveries(dueBy: t0 + 3, limit: 10, leaseUntil: t0 + 60)
            let outcomes: [(id: Int64, outcome: DeliveryOutcome)] = claimed.map { push in
                push.target.deviceID == "iphone-1"
                    ? (push.id, .failed(status: 410, reason: "Unregistered", tokenIsDead: true))
                    : (push.id, .failed(status: 400, reason: "BadTopic", tokenIsDead: false))
            }
            try await store.recordOutcomes(outcomes, at: t0 + 3)
            #expect(try await store.surfaceTokens(deviceID: "iphone-1").isEmpty)
            #expect(try await store.surfaceTokens(deviceID: "iphone-2").count == 2)
            snapshot = try await store.reloadWidgets(.everyone, at: t0 + 4, since: t0 - 86_400)
            #expect(snapshot.tokens.map(\.token) == ["w2"] && snapshot.recentReloads.isEmpty)
            let events = try await store.events(EventQuery(limit: 100)).map(\.type)
            #expect(events.contains(.tokenInvalidated) && events.contains(.reloadFailed))
        }
    }

    /// A change past its key's budget records the exhaustion with its write, once an hour: again
    /// an hour after the last one, and not for another key's; queued or handed over alike.
    @Test(arguments: StoreKind.allCases) func aChangePastItsBudgetRecordsTheExhaustionOnceAnHour(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for key in ["busy", "other"] {
                try await store.start(key)
                try await store.registerActivity(key, on: ["d1"])
            }
            let exhausted = BudgetExhaustion(targetsOverBudget: 1, targets: 1, perHour: 10)
            let handOver = WriteContext(handOver: HandOver(leaseUntil: t0 + 600, limit: 100))
            func recorded() async throws -> [String] {
                try await store.events(EventQuery(bundleID: testApp, types: [.budgetExhausted])).map {
                    "\($0.key) \(Int($0.occurredAt.timeIntervalSince(t0))) \($0.data.serializedString)"
                }.sorted()
            }
            try await store.change("busy", body: "u1", at: t0 + 1, exhausted: exhausted)
            try await store.change("busy", body: "u2", at: t0 + 2, context: handOver, exhausted: exhausted)
            try await store.change("busy", body: "u3", at: t0 + 3)
            #expect(try await recorded() == [#"busy 1 {"targetsOverBudget":1,"targets":1,"priority10PerHour":10}"#])
            try await store.change("other", body: "u1", at: t0 + 4, context: handOver, exhausted: exhausted)
            try await store.change("busy", body: "u4", at: t0 + 3600, exhausted: exhausted)
            try await store.change("busy", body: "u5", at: t0 + 3602, context: handOver, exhausted: exhausted)
            #expect(
                try await recorded() == [
                    #"busy 1 {"targetsOverBudget":1,"targets":1,"priority10PerHour":10}"#,
                    #"busy 3602 {"targetsOverBudget":1,"targets":1,"priority10PerHour":10}"#,
                    #"other 4 {"targetsOverBudget":1,"targets":1,"priority10PerHour":10}"#,
                ])
        }
    }

    @Test(arguments: StoreKind.allCases) func aStartReachesItsAudiencesLiveTokensOnly(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.savePushToStartToken(pushToStart("iphone-1", user: "ana"))
            try await store.savePushToStartToken(pushToStart("iphone-2", user: "ben"))
            try await store.savePushToStartToken(pushToStart("iphone-3", user: "ana"))
            var other = pushToStart("iphone-4", user: "ana")
            other.attributesType = "ScoreAttributes"
            try await store.savePushToStartToken(other)

            let seen = Seen<[PushToStartTokenRecord]>([])
            try await store.start("a", audience: .users(["ana"]), seen: { seen.set($0) })
            #expect(seen.value.map(\.deviceID) == ["iphone-1", "iphone-3"])
            try await store.start("b", audience: .devices(["iphone-2", "iphone-9"]), seen: { seen.set($0) })
            #expect(seen.value.map(\.deviceID) == ["iphone-2"])
            try await store.start("c", audience: .devices([]), seen: { seen.set($0) })
            #expect(seen.value.isEmpty)

            // A dead token is left out of every audience.
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            let toBen = try #require(claimed.first { $0.key == "b" })
            try await store.recordOutcomes([(toBen.id, .failed(status: 400, reason: "BadDeviceToken", tokenIsDead: true))], at: t0)
            try await store.start("d", audience: .everyone, seen: { seen.set($0) })
            #expect(seen.value.map(\.deviceID) == ["iphone-1", "iphone-3"])
        }
    }

    @Test(arguments: StoreKind.allCases) func aTakenKeyCannotStartAgainAndNothingIsWritten(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.savePushToStartToken(pushToStart("iphone-1"))
            try await store.start("order-1")
            await #expect(throws: StoreError(.keyExists, "activity key \"order-1\" already exists")) {
                try await store.start("order-1", at: t0 + 5)
            }
            #expect(try await store.deliveries(DeliveryQuery(key: "order-1")).count == 1)
            #expect(try await store.activity(app: testApp, key: "order-1")?.startedAt == t0)
        }
    }

    @Test(arguments: StoreKind.allCases) func aPlanThatThrowsLeavesNoTrace(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.savePushToStartToken(pushToStart("iphone-1"))
            struct Refused: Error {}
            await #expect(throws: Refused.self) {
                try await store.acceptStart(app: testApp, key: "order-1", attributesType: deliveryType, audience: .everyone, context: WriteContext())
                {
                    _ -> (StartPlan, Void) in
                    throw Refused()
                }
            }
            #expect(try await store.activity(app: testApp, key: "order-1") == nil)
            try await store.saveActivityToken(activityToken("order-2", "iphone-1"), attributesType: deliveryType)
            await #expect(throws: Refused.self) {
                try await store.acceptChange(app: testApp, key: "order-2", budget: .perDevice(windowStart: t0), context: WriteContext()) {
                    _ -> (ChangePlan, Void) in
                    throw Refused()
                }
            }
            #expect(try await store.deliveries(DeliveryQuery()).isEmpty)
        }
    }

    @Test(arguments: StoreKind.allCases) func theIdempotencyRecordIsWrittenWithTheRequestAndOnlyOnce(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.savePushToStartToken(pushToStart("iphone-1"))
            let claim = IdempotencyClaim(apiKeyID: "key-1", key: "retry-me", requestHash: "h1")
            try await store.start("order-1", context: WriteContext(idempotency: claim))
            let stored = try #require(try await store.idempotentAnswer(apiKeyID: "key-1", key: "retry-me"))
            #expect(stored.requestHash == "h1")
            #expect(stored.answer == .accepted(acceptance("order-1", .start)))
            #expect(try await store.idempotentAnswer(apiKeyID: "key-2", key: "retry-me") == nil)

            // A second write under the same idempotency key is refused, and its request is not accepted.
            await #expect(throws: StoreError.self) {
                try await store.start("order-2", context: WriteContext(idempotency: claim))
            }
            #expect(try await store.activity(app: testApp, key: "order-2") == nil)
        }
    }

    @Test(arguments: StoreKind.allCases) func aChangeSeesLiveTokensAndPriority10CountsOfTheLastHour(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2"])
            _ = try await store.endActivityOnDevice(app: testApp, key: "match", deviceID: "iphone-2", state: .ended, cause: nil, at: t0)
            var third = activityToken("match", "iphone-3", environment: .production, at: t0 + 1.25)
            (third.activityID, third.frequentPushesEnabled) = ("activity-3", true)
            try await store.saveActivityToken(third, attributesType: deliveryType)
            try await store.change("match", body: "u1", at: t0 + 10, priority: .immediate)
            try await store.sendEverythingDue(at: t0 + 10)
            try await store.change("match", body: "u2", at: t0 + 20, priority: .powerConsiderate)
            try await store.sendEverythingDue(at: t0 + 20)
            try await store.change("match", body: "u3", at: t0 + 30, priority: .immediate)
            try await store.change("match", body: "u4", at: t0 + 40, priority: .immediate)  // supersedes u3, which no longer counts

            // u1 (sent) and u4 (queued) count; u2 went at 5; u3 was never sent.
            let snapshot = try await store.change("match", body: "u5", at: t0 + 50, priority: .powerConsiderate)
            #expect(snapshot.liveTokens.map(\.deviceID) == ["iphone-1", "iphone-3"])
            // Each as it was registered (iphone-1 without an activity id), without its last result.
            let registered = try await store.activityTokens(app: testApp, key: "match").filter { $0.state == .live }.map { token in
                var token = token
                (token.lastStatus, token.lastReason, token.lastDeliveryAt) = (nil, nil, nil)
                return token
            }
            #expect(snapshot.liveTokens == registered && registered.map(\.activityID) == [nil, "activity-3"])
            #expect(snapshot.priority10Counts == ["iphone-1": 1 + 1, "iphone-3": 1 + 1])
            #expect(snapshot.activity?.lastTimestamp == Int64(t0.timeIntervalSince1970) + 40)
            // A plan with a fixed priority asks for no counts, and gets none: only the number of live
            // tokens, and its fan-out goes to each of them.
            let uncounted = try await store.change("match", body: "u5b", at: t0 + 50, priority: .powerConsiderate, countingBudget: false)
            #expect(uncounted.priority10Counts.isEmpty)
            #expect(uncounted.liveTokens.isEmpty)
            #expect(uncounted.liveTokenCount == 2)
            let fannedOut = try await store.deliveries(DeliveryQuery(key: "match")).filter { $0.requestID == "update-u5b" }
            #expect(fannedOut.map(\.target.name).sorted() == ["iphone-1", "iphone-3"])
            #expect(fannedOut.allSatisfy { $0.status == .queued && $0.priority == .powerConsiderate && $0.payload == Array("u5b".utf8) })
            #expect(try await store.statuses(key: "match")["u5→iphone-1"] == .superseded)
            try await store.sendEverythingDue(at: t0 + 50)

            // An hour later, u1 is still in the window (counted from t0 + 5), then out of it.
            #expect(
                try await store.change("match", body: "u6", at: t0 + 3605, priority: .powerConsiderate).priority10Counts == [
                    "iphone-1": 1, "iphone-3": 1,
                ])
            #expect(try await store.change("match", body: "u7", at: t0 + 3615, priority: .powerConsiderate).priority10Counts.isEmpty)
        }
    }

    @Test(arguments: StoreKind.allCases) func aNewerQueuedUpdateSupersedesTheOlderOneButNotOneInFlight(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("order-1", "iphone-1"), attributesType: deliveryType)
            try await store.change("order-1", body: "u1", at: t0 + 1)
            _ = try await store.claimDeliveries(dueBy: t0 + 1, limit: 10, leaseUntil: t0 + 61)
            try await store.change("order-1", body: "u2", at: t0 + 2)
            try await store.change("order-1", body: "u3", at: t0 + 3)
            #expect(try await store.statuses(key: "order-1") == ["u1→iphone-1": .sending, "u2→iphone-1": .superseded, "u3→iphone-1": .queued])
        }
    }

    @Test(arguments: StoreKind.allCases) func aKeyBoundToAChannelBroadcastsAndItsEndSchedulesTheChannelsDeletion(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            _ = try await store.acceptStart(app: testApp, key: "final", attributesType: deliveryType, audience: .devices([]), context: WriteContext())
            {
                _ in
                (
                    StartPlan(
                        acceptedAt: t0,
                        activity: ActivityRecord(
                            bundleID: testApp, key: "final", attributesType: deliveryType, channelIDs: [.sandbox: "chan-1"], startedAt: t0,
                            lastTimestamp: 0),
                        payloads: [], deliveries: [], acceptance: acceptance("started", .start)), ()
                )
            }
            try await store.saveChannel(
                ChannelRecord(channelID: "chan-1", bundleID: testApp, environment: .sandbox, key: "final", storagePolicy: 1, createdAt: t0))
            #expect(try await store.change("final", body: "goal", at: t0 + 60).channels.map(\.storagePolicy) == [1])
            try await store.change("final", body: "second goal", at: t0 + 61)
            try await store.change("final", event: .end, body: "full time", at: t0 + 120, channelDeleteAfter: t0 + 120 + 8 * 3600)
            #expect(
                try await store.statuses(key: "final") == [
                    "goal→channel chan-1": .superseded, "second goal→channel chan-1": .superseded, "full time→channel chan-1": .queued,
                ])
            #expect(try await store.channelsToDelete(at: t0 + 8 * 3600).isEmpty)
            #expect(try await store.channelsToDelete(at: t0 + 120 + 8 * 3600).map(\.channelID) == ["chan-1"])
            try await store.markChannelDeleted(id: "chan-1", at: t0 + 9 * 3600)
            try await store.markChannelDeleted(id: "chan-1", at: t0 + 9 * 3600 + 1)
            let deleted = try await store.events(EventQuery(bundleID: testApp, types: [.channelDeleted]))
            #expect(
                deleted.map { "\($0.key) \($0.environment?.rawValue ?? "-") \($0.data.serializedString)" } == [
                    #"final sandbox {"channelID":"chan-1"}"#
                ])
            #expect(deleted.first?.occurredAt == t0 + 9 * 3600, "once: the first marking")
            #expect(try await store.channelsToDelete(at: t0 + 10 * 3600).isEmpty)
            #expect(try await store.channel(id: "chan-1")?.deletedAt == t0 + 9 * 3600)
            #expect(try await store.counts().channels == 0)
        }
    }

    @Test(arguments: StoreKind.allCases) func everyTokenAndPushKeepsItsEnvironment(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.savePushToStartToken(pushToStart("dev-phone"))
            try await store.savePushToStartToken(pushToStart("store-phone", environment: .production))
            #expect(try await store.audienceEnvironments(app: testApp, attributesType: deliveryType, audience: .everyone) == [.sandbox, .production])
            #expect(
                try await store.audienceEnvironments(app: testApp, attributesType: deliveryType, audience: .devices(["store-phone"])) == [.production]
            )
            try await store.start("order-1")
            try await store.saveActivityToken(activityToken("order-1", "dev-phone"), attributesType: deliveryType)
            try await store.saveActivityToken(activityToken("order-1", "store-phone", environment: .production), attributesType: deliveryType)
            #expect(try await store.activityTokens(app: testApp, key: "order-1").map(\.environment) == [.sandbox, .production])
            // Both the per-token plan and the store's own fan-out send each push to its token's environment.
            try await store.change("order-1", body: "u1", at: t0 + 1)
            try await store.change("order-1", body: "u2", at: t0 + 2, countingBudget: false)
            let pushes = try await store.deliveries(DeliveryQuery(key: "order-1", limit: 10)).sorted { $0.id < $1.id }
            #expect(
                pushes.map { "\(String(decoding: $0.payload, as: UTF8.self))→\($0.target.name) \($0.environment.rawValue)" } == [
                    "start order-1→dev-phone sandbox", "start order-1→store-phone production",
                    "u1→dev-phone sandbox", "u1→store-phone production", "u2→dev-phone sandbox", "u2→store-phone production",
                ])
            let claimed = try await store.claimDeliveries(dueBy: t0 + 3, limit: 10, leaseUntil: t0 + 60)
            #expect(claimed.map { "\(String(decoding: $0.payload, as: UTF8.self)) \($0.environment.rawValue)" } == ["u2 sandbox", "u2 production"])
        }
    }

    /// An end with one priority for all (an alert, or priority 5) is the store's own fan-out: it
    /// goes to the tokens that were live before the end ended them.
    @Test(arguments: StoreKind.allCases) func anEndWrittenAsAFanOutReachesEveryTokenItEnds(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("order-1", "iphone-1"), attributesType: deliveryType)
            try await store.saveActivityToken(activityToken("order-1", "iphone-2"), attributesType: deliveryType)
            let snapshot = try await store.change(
                "order-1", event: .end, body: "done", at: t0 + 10, priority: .powerConsiderate, countingBudget: false)
            #expect(snapshot.liveTokenCount == 2)
            #expect(try await store.statuses(key: "order-1") == ["done→iphone-1": .queued, "done→iphone-2": .queued])
            #expect(try await store.activityTokens(app: testApp, key: "order-1").map(\.state) == [.ended, .ended])
        }
    }

    @Test(arguments: StoreKind.allCases) func aKeyWithAChannelInEachEnvironmentSeesBothAndItsEndSchedulesBothDeletions(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let channels: [PushEnvironment: String] = [.sandbox: "chan-s", .production: "chan-p"]
            _ = try await store.acceptStart(app: testApp, key: "final", attributesType: deliveryType, audience: .devices([]), context: WriteContext())
            {
                _ in
                (
                    StartPlan(
                        acceptedAt: t0,
                        activity: ActivityRecord(
                            bundleID: testApp, key: "final", attributesType: deliveryType, channelIDs: channels, startedAt: t0, lastTimestamp: 0),
                        payloads: [], deliveries: [], acceptance: acceptance("started", .start)), ()
                )
            }
            for (environment, id) in channels {
                try await store.saveChannel(
                    ChannelRecord(channelID: id, bundleID: testApp, environment: environment, key: "final", storagePolicy: 0, createdAt: t0))
            }
            #expect(try await store.activity(app: testApp, key: "final")?.channelIDs == channels)
            let seen = try await store.change("final", body: "goal", at: t0 + 60)
            #expect(Dictionary(uniqueKeysWithValues: seen.channels.map { ($0.environment, $0.channelID) }) == channels)
            try await store.change("final", event: .end, body: "full time", at: t0 + 120, channelDeleteAfter: t0 + 120)
            #expect(Set(try await store.channelsToDelete(at: t0 + 120).map(\.channelID)) == ["chan-s", "chan-p"])
        }
    }

    // MARK: Schedules

    @Test(arguments: StoreKind.allCases) func aContractIsKeptPerAppAndTypeAsGivenAndReplacedWhole(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let first = try JSONValue(parsing: #"{"name": "DeliveryAttributes", "attributes": {"b": "Int", "a": "String"}, "contentState": {}}"#)
            try await store.saveContract(ContractRecord(bundleID: "com.a", attributesType: "DeliveryAttributes", contract: first, updatedAt: t0))
            try await store.saveContract(ContractRecord(bundleID: "com.b", attributesType: "DeliveryAttributes", contract: first, updatedAt: t0))
            #expect(try await store.contracts().map(\.bundleID) == ["com.a", "com.b"])
            // Field order is kept: it is the struct's declaration order.
            #expect(try await store.contracts().first?.contract.serializedString == first.serializedString)
            let second = try JSONValue(parsing: #"{"name": "DeliveryAttributes", "attributes": {}, "contentState": {"eta": "Int"}}"#)
            try await store.saveContract(ContractRecord(bundleID: "com.a", attributesType: "DeliveryAttributes", contract: second, updatedAt: t0 + 5))
            let replaced = try #require(try await store.contracts().first { $0.bundleID == "com.a" })
            #expect(replaced == ContractRecord(bundleID: "com.a", attributesType: "DeliveryAttributes", contract: second, updatedAt: t0 + 5))
            #expect(try await store.contracts().count == 2)
        }
    }

    /// Each app version keeps its own contract; a device's tokens carry the version its app last
    /// said, whichever report said it, and a change reads them with their versions.
    @Test(arguments: StoreKind.allCases) func aContractIsKeptPerAppVersionAndTokensCarryTheirDevicesVersion(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let one = try JSONValue(parsing: #"{"attributes": {}, "contentState": {"eta": "Int"}}"#)
            let two = try JSONValue(parsing: #"{"attributes": {}, "contentState": {"eta": "Int?"}}"#)
            for (version, contract) in [("", one), ("1.0 (1)", one), ("2.0 (7)", two)] {
                try await store.saveContract(
                    ContractRecord(bundleID: testApp, attributesType: deliveryType, appVersion: version, contract: contract, updatedAt: t0))
            }
            try await store.saveContract(
                ContractRecord(bundleID: testApp, attributesType: deliveryType, appVersion: "2.0 (7)", contract: two, updatedAt: t0 + 1, pinned: true)
            )
            let kept = try await store.contracts()
            #expect(kept.map(\.appVersion) == ["", "1.0 (1)", "2.0 (7)"])
            #expect(
                kept.last
                    == ContractRecord(
                        bundleID: testApp, attributesType: deliveryType, appVersion: "2.0 (7)", contract: two, updatedAt: t0 + 1, pinned: true))
            #expect(try await store.deleteContract(app: testApp, attributesType: deliveryType, appVersion: "1.0 (1)"))
            #expect(try await store.deleteContract(app: testApp, attributesType: deliveryType, appVersion: "1.0 (1)") == false)
            #expect(try await store.contracts().map(\.appVersion) == ["", "2.0 (7)"])

            var token = activityToken("order-1", "iphone-1")
            token.appVersion = "1.0 (1)"
            _ = try await store.saveActivityToken(token, attributesType: deliveryType)
            _ = try await store.saveActivityToken(activityToken("order-1", "iphone-2"), attributesType: deliveryType)
            // The app on iphone-1 was updated, and its next report says so: its live tokens follow.
            var started = pushToStart("iphone-1")
            started.appVersion = "2.0 (7)"
            try await store.savePushToStartToken(started)
            #expect(try await store.pushToStartTokens(deviceID: "iphone-1").map(\.appVersion) == ["2.0 (7)"])
            #expect(try await store.activityTokens(app: testApp, key: "order-1").map(\.appVersion) == ["2.0 (7)", nil])
            // `listed`: the live tokens with their versions, and no budget counted.
            struct Refused: Error {}
            let seen = Mutex<[[String?]]>([])
            await #expect(throws: Refused.self) {
                try await store.acceptChange(app: testApp, key: "order-1", budget: .listed, context: WriteContext()) {
                    snapshot -> (ChangePlan, Void) in
                    seen.withLock { $0.append(snapshot.liveTokens.map(\.appVersion)) }
                    #expect(snapshot.priority10Counts.isEmpty && snapshot.liveTokenCount == 2)
                    throw Refused()
                }
            }
            #expect(seen.withLock { $0 }.last == ["2.0 (7)", nil])
        }
    }

    @Test(arguments: StoreKind.allCases) func schedulesComeDueRunOnceAndCancelOnce(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.savePushToStartToken(pushToStart("iphone-1"))
            let request = try JSONValue(parsing: #"{"alert": {"title": "Kick-off"}}"#)
            for (id, due) in [("s1", t0 + 60), ("s2", t0 + 120), ("s3", t0 + 180)] {
                try await store.insertSchedule(
                    ScheduleRecord(id: id, bundleID: testApp, key: "match-\(id)", action: .start, request: request, dueAt: due, createdAt: t0),
                    context: WriteContext())
            }
            #expect(try await store.dueSchedules(at: t0 + 59, limit: 10).isEmpty)
            #expect(try await store.dueSchedules(at: t0 + 120, limit: 10).map(\.id) == ["s1", "s2"])
            #expect(try await store.schedule(id: "s1")?.request == request)

            // Running one is part of its write: it is done with it, and cannot run twice.
            try await store.start("match-s1", at: t0 + 60, context: WriteContext(scheduleID: "s1"))
            #expect(try await store.schedule(id: "s1")?.state == .done)
            #expect(try await store.schedule(id: "s1")?.result == .accepted(acceptance("match-s1", .start)))
            await #expect(throws: StoreError.self) {
                try await store.start("match-s1-again", at: t0 + 61, context: WriteContext(scheduleID: "s1"))
            }
            #expect(try await store.activity(app: testApp, key: "match-s1-again") == nil)

            #expect(try await store.cancelSchedule(id: "s2", at: t0 + 90)?.state == .cancelled)
            await #expect(throws: StoreError(.scheduleNotPending, "schedule s2 is cancelled, not pending")) {
                try await store.cancelSchedule(id: "s2", at: t0 + 91)
            }
            #expect(try await store.cancelSchedule(id: "nope", at: t0 + 91) == nil)
            try await store.failSchedule(id: "s3", reason: "no activity key")
            #expect(try await store.schedule(id: "s3")?.state == .failed)
            #expect(try await store.schedule(id: "s3")?.result == .failed("no activity key"))
            #expect(try await store.dueSchedules(at: t0 + 1000, limit: 10).isEmpty)
            #expect(try await store.schedules(app: testApp, key: "match-s2").map(\.id) == ["s2"])
            #expect(try await store.schedules(app: nil, key: nil).count == 3)
        }
    }
}
