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
    /// Reloads the widgets of `audience` at `at`, one push per token the store hands the plan,
    /// counting each device's reloads since `since`; returns the snapshot the plan saw.
    @discardableResult
    func reloadWidgets(_ audience: Audience, at: Date, since: Date, app: String = testApp) async throws -> ReloadSnapshot {
        let seen = Seen<ReloadSnapshot?>(nil)
        _ = try await acceptReload(app: app, type: .widgets, audience: audience, since: since, context: WriteContext()) { snapshot in
            seen.set(snapshot)
            let deliveries = snapshot.tokens.map { token in
                NewDelivery(
                    bundleID: app, key: "", event: .reload, target: .surface(.widgets, deviceID: token.deviceID, token: token.token),
                    environment: token.environment, payloadIndex: 0, priority: .immediate, priorityReason: "requested", expiration: nil,
                    timestamp: Int64(at.timeIntervalSince1970), requestID: "reload")
            }
            let acceptance = ReloadAcceptance(pushType: .widgets, kinds: nil, requestID: "reload", deliveries: deliveries.count, heldBack: 0)
            return (ReloadPlan(acceptedAt: at, deliveries: deliveries, acceptance: acceptance), ())
        }
        return try #require(seen.value)
    }

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
        channelDeleteAfter: Date? = nil, countingBudget: Bool = true, claimed: Seen<[DeliveryRecord]>? = nil, app: String = testApp,
        exhausted: BudgetExhaustion? = nil
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
                    bundleID: app, key: key, event: DeliveryAction(event), payloadIndex: 0, priority: priority, priorityReason: "requested",
                    expiration: nil,
                    timestamp: activity.lastTimestamp, requestID: "\(event)-\(body)")
                : nil
            let plan = ChangePlan(
                acceptedAt: at, activity: activity, payload: Array(body.utf8),
                deliveries: targets.map {
                    NewDelivery(
                        bundleID: app, key: key, event: DeliveryAction(event), target: $0.0, environment: $0.1, payloadIndex: 0, priority: priority,
                        priorityReason: "requested",
                        expiration: nil, timestamp: activity.lastTimestamp, requestID: "\(event)-\(body)")
                },
                fanOut: fanOut, channelDeleteAfter: channelDeleteAfter, acceptance: acceptance(key, event), budgetExhausted: exhausted)
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
        case .pushToStartToken(let device, _), .activityToken(let device, _), .surface(_, let device, _): device
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

/// What every store promises, whatever its engine: reading what it wrote, its schema. The
/// contract of each store protocol is in its own suite beside this one.
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
                    "0026-app-versions", "0027-first-release", "0028-contract-environment", "0029-surface-tokens",
                    "0030-history-without-device-order", "0031-token-indexes", "0032-reloads-by-event",
                    "0033-unsent-pushes", "0034-rate-reservations",
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
}
