import Foundation
import GRDB
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import Synchronization
import Testing

/// `RegistryStore`'s contract, on every engine: keys, apps, tokens and listeners, the event log,
/// and keys that live past their time.
@Suite struct RegistryStoreContractTests {
    // MARK: API keys

    @Test(arguments: StoreKind.allCases) func apiKeysAreFoundByHashAndRevokedOnce(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let hash = Data(repeating: 7, count: 32)
            try await store.insertAPIKey(APIKeyRecord(id: "key-1", name: "backend", scope: .server, secretHash: hash, createdAt: t0))
            #expect(try await store.apiKey(secretHash: hash)?.scope == .server)
            #expect(try await store.apiKey(secretHash: Data(repeating: 8, count: 32)) == nil)
            #expect(try await store.revokeAPIKey(id: "key-1", at: t0 + 5) == .revoked)
            #expect(try await store.revokeAPIKey(id: "key-1", at: t0 + 6) == .notFound)
            #expect(try await store.revokeAPIKey(id: "no-such-key", at: t0) == .notFound)
            #expect(try await store.apiKey(secretHash: hash)?.revokedAt == t0 + 5)
            #expect(try await store.apiKeys().map(\.id) == ["key-1"])
        }
    }

    /// A server key of every app updating by key alone: the apps that hold the key are read at
    /// once, in the same statements whatever the number of apps (one read each took 5 statements
    /// and 150 µs a request with two apps).
    @Test(arguments: StoreKind.allCases) func theAppsHoldingAKeyAreReadAtOnce(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let (first, second, third) = ("com.example.first", "com.example.second", "com.example.third")
            try await store.start("both", app: first)
            try await store.start("both", app: second)
            try await store.start("one", app: second)
            let all = [first, second, third]
            #expect(try await store.apps(holdingKey: "both", among: all) == [first, second])
            #expect(try await store.apps(holdingKey: "one", among: all) == [second])
            #expect(try await store.apps(holdingKey: "one", among: [first, third]) == [])
            #expect(try await store.apps(holdingKey: "none", among: all) == [])
            #expect(try await store.apps(holdingKey: "both", among: []) == [])
            func statements(among apps: [String]) async throws -> Int {
                let before = store.statementsRun
                _ = try await store.apps(holdingKey: "one", among: apps)
                return store.statementsRun - before
            }
            #expect(try await statements(among: [first]) == statements(among: all))
        }
    }

    @Test(arguments: StoreKind.allCases) func theLastLiveAdminKeyCannotBeRevoked(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for id in ["admin-1", "admin-2"] {
                try await store.insertAPIKey(APIKeyRecord(id: id, name: id, scope: .admin, secretHash: Data(id.utf8), createdAt: t0))
            }
            try await store.insertAPIKey(APIKeyRecord(id: "server-1", name: "s", scope: .server, secretHash: Data("s".utf8), createdAt: t0))
            #expect(try await store.revokeAPIKey(id: "admin-1", at: t0 + 1) == .revoked)
            #expect(try await store.revokeAPIKey(id: "admin-2", at: t0 + 2) == .lastAdminKey)
            #expect(try await store.apiKey(secretHash: Data("admin-2".utf8))?.revokedAt == nil)
            // Other scopes have no such floor.
            #expect(try await store.revokeAPIKey(id: "server-1", at: t0 + 3) == .revoked)
            // Two revocations at once of the last two admin keys: one of them stays.
            try await store.insertAPIKey(APIKeyRecord(id: "admin-3", name: "a3", scope: .admin, secretHash: Data("a3".utf8), createdAt: t0))
            async let first = store.revokeAPIKey(id: "admin-2", at: t0 + 4)
            async let second = store.revokeAPIKey(id: "admin-3", at: t0 + 4)
            let results = [try await first, try await second]
            #expect(results.filter { $0 == .revoked }.count == 1)
            #expect(results.filter { $0 == .lastAdminKey }.count == 1)
            #expect(try await store.apiKeys().filter { $0.scope == .admin && $0.revokedAt == nil }.count == 1)
        }
    }

    // MARK: Registrations

    @Test(arguments: StoreKind.allCases) func aNewPushToStartTokenReplacesTheDevicesOldOneAndRevivesIt(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.savePushToStartToken(pushToStart("iphone-1", token: "old"))
            try await store.start("order-1")
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            try await store.recordOutcomes([(claimed[0].id, .failed(status: 410, reason: "Unregistered", tokenIsDead: true))], at: t0 + 1)
            #expect(try await store.pushToStartTokens(deviceID: "iphone-1").first?.deadReason == "Unregistered")

            var newer = pushToStart("iphone-1", token: "new", at: t0 + 10)
            newer.systemVersion = SystemVersion(17, 6, 1)
            try await store.savePushToStartToken(newer)
            let tokens = try await store.pushToStartTokens(deviceID: "iphone-1")
            #expect(tokens.map(\.token) == ["new"])
            #expect(tokens.first?.deadReason == nil)
            #expect(tokens.first?.systemVersion == SystemVersion(17, 6, 1), "the device's iOS, as its app reported it")
            // And as a start reads its audience's tokens.
            let seen = Mutex<[SystemVersion?]>([])
            _ = try await store.start("order-2", seen: { tokens in seen.withLock { $0 = tokens.map(\.systemVersion) } })
            #expect(seen.withLock { $0 } == [SystemVersion(17, 6, 1)])
            #expect(try await store.counts().pushToStartTokens == 1)
        }
    }

    /// Live Activities switched off on a device: its push-to-start tokens of that app go, every
    /// type; another device's and another app's on the same device stay.
    @Test(arguments: StoreKind.allCases) func withdrawingADevicesPushToStartTokensTakesOnlyThatAppsOnThatDevice(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            var other = pushToStart("iphone-1", token: "other-type")
            other.attributesType = "ScoreAttributes"
            for token in [
                pushToStart("iphone-1"), other, pushToStart("iphone-2"), pushToStart("iphone-1", token: "other-app", app: "com.example.other"),
            ] {
                try await store.savePushToStartToken(token)
            }
            #expect(try await store.withdrawPushToStartTokens(app: testApp, deviceID: "iphone-1") == 2)
            #expect(try await store.pushToStartTokens(deviceID: "iphone-1").map(\.token) == ["other-app"])
            #expect(try await store.pushToStartTokens(deviceID: "iphone-2").count == 1)
            #expect(try await store.withdrawPushToStartTokens(app: testApp, deviceID: "iphone-1") == 0)
        }
    }

    /// A device's widget token (with its widgets) and its control tokens are each replaced whole
    /// by the next report of their type, the other type untouched; none is a withdrawal; a token
    /// reported from another device of the app is forgotten where it was.
    @Test(arguments: StoreKind.allCases) func widgetAndControlTokensAreReplacedWholeByEachReport(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            func widgets(_ device: String, _ token: String, _ placed: [WidgetPlacement]) -> SurfaceTokenRecord {
                SurfaceTokenRecord(
                    bundleID: testApp, deviceID: device, pushType: .widgets, token: token, widgets: placed, environment: .sandbox, userID: "u1",
                    appVersion: "2.0 (7)", updatedAt: t0)
            }
            func control(_ device: String, _ kind: String, _ token: String) -> SurfaceTokenRecord {
                SurfaceTokenRecord(
                    bundleID: testApp, deviceID: device, pushType: .controls, kind: kind, token: token, environment: .production, updatedAt: t0)
            }
            let placed = [WidgetPlacement(kind: "score", family: "systemSmall"), WidgetPlacement(kind: "table", family: "systemMedium")]
            try await store.saveSurfaceTokens(app: testApp, deviceID: "iphone-1", type: .widgets, [widgets("iphone-1", "w1", placed)])
            try await store.saveSurfaceTokens(
                app: testApp, deviceID: "iphone-1", type: .controls, [control("iphone-1", "garage", "c1"), control("iphone-1", "lights", "c2")])
            #expect(
                try await store.surfaceTokens(deviceID: "iphone-1") == [
                    control("iphone-1", "garage", "c1"), control("iphone-1", "lights", "c2"), widgets("iphone-1", "w1", placed),
                ])
            // Rotation, and one control fewer.
            try await store.saveSurfaceTokens(app: testApp, deviceID: "iphone-1", type: .widgets, [widgets("iphone-1", "w2", [placed[0]])])
            try await store.saveSurfaceTokens(app: testApp, deviceID: "iphone-1", type: .controls, [control("iphone-1", "lights", "c3")])
            #expect(try await store.surfaceTokens(deviceID: "iphone-1").map(\.token) == ["c3", "w2"])
            #expect(try await store.surfaceTokens(deviceID: "iphone-1").last?.widgets == [placed[0]])
            // The same token reported from a new device id: kept once, there.
            try await store.saveSurfaceTokens(app: testApp, deviceID: "iphone-2", type: .widgets, [widgets("iphone-2", "w2", placed)])
            #expect(try await store.surfaceTokens(deviceID: "iphone-1").map(\.token) == ["c3"])
            // The last widget removed.
            try await store.saveSurfaceTokens(app: testApp, deviceID: "iphone-2", type: .widgets, [])
            #expect(try await store.surfaceTokens(deviceID: "iphone-2").isEmpty)
        }
    }

    /// An app that lost its device id reports its push-to-start token under a new one: the token
    /// is kept once, under the newest id, so a start reaches that iPhone once. Another app's
    /// token of the same value stays.
    @Test(arguments: StoreKind.allCases) func aPushToStartTokenIsKeptOncePerApp(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.savePushToStartToken(pushToStart("old-id", token: "same"))
            try await store.savePushToStartToken(pushToStart("old-id", token: "same", app: "com.example.other"))
            try await store.savePushToStartToken(pushToStart("new-id", token: "same", at: t0 + 60))
            #expect(try await store.pushToStartTokens(deviceID: "old-id").map(\.bundleID) == ["com.example.other"])
            #expect(try await store.pushToStartTokens(deviceID: "new-id").map(\.token) == ["same"])
        }
    }

    @Test(arguments: StoreKind.allCases) func anActivityTokenCreatesItsKeyAndReplacesTheDevicesOldToken(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let created = try await store.saveActivityToken(activityToken("order-1", "iphone-1", token: "first"), attributesType: deliveryType)
            #expect(created.state == .active)
            #expect(created.attributesType == deliveryType)
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", token: "rotated", at: t0 + 5), attributesType: deliveryType)
            try await store.saveActivityToken(activityToken("order-1", "iphone-2"), attributesType: deliveryType)
            let tokens = try await store.activityTokens(app: testApp, key: "order-1")
            #expect(tokens.map(\.token) == ["rotated", "tok-order-1-iphone-2"])
            #expect(tokens.allSatisfy { $0.state == .live })
        }
    }

    @Test(arguments: StoreKind.allCases) func anEndedKeyTakesATokenOnlyFromADeviceItKnows(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("order-1", "iphone-1"), attributesType: deliveryType)
            try await store.change("order-1", event: .end, body: "done", at: t0 + 10)
            await #expect(throws: StoreError(.keyEnded, "activity key \"order-1\" has ended, and its start was not sent to this device")) {
                try await store.saveActivityToken(activityToken("order-1", "iphone-2"), attributesType: deliveryType)
            }
            #expect(try await store.activityTokens(app: testApp, key: "order-1").map(\.state) == [.ended])
            // A device that reported before may report again (a rotated token): it stays ended.
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", token: "rotated", at: t0 + 20), attributesType: deliveryType)
            #expect(try await store.activityTokens(app: testApp, key: "order-1").map(\.state) == [.ended])
        }
    }

    /// A device sent the start reports its token after an update and an end: the change counted
    /// it as awaited, and its catch-up (planned from what the device was sent) is queued before
    /// its token ends.
    @Test(arguments: StoreKind.allCases) func aDeviceSentTheStartIsAwaitedAndCaughtUpWhenItReportsLate(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.savePushToStartToken(pushToStart("iphone-1"))
            try await store.savePushToStartToken(pushToStart("iphone-2"))
            try await store.start("order-1", at: t0)
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            let update = try await store.change("order-1", body: "on the way", at: t0 + 5)
            #expect(update.awaitingDevices == 1, "iphone-2 has not reported")
            let end = try await store.change("order-1", event: .end, body: "delivered", at: t0 + 10)
            #expect(end.awaitingDevices == 1)
            let seen = Seen<CatchUpSnapshot?>(nil)
            let catchUp = CatchUp(budgetWindowStart: t0 - 3600, context: WriteContext()) { snapshot in
                seen.set(snapshot)
                return CatchUpPlan(
                    payload: Array("caught up".utf8),
                    delivery: NewDelivery(
                        bundleID: testApp, key: "order-1", event: .end, target: .activityToken(deviceID: "iphone-2", token: "tok-order-1-iphone-2"),
                        environment: .sandbox, payloadIndex: 0, priority: .immediate, priorityReason: "caught up", expiration: nil,
                        timestamp: snapshot.activity.lastTimestamp, requestID: "catch-up"))
            }
            let saved = try await store.saveActivityToken(
                activityToken("order-1", "iphone-2", at: t0 + 20), attributesType: deliveryType, catchUp: catchUp)
            let snapshot = try #require(seen.value)
            #expect(snapshot.activity.state == .ended)
            #expect(!snapshot.sentLatest, "the device was sent only the start")
            #expect(snapshot.priority10Used == 0)
            #expect(saved.caughtUp?.push.event == .end)
            let pushes = try await store.deliveries(DeliveryQuery(bundleID: testApp, key: "order-1", limit: 50))
            #expect(pushes.filter { $0.requestID == "catch-up" }.map(\.status) == [.queued])
            #expect(try await store.activityTokens(app: testApp, key: "order-1").map(\.state) == [.ended, .ended])
            // Reported now, it is awaited no longer; a device sent its push since is not caught up again.
            let again = try await store.saveActivityToken(
                activityToken("order-1", "iphone-2", token: "rotated", at: t0 + 30), attributesType: deliveryType, catchUp: catchUp)
            #expect(seen.value?.sentLatest == true)
            #expect(seen.value?.priority10Used == 1, "its catch-up went at priority 10 and counts against its budget")
            #expect(again.caughtUp != nil, "the plan decides; this one always catches up")
        }
    }

    /// A late report's budget is the device's priority-10 pushes under the key in the window,
    /// read moment by moment (each change of the key at priority 10, then the device's push of it):
    /// neither another device's, nor one at 5, nor one before the window, nor one that failed.
    @Test(arguments: StoreKind.allCases) func aLateReportCountsItsDevicesPriority10PushesInTheWindow(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2"])
            // Each change sent before the next (a queued push is passed over by a newer one);
            // iphone-1's u3 failed for good: it reached nobody.
            let changes: [(body: String, at: Date, priority: APNsPriority)] = [
                ("before the window", t0 - 4000, .immediate), ("u1", t0 + 1, .immediate), ("u2", t0 + 2, .powerConsiderate),
                ("u3", t0 + 3, .immediate), ("u4", t0 + 4, .immediate),
            ]
            for change in changes {
                try await store.change("match", body: change.body, at: change.at, priority: change.priority)
                let claimed = try await store.claimDeliveries(dueBy: change.at, limit: 10, leaseUntil: change.at + 60)
                #expect(claimed.count == 2)
                try await store.recordOutcomes(
                    claimed.map { push in
                        let fails = change.body == "u3" && push.target.name == "iphone-1"
                        return (push.id, fails ? .failed(status: 400, reason: "BadPriority", tokenIsDead: false) : .sent(status: 200, apnsID: nil))
                    }, at: change.at)
            }
            let seen = Seen<CatchUpSnapshot?>(nil)
            let reading = CatchUp(budgetWindowStart: t0 - 3600, context: WriteContext()) { snapshot in
                seen.set(snapshot)
                return nil
            }
            _ = try await store.saveActivityToken(
                activityToken("match", "iphone-1", token: "rotated", at: t0 + 10), attributesType: deliveryType, catchUp: reading)
            #expect(seen.value?.priority10Used == 2, "u1 and u4")
            #expect(seen.value?.sentLatest == true, "u4 is its latest")
            _ = try await store.saveActivityToken(activityToken("match", "iphone-3", at: t0 + 11), attributesType: deliveryType, catchUp: reading)
            #expect(seen.value?.priority10Used == 0)
            #expect(seen.value?.sentLatest == false)
        }
    }

    /// A token's last result is its newest attempted push's: an answer to an older push that
    /// comes after a newer one's leaves it.
    @Test(arguments: StoreKind.allCases) func aTokensLastResultIsItsNewestAttemptedPushs(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1"])
            try await store.change("match", body: "u1", at: t0 + 1)
            let older = try await store.claimDeliveries(dueBy: t0 + 1, limit: 10, leaseUntil: t0 + 60)
            try await store.change("match", body: "u2", at: t0 + 2)
            let newer = try await store.claimDeliveries(dueBy: t0 + 2, limit: 10, leaseUntil: t0 + 60)
            #expect(older.count == 1 && newer.count == 1)
            try await store.recordOutcomes(newer.map { ($0.id, .sent(status: 200, apnsID: nil)) }, at: t0 + 3)
            try await store.recordOutcomes(older.map { ($0.id, .retry(at: t0 + 9, status: 429, reason: "TooManyRequests")) }, at: t0 + 4)
            let token = try #require(try await store.activityTokens(app: testApp, key: "match").first)
            #expect(token.lastStatus == 200)
            #expect(token.lastDeliveryAt == t0 + 3)
        }
    }

    @Test(arguments: StoreKind.allCases) func aDeviceReportSkipsItsQueuedPushesButNotOneInFlight(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("order-1", "iphone-1"), attributesType: deliveryType)
            try await store.change("order-1", body: "u1", at: t0 + 1)
            let inFlight = try await store.claimDeliveries(dueBy: t0 + 1, limit: 10, leaseUntil: t0 + 61)
            try await store.change("order-1", body: "u2", at: t0 + 2)

            #expect(
                try await store.endActivityOnDevice(app: testApp, key: "order-1", deviceID: "iphone-1", state: .dismissed, cause: nil, at: t0 + 3))
            #expect(
                try await store.endActivityOnDevice(app: testApp, key: "order-1", deviceID: "iphone-9", state: .dismissed, cause: nil, at: t0 + 3)
                    == false)
            #expect(try await store.statuses(key: "order-1") == ["u1→iphone-1": .sending, "u2→iphone-1": .skipped])
            // The push in flight still gets its outcome recorded.
            try await store.recordOutcomes([(inFlight[0].id, .sent(status: 200, apnsID: "a"))], at: t0 + 4)
            #expect(try await store.statuses(key: "order-1")["u1→iphone-1"] == .sent)
            #expect(try await store.activityTokens(app: testApp, key: "order-1").first?.state == .dismissed)
        }
    }

    /// A channel-bound activity has no token: the device's report that it listens is kept beside
    /// the tokens, ends as a token does, counts as the start's arrival, and an ended key takes none.
    @Test(arguments: StoreKind.allCases) func aDeviceListeningToTheKeysChannelIsKeptAndEndsAsATokenDoes(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for device in ["iphone-1", "iphone-2"] { try await store.savePushToStartToken(pushToStart(device)) }
            try await store.start("match")
            _ = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            func listener(_ device: String, at: Date) -> ChannelListenerRecord {
                ChannelListenerRecord(
                    bundleID: testApp, key: "match", deviceID: device, activityID: "act-\(device)", channelID: "chan-1", environment: .sandbox,
                    registeredAt: at, reportedBy: "LiveRelayKit 0.2.0")
            }
            #expect(try await store.saveChannelListener(listener("iphone-1", at: t0 + 1)).key == "match")
            #expect(try await store.channelListeners(app: testApp, key: "match") == [listener("iphone-1", at: t0 + 1)])
            #expect(try await store.activityTokens(app: testApp, key: "match").isEmpty)

            // Its start is not sent again once claimed again: it arrived.
            try await store.releaseClaims(at: t0 + 5)
            let again = try await store.claimDeliveries(dueBy: t0 + 60, limit: 10, leaseUntil: t0 + 120)
            #expect(again.map(\.target.name) == ["iphone-2"])
            #expect(try await store.statuses(key: "match")["start match→iphone-1"] == .skipped)

            #expect(
                try await store.endActivityOnDevice(app: testApp, key: "match", deviceID: "iphone-1", state: .dismissed, cause: "person", at: t0 + 6))
            let ended = try #require(try await store.channelListeners(app: testApp, key: "match").first)
            #expect(ended.state == .dismissed && ended.stateReason == "reported by the device (person)")
            // Listening again (the same device's new activity under the key) makes it live.
            try await store.saveChannelListener(listener("iphone-1", at: t0 + 7))
            #expect(try await store.channelListeners(app: testApp, key: "match").map(\.state) == [.live])

            try await store.change("match", event: .end, body: "full time", at: t0 + 10)
            await #expect(throws: StoreError(.keyEnded, "activity key \"match\" has ended")) {
                try await store.saveChannelListener(listener("iphone-2", at: t0 + 11))
            }
        }
    }

    // MARK: Events

    /// The log hears each device's start (not a token's rotation) and end, with its cause, and
    /// once when every device that had the activity has ended it; read in order, by page and filter.
    @Test(arguments: StoreKind.allCases) func theLogHearsEachDevicesStartAndEndAndWhenEveryDeviceEndedIt(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0), attributesType: deliveryType)
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", token: "rotated", at: t0 + 1), attributesType: deliveryType)
            try await store.saveActivityToken(
                activityToken("order-1", "iphone-2", environment: .production, at: t0 + 2), attributesType: deliveryType)
            _ = try await store.endActivityOnDevice(
                app: testApp, key: "order-1", deviceID: "iphone-1", state: .dismissed, cause: "person", at: t0 + 3)
            _ = try await store.endActivityOnDevice(app: testApp, key: "order-1", deviceID: "iphone-2", state: .ended, cause: "system", at: t0 + 4)
            _ = try await store.endActivityOnDevice(
                app: testApp, key: "order-1", deviceID: "iphone-2", state: .dismissed, cause: "system", at: t0 + 5)
            try await store.saveActivityToken(activityToken("order-2", "iphone-1", at: t0 + 6), attributesType: deliveryType)

            let events = try await store.events(EventQuery(bundleID: testApp))
            let seen = events.map { event in
                [event.type.rawValue, event.key, event.deviceID ?? "-", event.environment?.rawValue ?? "-", event.data.serializedString].joined(
                    separator: " ")
            }
            #expect(
                seen == [
                    #"activity.started order-1 iphone-1 sandbox {"via":"token"}"#,
                    #"activity.started order-1 iphone-2 production {"via":"token"}"#,
                    #"activity.ended order-1 iphone-1 - {"state":"dismissed","cause":"dismissed"}"#,
                    #"activity.ended order-1 iphone-2 - {"state":"ended","cause":"system"}"#,
                    #"activity.ended order-1 - - {"allDevices":true}"#,
                    #"activity.ended order-1 iphone-2 - {"state":"dismissed","cause":"system"}"#,
                    #"activity.started order-2 iphone-1 sandbox {"via":"token"}"#,
                ])
            #expect(events.map(\.occurredAt) == [t0, t0 + 2, t0 + 3, t0 + 4, t0 + 4, t0 + 5, t0 + 6])
            #expect(zip(events, events.dropFirst()).allSatisfy { $0.sequence < $1.sequence })
            #expect(Set(events.map(\.id)).count == events.count && events.allSatisfy { $0.id.hasPrefix("evt_") })

            // Read on from a place, a page at a time, by type, by key.
            let after = try await store.events(EventQuery(bundleID: testApp, after: events[1].sequence, limit: 2))
            #expect(after.map(\.id) == events[2..<4].map(\.id))
            #expect(try await store.events(EventQuery(bundleID: testApp, types: [.activityStarted])).count == 3)
            #expect(try await store.events(EventQuery(bundleID: testApp, key: "order-2")).map(\.id) == [events[6].id])
            #expect(try await store.events(EventQuery(bundleID: "com.example.other")).isEmpty)
        }
    }

    /// The backend ending a key, the eight hours, a dead token and a push failed for good: each
    /// an event, written with the change.
    @Test(arguments: StoreKind.allCases) func theLogHearsEndsByTheBackendAndTheSystemDeadTokensAndFailedPushes(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("order-1", on: ["iphone-1", "iphone-2"])
            try await store.change("order-1", body: "u1", at: t0 + 1)
            let claimed = try await store.claimDeliveries(dueBy: t0 + 1, limit: 10, leaseUntil: t0 + 60)
            #expect(claimed.count == 2)
            try await store.recordOutcomes(
                [
                    (claimed[0].id, .failed(status: 410, reason: "Unregistered", tokenIsDead: true)),
                    (claimed[1].id, .failed(status: 400, reason: "BadPriority", tokenIsDead: false)),
                ], at: t0 + 2)
            try await store.change("order-1", event: .end, body: "done", at: t0 + 3)
            try await store.start("order-2", at: t0)
            _ = try await store.expireActivities(startedBefore: t0 + 1, at: t0 + 8 * 3600, channelDeleteAfter: t0 + 9 * 3600)

            let events = try await store.events(EventQuery(bundleID: testApp, types: [.tokenInvalidated, .pushFailed, .activityEnded]))
            #expect(
                events.map { "\($0.type.rawValue) \($0.key) \($0.deviceID ?? "-")" } == [
                    "token.invalidated order-1 \(claimed[0].target.name)", "push.failed order-1 \(claimed[1].target.name)",
                    "activity.ended order-1 -", "activity.ended order-2 -",
                ])
            #expect(events[0].data["reason"] == .string("Unregistered") && events[0].data["token"] == .string("update"))
            #expect(events[1].data["deliveryID"] == .integer(claimed[1].id) && events[1].data["reason"] == .string("BadPriority"))
            #expect(events[1].data["action"] == .string("update") && events[1].environment == .sandbox)
            #expect(events[2].data["cause"] == .string("backend") && events[3].data["cause"] == .string("system"))
        }
    }

    /// A push-to-start APNs accepted whose device reported nothing is unconfirmed once the window
    /// passed, once per key and device; one whose device reported the activity is not.
    @Test(arguments: StoreKind.allCases) func aStartNoDeviceConfirmedIsUnconfirmedOnce(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for device in ["iphone-1", "iphone-2", "iphone-3"] { try await store.savePushToStartToken(pushToStart(device)) }
            try await store.start("order-1")
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            try await store.recordOutcomes(claimed.prefix(2).map { ($0.id, .sent(status: 200, apnsID: "apns-\($0.id)")) }, at: t0 + 1)
            // iphone-3's is still in flight; iphone-1 reports the activity.
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 2), attributesType: deliveryType)

            #expect(try await store.recordUnconfirmedStarts(sentAfter: t0 - 600, sentBefore: t0 + 0.5, at: t0 + 120.5) == 0)
            #expect(try await store.recordUnconfirmedStarts(sentAfter: t0 - 600, sentBefore: t0 + 1, at: t0 + 121) == 1)
            // Looked at again (a restart, another instance): not twice.
            #expect(try await store.recordUnconfirmedStarts(sentAfter: t0 - 600, sentBefore: t0 + 10, at: t0 + 130) == 0)
            let events = try await store.events(EventQuery(bundleID: testApp, types: [.activityStartUnconfirmed]))
            #expect(events.map(\.deviceID) == ["iphone-2"] && events.first?.environment == .sandbox)
            let sent = try #require(claimed.first { $0.target.name == "iphone-2" })
            #expect(events.first?.data["deliveryID"] == .integer(sent.id) && events.first?.data["apnsID"] == .string("apns-\(sent.id)"))
            #expect(events.first?.occurredAt == t0 + 121)
        }
    }

    @Test(arguments: StoreKind.allCases) func aListingWithoutPayloadsHasEverythingElse(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("order-1", "iphone-1"), attributesType: deliveryType)
            try await store.change("order-1", body: "u1", at: t0 + 1)
            try await store.change("order-1", body: "u2", at: t0 + 2)
            let full = try await store.deliveries(DeliveryQuery(key: "order-1"))
            let lean = try await store.deliveries(DeliveryQuery(key: "order-1", includePayloads: false))
            #expect(full.map(\.payload) == [Array("u2".utf8), Array("u1".utf8)])
            #expect(lean.allSatisfy { $0.payload.isEmpty })
            #expect(
                lean
                    == full.map {
                        var record = $0
                        record.payload = []
                        return record
                    })
        }
    }

    @Test(arguments: StoreKind.allCases) func aListedKeyCountsItsDevicesByTheirTokensState(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for device in ["iphone-1", "iphone-2", "iphone-3"] {
                try await store.saveActivityToken(activityToken("order-1", device), attributesType: deliveryType)
            }
            _ = try await store.endActivityOnDevice(app: testApp, key: "order-1", deviceID: "iphone-1", state: .dismissed, cause: nil, at: t0 + 1)
            _ = try await store.endActivityOnDevice(app: testApp, key: "order-1", deviceID: "iphone-2", state: .ended, cause: nil, at: t0 + 1)
            try await store.saveActivityToken(activityToken("order-2", "iphone-1"), attributesType: deliveryType)
            let listed = try await store.activities(ActivityQuery(bundleID: testApp))
            let devices = Dictionary(uniqueKeysWithValues: listed.map { ($0.key, $0.devices) })
            #expect(devices == ["order-1": ActivityDevices(live: 1, ended: 1, dismissed: 1), "order-2": ActivityDevices(live: 1)])
            #expect(devices["order-1"]??.reach == .live)
        }
    }

    // MARK: Apps

    @Test(arguments: StoreKind.allCases) func appsAreRegisteredTogetherAndTheirCredentialsReplacedWhole(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            let first = AppRecord(
                bundleID: "com.a", teamID: "TEAMA00001", keyID: "KEYA000001", sealedSigningKey: "sealed-1", createdAt: t0, updatedAt: t0)
            let second = AppRecord(
                bundleID: "com.b", teamID: "TEAMB00001", keyID: "KEYB000001", sealedSigningKey: "sealed-2", createdAt: t0, updatedAt: t0)
            try await store.saveApps([first, second])
            #expect(try await store.apps() == [first, second])
            var replaced = first
            (replaced.keyID, replaced.sealedSigningKey, replaced.updatedAt) = ("KEYA000002", "sealed-3", t0 + 60)
            try await store.saveApps([replaced])
            #expect(try await store.apps() == [replaced, second])
        }
    }

    @Test(arguments: StoreKind.allCases) func twoAppsKeepTheSameKeyAndDeviceApart(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for app in ["com.a", "com.b"] {
                try await store.savePushToStartToken(pushToStart("iphone-1", token: "p2s-\(app)", app: app))
                try await store.start("order-42", app: app)
                try await store.saveActivityToken(activityToken("order-42", "iphone-1", token: "tok-\(app)", app: app), attributesType: deliveryType)
            }
            #expect(try await store.pushToStartTokens(deviceID: "iphone-1").map(\.token) == ["p2s-com.a", "p2s-com.b"])
            #expect(try await store.activityTokens(app: "com.a", key: "order-42").map(\.token) == ["tok-com.a"])
            // An update and an end of one app's key leave the other's alone.
            try await store.change("order-42", body: "a-update", at: t0 + 1, app: "com.a")
            try await store.change("order-42", event: .end, body: "a-end", at: t0 + 2, app: "com.a")
            #expect(try await store.activity(app: "com.a", key: "order-42")?.state == .ended)
            #expect(try await store.activity(app: "com.b", key: "order-42")?.state == .active)
            #expect(try await store.activityTokens(app: "com.b", key: "order-42").map(\.state) == [.live])
            let pushes = try await store.deliveries(DeliveryQuery(bundleID: "com.a", limit: 10))
            #expect(Set(pushes.map(\.bundleID)) == ["com.a"])
            #expect(pushes.map { String(decoding: $0.payload, as: UTF8.self) } == ["a-end", "a-update", "start order-42"])
            #expect(try await store.deliveries(DeliveryQuery(bundleID: "com.b", limit: 10)).map(\.bundleID) == ["com.b"])
            #expect(try await store.audienceEnvironments(app: "com.c", attributesType: deliveryType, audience: .everyone).isEmpty)
        }
    }

    // MARK: Lifecycle

    @Test(arguments: StoreKind.allCases) func keysPastTheLimitExpireAndTheirQueuedPushesAreSkipped(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("old", "iphone-1", at: t0), attributesType: deliveryType)
            try await store.saveActivityToken(activityToken("new", "iphone-1", at: t0 + 3600), attributesType: deliveryType)
            try await store.change("old", body: "late news", at: t0 + 7 * 3600)
            let expired = try await store.expireActivities(startedBefore: t0 + 1800, at: t0 + 8 * 3600, channelDeleteAfter: t0 + 16 * 3600)
            #expect(expired == ["old"])
            let old = try await store.activity(app: testApp, key: "old")
            #expect(old?.state == .ended)
            #expect(old?.endReason == .expired)
            #expect(try await store.activityTokens(app: testApp, key: "old").map(\.state) == [.ended])
            #expect(try await store.statuses(key: "old") == ["late news→iphone-1": .skipped])
            #expect(try await store.activity(app: testApp, key: "new")?.state == .active)
            #expect(try await store.counts() == StoreCounts(pushToStartTokens: 0, liveActivityTokens: 1, activeKeys: 1, channels: 0))
            #expect(try await store.expireActivities(startedBefore: t0 + 1800, at: t0 + 9 * 3600, channelDeleteAfter: t0).isEmpty)
        }
    }

    @Test(arguments: StoreKind.allCases) func aBenchmarksKeptKeysStartAgainButNotOnesTheBackendEnded(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for key in ["old", "ended", "new"] {
                try await store.saveActivityToken(activityToken(key, "iphone-1", at: key == "new" ? t0 + 3600 : t0), attributesType: deliveryType)
            }
            try await store.change("ended", event: .end, body: "over", at: t0 + 60)
            _ = try await store.expireActivities(startedBefore: t0 + 1800, at: t0 + 8 * 3600, channelDeleteAfter: t0 + 16 * 3600)

            #expect(try await store.restartActivities(app: testApp, startedBefore: t0 + 1800, at: t0 + 9 * 3600) == 1)
            let old = try await store.activity(app: testApp, key: "old")
            #expect((old?.state, old?.startedAt, old?.endedAt, old?.endReason) == (.active, t0 + 9 * 3600, nil, nil))
            #expect(try await store.activityTokens(app: testApp, key: "old").map(\.state) == [.live])
            #expect(try await store.activity(app: testApp, key: "ended")?.endReason == .ended)
            #expect(try await store.activityTokens(app: testApp, key: "ended").map(\.state) == [.ended])
            #expect(try await store.activity(app: testApp, key: "new")?.startedAt == t0 + 3600)
            #expect(try await store.counts() == StoreCounts(pushToStartTokens: 0, liveActivityTokens: 2, activeKeys: 2, channels: 0))
        }
    }
}
