import Foundation
import GRDB
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import Synchronization
import Testing

/// A store implementation under contract: how to make an empty one, and how to open the same
/// data again (a restart). Every engine passes the same tests.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case sqlite
    /// On a real server (`TestPostgres`), in a schema of its own.
    case postgres

    var testDescription: String { rawValue }

    /// Whether several instances share the store: a starting one then leaves claims standing.
    var isShared: Bool { self == .postgres }

    /// The engines under test: PostgreSQL when there is a server, or in CI, where its absence fails
    /// each of its tests (`PostgresAvailabilityTests` says so once, loudly, elsewhere).
    static let allCases: [StoreKind] = TestPostgres.isAvailable || TestPostgres.isCI ? [.sqlite, .postgres] : [.sqlite]

    /// Runs `body` with a fresh, migrated store, which runs for as long as `body` does, holding
    /// one of the `TestSlots`.
    func withStore(_ body: (StoreUnderTest) async throws -> Void) async throws {
        try await TestSlots.holding { try await withFreshStore(body) }
    }

    private func withFreshStore(_ body: (StoreUnderTest) async throws -> Void) async throws {
        switch self {
        case .sqlite:
            let path = TestFiles.path("store", pathExtension: "sqlite")
            let store = try await SQLiteStore.open(path: path)
            let applied = try await store.migrate()
            try await body(
                StoreUnderTest(
                    store: store, firstMigrations: applied, open: { try await SQLiteStore.open(path: path) },
                    execute: { sql in try await DatabaseQueue(path: path).write { try $0.execute(sql: sql) } }))
        case .postgres:
            let url = try await TestPostgres.freshDatabase()
            let store = try PostgresStore(url: url, maximumConnections: 4)
            try await store.running {
                let applied = try await store.migrate()
                try await body(
                    StoreUnderTest(
                        store: store, firstMigrations: applied, open: { try PostgresStore(url: url, maximumConnections: 4) },
                        execute: { sql in try await TestPostgres.psql(url, sql) }))
            }
        }
    }
}

struct StoreUnderTest {
    let store: any RelayStore
    /// What the first `migrate()` applied.
    let firstMigrations: [String]
    /// Another store on the same data.
    let open: () async throws -> any RelayStore
    /// Runs SQL on the store's data from outside the store, as another release or a person would.
    let execute: (String) async throws -> Void

    /// Runs `body` with the data opened again, as a restart or a second instance would. (A closure
    /// of `#expect`s only must say `async throws`: a `try` inside a macro does not make it throw.)
    func reopened(_ body: (any RelayStore) async throws -> Void) async throws {
        let store = try await open()
        try await store.running { try await body(store) }
    }
}

let t0 = Date(timeIntervalSince1970: 1_800_000_000)
let deliveryType = "DeliveryAttributes"
/// The app the tests' keys, tokens and pushes belong to unless they say otherwise.
let testApp = "com.example.app"

func pushToStart(
    _ device: String, user: String? = nil, token: String? = nil, environment: PushEnvironment = .sandbox, at: Date = t0,
    app: String = testApp
) -> PushToStartTokenRecord {
    PushToStartTokenRecord(
        bundleID: app, deviceID: device, attributesType: deliveryType, userID: user, token: token ?? "p2s-\(device)", frequentPushesEnabled: false,
        environment: environment, updatedAt: at)
}

func activityToken(
    _ key: String, _ device: String, token: String? = nil, environment: PushEnvironment = .sandbox, at: Date = t0, app: String = testApp
) -> ActivityTokenRecord {
    ActivityTokenRecord(
        bundleID: app, key: key, deviceID: device, token: token ?? "tok-\(key)-\(device)", frequentPushesEnabled: false, environment: environment,
        registeredAt: at)
}

/// What a plan's request did, kept with its write: named by its key and action.
func acceptance(_ key: String, _ action: LiveActivityPayload.Event = .update) -> Acceptance {
    Acceptance(key: key, action: action, requestID: "\(action.rawValue)-\(key)", timestamp: 1_800_000_000, deliveries: 1, state: .active)
}

extension RelayStore {
    /// Registers an update token for `key` on each device.
    func registerActivity(_ key: String, on devices: [String]) async throws {
        for device in devices { try await saveActivityToken(activityToken(key, device), attributesType: deliveryType) }
    }

    /// Starts `key` for `audience`, pushing `payload` to each push-to-start token the store hands the plan.
    @discardableResult
    func start(
        _ key: String, audience: Audience = .everyone, at: Date = t0, context: WriteContext = WriteContext(), app: String = testApp,
        seen: (@Sendable ([PushToStartTokenRecord]) -> Void)? = nil
    ) async throws -> Accepted<Void> {
        try await acceptStart(app: app, key: key, attributesType: deliveryType, audience: audience, context: context) { tokens in
            seen?(tokens)
            let plan = StartPlan(
                acceptedAt: at,
                activity: ActivityRecord(
                    bundleID: app, key: key, attributesType: deliveryType, startedAt: at, lastTimestamp: Int64(at.timeIntervalSince1970)),
                payloads: [Array("start \(key)".utf8)],
                deliveries: tokens.map {
                    NewDelivery(
                        bundleID: app, key: key, event: .start, target: .pushToStartToken(deviceID: $0.deviceID, token: $0.token),
                        environment: $0.environment, payloadIndex: 0,
                        priority: .immediate, priorityReason: "requested", expiration: nil, timestamp: Int64(at.timeIntervalSince1970),
                        requestID: "start-\(key)")
                },
                acceptance: acceptance(key, .start))
            return (plan, ())
        }
    }

    /// Updates (or ends) `key` with one push per live token at `priority`; returns the snapshot the
    /// plan saw (with the priority-10 counts of the last hour when `countingBudget`), and puts the
    /// pushes the store claimed for a hand-over in `claimed`.
    @discardableResult
    func change(
        _ key: String, event: LiveActivityPayload.Event = .update, body: String, at: Date, priority: APNsPriority = .immediate,
        context: WriteContext = WriteContext(),
        channelDeleteAfter: Date? = nil, countingBudget: Bool = true, claimed: Seen<[DeliveryRecord]>? = nil, app: String = testApp
    ) async throws -> ChangeSnapshot {
        let seen = Seen<ChangeSnapshot?>(nil)
        let accepted = try await acceptChange(
            app: app, key: key, budget: countingBudget ? .perDevice(windowStart: at - 3600) : .notCounted, context: context
        ) { snapshot in
            seen.set(snapshot)
            guard var activity = snapshot.activity else { throw StoreError(.keyEnded, "no key") }
            activity.lastTimestamp = max(Int64(at.timeIntervalSince1970), activity.lastTimestamp + 1)
            if event == .end {
                activity.state = .ended
                activity.endedAt = at
                activity.endReason = .ended
            }
            // Counting the budget, the plan names each token; otherwise the store writes the fan-out.
            let targets: [(DeliveryTarget, PushEnvironment)] =
                if !activity.channelIDs.isEmpty {
                    snapshot.channels.map { (.channel($0.channelID), $0.environment) }
                } else {
                    snapshot.liveTokens.map { (.activityToken(deviceID: $0.deviceID, token: $0.token), $0.environment) }
                }
            let fanOut =
                activity.channelIDs.isEmpty && !countingBudget
                ? NewPush(
                    bundleID: app, key: key, event: event, payloadIndex: 0, priority: priority, priorityReason: "requested", expiration: nil,
                    timestamp: activity.lastTimestamp, requestID: "\(event)-\(body)")
                : nil
            let plan = ChangePlan(
                acceptedAt: at, activity: activity, payload: Array(body.utf8),
                deliveries: targets.map {
                    NewDelivery(
                        bundleID: app, key: key, event: event, target: $0.0, environment: $0.1, payloadIndex: 0, priority: priority,
                        priorityReason: "requested",
                        expiration: nil, timestamp: activity.lastTimestamp, requestID: "\(event)-\(body)")
                },
                fanOut: fanOut, channelDeleteAfter: channelDeleteAfter, acceptance: acceptance(key, event))
            return (plan, ())
        }
        claimed?.set(accepted.claimed)
        return seen.value!
    }

    /// Claims everything due and records it sent.
    func sendEverythingDue(at date: Date) async throws {
        let claimed = try await claimDeliveries(dueBy: date, limit: 1000, leaseUntil: date + 60)
        try await recordOutcomes(claimed.map { ($0.id, .sent(status: 200, apnsID: nil)) }, at: date)
    }

    func statuses(key: String) async throws -> [String: DeliveryStatus] {
        var result: [String: DeliveryStatus] = [:]
        for delivery in try await deliveries(DeliveryQuery(key: key, limit: 1000)) {
            result[String(decoding: delivery.payload, as: UTF8.self) + "→" + delivery.target.name] = delivery.status
        }
        return result
    }
}

extension DeliveryTarget {
    var name: String {
        switch self {
        case .pushToStartToken(let device, _), .activityToken(let device, _): device
        case .channel(let id): "channel \(id)"
        }
    }
}

/// What a planner closure saw, read back after the transaction.
final class Seen<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ initial: Value) { stored = initial }
    func set(_ value: Value) { lock.withLock { stored = value } }
    var value: Value { lock.withLock { stored } }
}

/// The rules every `RelayStore` keeps. Each test would fail if its rule broke.
@Suite struct StoreContractTests {
    /// A row written by a newer release, or by hand, with a value this one has no meaning for: every
    /// read of it fails naming the column and the value, and nothing is read as a default (a
    /// priority 7 sent as 10, an unknown event as an update).
    @Test(arguments: StoreKind.allCases) func aValueThisReleaseCannotReadIsAnErrorNeverADefault(kind: StoreKind) async throws {
        try await kind.withStore { made in
            let store = made.store
            try await store.start("order-1", at: t0)
            try await store.registerActivity("order-1", on: ["iphone-1"])
            try await store.change("order-1", body: "on its way", at: t0 + 10)
            #expect(try await store.deliveries(DeliveryQuery(key: "order-1")).count == 1)
            for (sql, column, value) in [
                ("UPDATE deliveries SET priority = 7", "deliveries.priority", "7"),
                ("UPDATE deliveries SET event = 'pause'", "deliveries.event", "\"pause\""),
                ("UPDATE deliveries SET status = 'lost'", "deliveries.status", "\"lost\""),
                ("UPDATE deliveries SET environment = 'staging'", "deliveries.environment", "\"staging\""),
            ] {
                let rows = try await store.deliveries(DeliveryQuery(key: "order-1"))
                try await made.execute(sql)
                await #expect(throws: UnreadableStoreValue(column: column, value: value), "\(sql)") {
                    try await store.deliveries(DeliveryQuery(key: "order-1"))
                }
                // Put back as they were, so that the next column is the only one unreadable.
                for row in rows {
                    try await made.execute(
                        "UPDATE deliveries SET priority = \(row.priority.rawValue), event = '\(row.event.rawValue)', status = '\(row.status.rawValue)', "
                            + "environment = '\(row.environment.rawValue)' WHERE id = \(row.id)")
                }
                #expect(try await store.deliveries(DeliveryQuery(key: "order-1")) == rows)
            }
            try await made.execute("UPDATE activities SET state = 'ended', end_reason = 'reported'")
            await #expect(throws: UnreadableStoreValue(column: "activities.end_reason", value: "\"reported\"")) {
                try await store.activity(app: testApp, key: "order-1")
            }
            try await made.execute("UPDATE activity_tokens SET state = 'paused'")
            await #expect(throws: UnreadableStoreValue(column: "activity_tokens.state", value: "\"paused\"")) {
                try await store.activityTokens(app: testApp, key: "order-1")
            }
        }
    }

    // MARK: Migrations

    @Test(arguments: StoreKind.allCases) func migrationsAreNamedAppliedInOrderAndOnlyOnce(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            #expect(
                subject.firstMigrations == [
                    "0001-api-keys", "0002-registry", "0003-outbox", "0004-requests", "0005-budget-index", "0006-lighter-outbox", "0007-contracts",
                    "0008-environments", "0009-apps", "0010-leases", "0011-rate-buckets", "0012-dashboard", "0013-key-statistics",
                    "0014-typed-answers", "0015-reported-by", "0016-channel-listeners", "0017-events", "0018-webhooks", "0019-retention",
                    "0020-trace-context", "0021-device-ios", "0022-deliveries-by-key-newest", "0023-latest-state", "0024-grants", "0025-token-once",
                ])
            #expect(try await subject.store.migrate() == [])
            try await subject.reopened { reopened async throws in
                #expect(try await reopened.migrate() == [])
            }
        }
    }

    @Test(arguments: StoreKind.allCases) func committedDataSurvivesReopening(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            try await subject.store.savePushToStartToken(pushToStart("iphone-1"))
            try await subject.store.start("order-1")
            try await subject.reopened { reopened async throws in
                #expect(try await reopened.pushToStartTokens(deviceID: "iphone-1").map(\.token) == ["p2s-iphone-1"])
                #expect(try await reopened.activity(app: testApp, key: "order-1")?.state == .active)
                #expect(try await reopened.deliveries(DeliveryQuery(key: "order-1")).map(\.status) == [.queued])
            }
        }
    }

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
            #expect(snapshot.deviceTimestamp == Int64(t0.timeIntervalSince1970), "the device was sent only the start")
            #expect(snapshot.priority10Used == 0)
            #expect(saved.caughtUp?.push.event == .end)
            let pushes = try await store.deliveries(DeliveryQuery(bundleID: testApp, key: "order-1", limit: 50))
            #expect(pushes.filter { $0.requestID == "catch-up" }.map(\.status) == [.queued])
            #expect(try await store.activityTokens(app: testApp, key: "order-1").map(\.state) == [.ended, .ended])
            // Reported now, it is awaited no longer; a device sent its push since is not caught up again.
            let again = try await store.saveActivityToken(
                activityToken("order-1", "iphone-2", token: "rotated", at: t0 + 30), attributesType: deliveryType, catchUp: catchUp)
            #expect(seen.value?.deviceTimestamp == snapshot.activity.lastTimestamp)
            #expect(again.caughtUp != nil, "the plan decides; this one always catches up")
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

    // MARK: Accepting requests

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
            #expect(stored.answer == .typed(.accepted(acceptance("order-1", .start))))
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

    // MARK: The outbox

    @Test(arguments: StoreKind.allCases) func aClaimIsLeasedAndDueAgainWhenTheLeaseRunsOut(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2", "iphone-3"])
            try await store.change("match", body: "u1", at: t0)
            #expect(try await store.claimDeliveries(dueBy: t0 - 1, limit: 10, leaseUntil: t0 + 59).isEmpty)
            let first = try await store.claimDeliveries(dueBy: t0, limit: 2, leaseUntil: t0 + 60)
            #expect(first.map(\.target.name) == ["iphone-1", "iphone-2"])
            #expect(first.allSatisfy { $0.status == .sending && $0.payload == Array("u1".utf8) })
            let second = try await store.claimDeliveries(dueBy: t0 + 1, limit: 10, leaseUntil: t0 + 61)
            #expect(second.map(\.target.name) == ["iphone-3"])
            #expect(try await store.claimDeliveries(dueBy: t0 + 59, limit: 10, leaseUntil: t0 + 119).isEmpty)
            #expect(try await store.nextDueDate() == t0 + 60)
            // Whoever held them died: after the lease they are claimed again.
            let again = try await store.claimDeliveries(dueBy: t0 + 60, limit: 10, leaseUntil: t0 + 120)
            #expect(again.map(\.target.name) == ["iphone-1", "iphone-2"])
        }
    }

    // MARK: Several writers on the same data (two instances; in SQLite, two connections to one file)

    /// Claims taken at once by two stores never share a push, and together take every push.
    @Test(arguments: StoreKind.allCases) func twoWritersClaimDisjointPushes(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            try await subject.reopened { two async throws in
                let devices = (1...60).map { "iphone-\($0)" }
                try await one.registerActivity("match", on: devices)
                try await one.change("match", body: "u1", at: t0, countingBudget: false)
                let claims = try await withThrowingTaskGroup(of: [Int64].self) { group in
                    for (index, store) in [one, two, one, two, one, two].enumerated() {
                        group.addTask { try await store.claimDeliveries(dueBy: t0 + Double(index) / 10, limit: 7, leaseUntil: t0 + 60).map(\.id) }
                    }
                    var all: [[Int64]] = []
                    for try await claim in group { all.append(claim) }
                    return all
                }
                let claimed = claims.flatMap { $0 }
                #expect(claimed.count == 42)
                #expect(Set(claimed).count == claimed.count, "a push was claimed twice")
                let rest = try await two.claimDeliveries(dueBy: t0 + 1, limit: 100, leaseUntil: t0 + 60)
                #expect(Set(claimed).union(rest.map(\.id)).count == devices.count)
            }
        }
    }

    /// A lease is one holder's at a time: renewed by it, taken by another only once it ran out.
    @Test(arguments: StoreKind.allCases) func aLeaseHasOneHolderAtATime(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            try await subject.reopened { two async throws in
                #expect(try await one.takeLease("ticker", holder: "a", until: t0 + 10, at: t0))
                #expect(try await !two.takeLease("ticker", holder: "b", until: t0 + 11, at: t0 + 1))
                #expect(try await one.takeLease("ticker", holder: "a", until: t0 + 12, at: t0 + 2))
                #expect(try await !two.takeLease("ticker", holder: "b", until: t0 + 21, at: t0 + 11.9))
                // "a" died: once its lease ran out, "b" takes it, and "a" is then refused.
                #expect(try await two.takeLease("ticker", holder: "b", until: t0 + 22, at: t0 + 12))
                #expect(try await !one.takeLease("ticker", holder: "a", until: t0 + 23, at: t0 + 13))
                // Another lease is apart.
                #expect(try await one.takeLease("other", holder: "a", until: t0 + 23, at: t0 + 13))
            }
        }
    }

    /// A store several instances share tells each of them when another queued pushes; a store
    /// one process writes has no one else to hear from.
    @Test(arguments: StoreKind.allCases) func anInstanceHearsOfPushesAnotherQueued(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            try await subject.reopened { two async throws in
                let heard = Seen(0)
                let listening = Task { try await two.watchOutbox { heard.set(heard.value + 1) } }
                defer { listening.cancel() }
                guard kind.isShared else {
                    try await listening.value
                    return
                }
                try await one.registerActivity("match", on: ["iphone-1", "iphone-2"])
                // The listener is in place once a notification sent now reaches it: keep changing until one does.
                var round = 0
                while heard.value == 0 {
                    round += 1
                    try await one.change("match", body: "u\(round)", at: t0 + Double(round), countingBudget: false)
                    try await Task.sleep(for: .milliseconds(20))
                    #expect(round < 500, "no notification reached the listener")
                    if round >= 500 { return }
                }
                // Each later commit that queues pushes is heard.
                let before = heard.value
                try await one.change("match", body: "queued", at: t0 + 1000, countingBudget: false)
                try await eventually { heard.value > before }
            }
        }
    }

    /// Of two starts of one key at once, one is written and the other refused as taken.
    @Test(arguments: StoreKind.allCases) func twoWritersStartingOneKeyWriteItOnce(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            try await subject.reopened { two async throws in
                try await one.savePushToStartToken(pushToStart("iphone-1"))
                let results = await withTaskGroup(of: Bool.self) { group in
                    for store in [one, two, one, two] {
                        group.addTask {
                            do {
                                try await store.start("order-1", at: t0)
                                return true
                            } catch let error as StoreError {
                                return error.code == .keyExists ? false : true
                            } catch {
                                return true
                            }
                        }
                    }
                    return await group.reduce(into: [Bool]()) { $0.append($1) }
                }
                #expect(results.filter { $0 }.count == 1)
                #expect(try await two.deliveries(DeliveryQuery(key: "order-1")).count == 1)
            }
        }
    }

    /// Changes of one key from two writers are planned one after the other, each from what the
    /// one before wrote: none is lost, and the timestamps only grow.
    /// Planned token by token (counting the budget) or written as the store's own fan-out.
    @Test(arguments: StoreKind.allCases, [true, false])
    func twoWritersChangingOneKeyPlanOneAfterTheOther(kind: StoreKind, countingBudget: Bool) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            try await subject.reopened { two async throws in
                try await one.saveActivityToken(activityToken("match", "iphone-1"), attributesType: deliveryType)
                let seen = try await withThrowingTaskGroup(of: Int64.self) { group in
                    for index in 0..<8 {
                        let store = index.isMultiple(of: 2) ? one : two
                        group.addTask {
                            try await store.change("match", body: "u\(index)", at: t0, countingBudget: countingBudget).activity!.lastTimestamp
                        }
                    }
                    return try await group.reduce(into: [Int64]()) { $0.append($1) }
                }
                // Each change saw the timestamp the one before it wrote: eight different ones.
                #expect(Set(seen).count == 8)
                let last = try await two.activity(app: testApp, key: "match")!.lastTimestamp
                #expect(last == seen.max()! + 1)
                // The newest change supersedes the queued ones: one push is left to send.
                #expect(try await one.statuses(key: "match").values.filter { $0 == .queued }.count == 1)
            }
        }
    }

    @Test(arguments: StoreKind.allCases) func aHandedOverRequestWritesItsPushesClaimedUnlessTheyAreTooMany(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2", "iphone-3"])
            try await store.savePushToStartToken(pushToStart("iphone-1"))
            let handOver = WriteContext(handOver: HandOver(leaseUntil: t0 + 60, limit: 3))
            func isClaimed(_ records: [DeliveryRecord], _ body: String) -> Bool {
                records.allSatisfy { $0.status == .sending && $0.nextAttemptAt == t0 + 60 && $0.payload == Array(body.utf8) }
            }

            let started = try await store.start("order-1", at: t0, context: handOver)
            #expect(started.claimed.map(\.target.name) == ["iphone-1"] && isClaimed(started.claimed, "start order-1"))
            // Written by the store for each live token, or planned token by token: claimed either way.
            let fanOut = Seen<[DeliveryRecord]>([])
            let planned = Seen<[DeliveryRecord]>([])
            try await store.change("match", body: "u1", at: t0, context: handOver, countingBudget: false, claimed: fanOut)
            try await store.change("match", body: "u2", at: t0 + 1, context: handOver, claimed: planned)
            #expect(fanOut.value.map(\.target.name) == ["iphone-1", "iphone-2", "iphone-3"] && isClaimed(fanOut.value, "u1"))
            #expect(planned.value.map(\.target.name) == ["iphone-1", "iphone-2", "iphone-3"] && isClaimed(planned.value, "u2"))
            #expect(Set((started.claimed + fanOut.value + planned.value).map(\.id)).count == 7)
            // More pushes than the hand-over takes: all queued, none claimed.
            let tooMany = Seen<[DeliveryRecord]>([])
            try await store.change(
                "match", body: "u3", at: t0 + 2, context: WriteContext(handOver: HandOver(leaseUntil: t0 + 60, limit: 2)), claimed: tooMany)
            #expect(tooMany.value.isEmpty)
            // The claimed ones are in flight (a newer update does not supersede them): the dispatcher
            // claims only the queued ones, and the others only once their lease runs out.
            #expect(try await store.statuses(key: "match").filter { $0.value == .sending }.count == 6)
            #expect(
                try await store.claimDeliveries(dueBy: t0 + 59, limit: 10, leaseUntil: t0 + 119).map(\.payload)
                    == Array(repeating: Array("u3".utf8), count: 3))
            #expect(try await store.claimDeliveries(dueBy: t0 + 60, limit: 10, leaseUntil: t0 + 120).count == 7)
        }
    }

    /// A request's trace context goes with its payload: claimed later, handed over at once, written
    /// by the store as a fan-out or planned token by token; none without a tracer.
    @Test(arguments: StoreKind.allCases) func aRequestsTraceContextComesBackWithEachOfItsPushes(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2"])
            try await store.savePushToStartToken(pushToStart("iphone-1"))
            let trace = { (span: String) in "00-4bf92f3577b34da6a3ce929d0e0e4736-\(span)-01" }
            try await store.start("order-1", at: t0, context: WriteContext(traceParent: trace("00f067aa0ba902b7")))
            try await store.change("match", body: "u1", at: t0, context: WriteContext(traceParent: trace("00f067aa0ba902b8")), countingBudget: false)
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            let byBody = Dictionary(grouping: claimed) { String(decoding: $0.payload, as: UTF8.self) }.mapValues { Set($0.map(\.traceParent)) }
            #expect(byBody == ["start order-1": [trace("00f067aa0ba902b7")], "u1": [trace("00f067aa0ba902b8")]], "\(byBody)")
            try await store.change("match", body: "u2", at: t0 + 1, context: WriteContext(), countingBudget: true)
            let untraced = try await store.claimDeliveries(dueBy: t0 + 1, limit: 10, leaseUntil: t0 + 60)
            #expect(untraced.count == 2 && untraced.allSatisfy { $0.traceParent == nil })
            let handedOver = Seen<[DeliveryRecord]>([])
            try await store.change(
                "match", body: "u3", at: t0 + 2,
                context: WriteContext(handOver: HandOver(leaseUntil: t0 + 60, limit: 5), traceParent: trace("00f067aa0ba902b9")),
                claimed: handedOver)
            #expect(handedOver.value.count == 2 && handedOver.value.allSatisfy { $0.traceParent == trace("00f067aa0ba902b9") })
        }
    }

    /// Alone on its store, a starting server makes every push in flight due at once; beside other
    /// instances, their claims stand until the lease runs out.
    @Test(arguments: StoreKind.allCases) func releasingClaimsAtAStartDependsOnWhetherTheStoreIsShared(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("order-1", "iphone-1"), attributesType: deliveryType)
            try await store.change("order-1", body: "u1", at: t0)
            _ = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            try await store.releaseClaims(at: t0 + 5)
            let due = kind.isShared ? t0 + 60 : t0 + 5
            #expect(try await store.statuses(key: "order-1") == ["u1→iphone-1": kind.isShared ? .sending : .queued])
            #expect(try await store.nextDueDate() == due)
            #expect(try await store.claimDeliveries(dueBy: due - 1, limit: 10, leaseUntil: t0 + 65).isEmpty)
            #expect(try await store.claimDeliveries(dueBy: due, limit: 10, leaseUntil: t0 + 65).count == 1)
        }
    }

    /// A dispatcher gives back claimed pushes it fell too far behind to send: they are due at once,
    /// but one another instance claimed since (once the lease ran out) stays that instance's.
    @Test(arguments: StoreKind.allCases) func abandonedClaimsAreDueAgainButForThoseClaimedSince(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("order-1", on: ["iphone-1", "iphone-2"])
            try await store.change("order-1", body: "u1", at: t0)
            let first = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60.123)
            #expect(first.count == 2)
            // Its lease ran out; another instance claims one of the two.
            let other = try #require(try await store.claimDeliveries(dueBy: t0 + 61, limit: 1, leaseUntil: t0 + 121).first)
            let leasedUntil = try #require(first.first?.nextAttemptAt)
            try await store.abandonClaims(first.map(\.id), leasedUntil: leasedUntil, at: t0 + 62)
            let statuses = try await store.deliveries(DeliveryQuery(key: "order-1", limit: 10))
            #expect(statuses.first { $0.id == other.id }?.status == .sending)
            #expect(Set(statuses.filter { $0.status == .queued }.map(\.id)) == Set(first.map(\.id)).subtracting([other.id]))
            #expect(try await store.nextDueDate() == t0 + 62)
            #expect(try await store.claimDeliveries(dueBy: t0 + 62, limit: 10, leaseUntil: t0 + 122).count == 1)
        }
    }

    /// A second start would start a second activity on the device, and only the newer one's token
    /// would be kept: the first would stay on the Lock Screen, never updated or ended. So a
    /// push-to-start is not sent (again) once its device has reported an activity for the key:
    /// not after a restart that lost its answer, not as a retry, not while queued.
    @Test(arguments: StoreKind.allCases) func aStartIsNotSentAgainOnceItsDeviceReportedAnActivityForTheKey(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for device in ["iphone-1", "iphone-2", "iphone-3"] { try await store.savePushToStartToken(pushToStart(device)) }
            try await store.start("order-1")
            #expect(try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60).count == 3)

            // In flight when the process dies; iphone-1's start arrived and its app reported the activity.
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            #expect(try await store.statuses(key: "order-1")["start order-1→iphone-1"] == .sending)  // its outcome may still come
            try await store.releaseClaims(at: t0 + 5)
            if kind.isShared {
                // Beside other instances the claims stand until their lease runs out.
                #expect(try await store.statuses(key: "order-1").values.allSatisfy { $0 == .sending })
            } else {
                #expect(
                    try await store.statuses(key: "order-1") == [
                        "start order-1→iphone-1": .skipped, "start order-1→iphone-2": .queued, "start order-1→iphone-3": .queued,
                    ])
            }
            // Claimed again (after the lease, or once released), iphone-1's start is not sent: it arrived.
            let again = try await store.claimDeliveries(dueBy: t0 + 60, limit: 10, leaseUntil: t0 + 120)
            #expect(again.map(\.target.name).sorted() == ["iphone-2", "iphone-3"])
            #expect(try await store.statuses(key: "order-1")["start order-1→iphone-1"] == .skipped)
            let skipped = try #require(try await store.deliveries(DeliveryQuery(key: "order-1", status: .skipped)).first)
            #expect(skipped.apnsReason?.contains("the device has reported an activity for the key") == true)

            // A retry of a start whose device reports meanwhile is not sent either; nor a queued one.
            try await store.saveActivityToken(activityToken("order-1", "iphone-2", at: t0 + 61), attributesType: deliveryType)
            let iphone2 = try #require(again.first { $0.target.name == "iphone-2" })
            let iphone3 = try #require(again.first { $0.target.name == "iphone-3" })
            try await store.recordOutcomes(
                [
                    (iphone2.id, .retry(at: t0 + 70, status: nil, reason: "no answer")),
                    (iphone3.id, .retry(at: t0 + 70, status: nil, reason: "no answer")),
                ],
                at: t0 + 62)
            #expect(try await store.statuses(key: "order-1")["start order-1→iphone-2"] == .skipped)
            #expect(try await store.statuses(key: "order-1")["start order-1→iphone-3"] == .queued)
            try await store.saveActivityToken(activityToken("order-1", "iphone-3", at: t0 + 63), attributesType: deliveryType)
            #expect(try await store.statuses(key: "order-1")["start order-1→iphone-3"] == .skipped)
            #expect(try await store.claimDeliveries(dueBy: t0 + 70, limit: 10, leaseUntil: t0 + 130).isEmpty)
        }
    }

    /// A start claimed again once its lease ran out, whose device has reported the activity
    /// meanwhile, is withdrawn by the claim: it is not handed to the dispatcher.
    @Test(arguments: StoreKind.allCases) func aStartClaimedAgainAfterItsLeaseIsWithdrawnIfItArrived(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for device in ["iphone-1", "iphone-2"] { try await store.savePushToStartToken(pushToStart(device)) }
            try await store.start("order-1")
            #expect(try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60).count == 2)
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            // Its sender died: no answer, no restart of this store.
            let again = try await store.claimDeliveries(dueBy: t0 + 60, limit: 10, leaseUntil: t0 + 120)
            #expect(again.map(\.target.name) == ["iphone-2"])
            #expect(try await store.statuses(key: "order-1") == ["start order-1→iphone-1": .skipped, "start order-1→iphone-2": .sending])
        }
    }

    @Test(arguments: StoreKind.allCases) func outcomesAreRecordedOnTheDeliveryAndTheToken(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2", "iphone-3"])
            try await store.change("match", body: "u1", at: t0)
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            let ids = Dictionary(uniqueKeysWithValues: claimed.map { ($0.target.name, $0.id) })
            try await store.recordOutcomes(
                [
                    (ids["iphone-1"]!, .sent(status: 200, apnsID: "apns-1")),
                    (ids["iphone-2"]!, .retry(at: t0 + 2, status: 503, reason: "ServiceUnavailable")),
                    (ids["iphone-3"]!, .failed(status: 400, reason: "PayloadTooLarge", tokenIsDead: false)),
                ], at: t0 + 1)
            let byDevice = Dictionary(uniqueKeysWithValues: try await store.deliveries(DeliveryQuery(key: "match")).map { ($0.target.name, $0) })
            #expect(byDevice["iphone-1"]?.status == .sent)
            #expect(byDevice["iphone-1"]?.apnsID == "apns-1")
            #expect(byDevice["iphone-1"]?.attempts == 1)
            #expect(byDevice["iphone-2"]?.status == .queued)
            #expect(byDevice["iphone-2"]?.nextAttemptAt == t0 + 2)
            #expect(byDevice["iphone-2"]?.apnsReason == "ServiceUnavailable")
            #expect(byDevice["iphone-3"]?.status == .failed)
            #expect(byDevice["iphone-3"]?.finishedAt == t0 + 1)
            let tokens = Dictionary(uniqueKeysWithValues: try await store.activityTokens(app: testApp, key: "match").map { ($0.deviceID, $0) })
            #expect(tokens["iphone-1"]?.lastStatus == 200)
            #expect(tokens["iphone-2"]?.lastReason == "ServiceUnavailable")
            #expect(tokens["iphone-3"]?.state == .live)  // a bad payload says nothing about the token
            #expect(try await store.deliveryCounts() == [.sent: 1, .queued: 1, .failed: 1])

            // An outcome for a delivery no longer claimed (a late answer after a restart) changes nothing.
            try await store.recordOutcomes([(ids["iphone-1"]!, .failed(status: 500, reason: "InternalServerError", tokenIsDead: false))], at: t0 + 3)
            #expect(try await store.deliveries(DeliveryQuery(key: "match", status: .sent)).map(\.target.name) == ["iphone-1"])

            // The last result is the newest attempted delivery's: a queued one has none yet, and a
            // rotated token starts without one.
            try await store.change("match", body: "u2", at: t0 + 4)
            try await store.saveActivityToken(activityToken("match", "iphone-3", token: "rotated", at: t0 + 4), attributesType: deliveryType)
            let claimedAgain = try await store.claimDeliveries(dueBy: t0 + 4, limit: 10, leaseUntil: t0 + 64)
            let second = try #require(claimedAgain.first { $0.target.name == "iphone-1" })
            try await store.recordOutcomes([(second.id, .retry(at: t0 + 9, status: 429, reason: "TooManyRequests"))], at: t0 + 5)
            let later = Dictionary(uniqueKeysWithValues: try await store.activityTokens(app: testApp, key: "match").map { ($0.deviceID, $0) })
            #expect(later["iphone-1"]?.lastStatus == 429)
            #expect(later["iphone-1"]?.lastReason == "TooManyRequests")
            #expect(later["iphone-1"]?.lastDeliveryAt == t0 + 5)
            #expect(later["iphone-2"]?.lastStatus == 503)  // its u2 was claimed, not answered
            #expect(later["iphone-3"]?.lastStatus == nil)
            #expect(later["iphone-3"]?.lastDeliveryAt == nil)
        }
    }

    @Test(arguments: StoreKind.allCases) func aDeadTokenStopsAndItsQueuedPushesAreSkipped(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2"])
            try await store.change("match", body: "u1", at: t0)
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            try await store.change("match", body: "u2", at: t0 + 1)
            let toFirst = try #require(claimed.first { $0.target.name == "iphone-1" })
            try await store.recordOutcomes([(toFirst.id, .failed(status: 410, reason: "Unregistered", tokenIsDead: true))], at: t0 + 2)
            let statuses = try await store.statuses(key: "match")
            #expect(statuses["u1→iphone-1"] == .failed)
            #expect(statuses["u2→iphone-1"] == .skipped)
            #expect(statuses["u2→iphone-2"] == .queued)
            let tokens = try await store.activityTokens(app: testApp, key: "match")
            #expect(tokens.map(\.state) == [.dead, .live])
            #expect(tokens.first?.stateReason == "Unregistered")
            // The next change leaves the dead token out.
            #expect(try await store.change("match", body: "u3", at: t0 + 3).liveTokens.map(\.deviceID) == ["iphone-2"])
        }
    }

    @Test(arguments: StoreKind.allCases) func deliveriesAreListedNewestFirstByKeyStatusAndPage(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("a", "iphone-1"), attributesType: deliveryType)
            try await store.saveActivityToken(activityToken("b", "iphone-1"), attributesType: deliveryType)
            for step in 1...3 {
                try await store.change("a", body: "a\(step)", at: t0 + Double(step))
                try await store.change("b", body: "b\(step)", at: t0 + Double(step))
            }
            let all = try await store.deliveries(DeliveryQuery(limit: 100))
            #expect(all.map { String(decoding: $0.payload, as: UTF8.self) } == ["b3", "a3", "b2", "a2", "b1", "a1"])
            let page = try await store.deliveries(DeliveryQuery(key: "a", limit: 2))
            #expect(page.map { String(decoding: $0.payload, as: UTF8.self) } == ["a3", "a2"])
            let next = try await store.deliveries(DeliveryQuery(key: "a", before: page.last!.id, limit: 2))
            #expect(next.map { String(decoding: $0.payload, as: UTF8.self) } == ["a1"])
            #expect(try await store.deliveries(DeliveryQuery(status: .superseded)).count == 4)
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
}
