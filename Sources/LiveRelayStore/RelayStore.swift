import Foundation
import LiveActivityKit

/// Everything the server keeps. Each method is one transaction; the writes that accept a request
/// take a plan from the service, made from what the transaction read, so that the request, its
/// pushes in the outbox and its idempotency record are stored together or not at all.
///
/// Every implementation passes the same contract suite (`LiveRelayStoreTests`).
package protocol RelayStore: RegistryStore, AcceptingStore, OutboxStore, SessionAndLeaseStore, WebhookStore, RetentionStore {
    /// Applies the named migrations not applied yet, in order; returns the names applied now.
    @discardableResult
    func migrate() async throws -> [String]
    /// Runs what the store needs beside its statements (PostgreSQL's connection pool) until the
    /// task is cancelled, calling `started` once statements can be served. Use `running(_:)`.
    func run(started: @Sendable () -> Void) async
    /// The statements run since the store opened (`StatementCount`).
    var statementsRun: Int { get }
}

/// What apps and the operator register, and what the server knows of keys and tokens: apps, API
/// keys, tokens, contracts, channels, and the activities under their keys.
package protocol RegistryStore: Sendable {
    // MARK: Apps

    /// Registers apps or replaces their credentials, all in one transaction (a master key's
    /// rotation re-seals every app's key at once, or none).
    func saveApps(_ apps: [AppRecord]) async throws
    func apps() async throws -> [AppRecord]
    /// Gives `bundleID` what a store made before apps holds (migrated unnamed): its keys, tokens,
    /// activities, channels, schedules and pushes. Returns whether there was any.
    @discardableResult
    func adoptUnnamedData(bundleID: String) async throws -> Bool

    // MARK: API keys

    func insertAPIKey(_ key: APIKeyRecord) async throws
    func apiKey(secretHash: Data) async throws -> APIKeyRecord?
    func apiKeys() async throws -> [APIKeyRecord]
    /// Revokes the unrevoked key with this id, unless it is the last unrevoked admin key (nothing
    /// could make a new key then). Decided within the write, so two revocations cannot both pass.
    func revokeAPIKey(id: String, at: Date) async throws -> APIKeyRevocation

    // MARK: Registrations from apps

    /// Registers or replaces the device's push-to-start token for the type (and revives it).
    func savePushToStartToken(_ token: PushToStartTokenRecord) async throws
    /// Deletes the device's push-to-start tokens of the app; returns how many there were.
    func withdrawPushToStartTokens(app: String, deviceID: String) async throws -> Int
    /// Registers or replaces the device's update token under the key, creating the key (active,
    /// with `attributesType`) when an app started the activity itself, and queues the push
    /// `catchUp` plans, if any (written as an accepted change's pushes are). Under an ended key
    /// only a device the key knows (sent its start, or reported under it before) may report; its
    /// token is then ended once its catch-up is queued. Throws `keyEnded`.
    func saveActivityToken(_ token: ActivityTokenRecord, attributesType: String, catchUp: CatchUp?) async throws -> SavedActivityToken
    /// Whether the key knows the device: its start was sent to it, or it reported an update
    /// token or a channel listener under it.
    func deviceKnownToKey(app: String, key: String, deviceID: String) async throws -> Bool
    /// Records that the device's channel-bound activity under the key listens to its channel:
    /// the key must exist and not have ended (`keyEnded`).
    @discardableResult
    func saveChannelListener(_ listener: ChannelListenerRecord) async throws -> ActivityRecord
    /// Marks the device's activity under the key (its token, or its listening to the key's
    /// channel) ended or dismissed, with the device's word on who ended it (`cause`); false when
    /// the device reported none.
    func endActivityOnDevice(app: String, key: String, deviceID: String, state: ActivityTokenState, cause: String?, at: Date) async throws
        -> Bool
    /// Replaces the device's widget token or control tokens of the app (`type`) with `tokens`
    /// (none: withdrawn). A token another device of the app held is forgotten there: APNs routes
    /// it here now.
    func saveSurfaceTokens(app: String, deviceID: String, type: ReloadPushType, _ tokens: [SurfaceTokenRecord]) async throws
    /// The device's widget and control tokens, every app's.
    func surfaceTokens(deviceID: String) async throws -> [SurfaceTokenRecord]
    /// Reads the app's tokens of `type` that `audience` holds and each device's reloads of that
    /// type queued or sent since `since`, plans the reload from them, and writes its pushes (and
    /// its answer, under its idempotency key) in one transaction.
    func acceptReload<Outcome: Sendable>(
        app: String, type: ReloadPushType, audience: Audience, since: Date, context: WriteContext,
        plan: @Sendable (ReloadSnapshot) throws -> (ReloadPlan, Outcome)
    ) async throws -> Accepted<Outcome>

    // MARK: Keys and tokens

    func activity(app: String, key: String) async throws -> ActivityRecord?
    /// Which of `apps` have an activity under `key`, read at once: a key names its app for a
    /// server key of every app.
    func apps(holdingKey key: String, among apps: [String]) async throws -> [String]
    /// The tokens under the app's `key`, each with the result of its latest attempted delivery.
    func activityTokens(app: String, key: String) async throws -> [ActivityTokenRecord]
    /// The devices whose activity under the app's `key` listens to its channel.
    func channelListeners(app: String, key: String) async throws -> [ChannelListenerRecord]

    // MARK: Events

    /// A page of the event log, in order (`EventRecord.sequence`). Events written in the same
    /// transactions as their changes; each is read once it is committed and after every event
    /// before it.
    func events(_ query: EventQuery) async throws -> [EventRecord]
    /// Writes `activity.start_unconfirmed` for each push-to-start APNs accepted between the two
    /// dates whose device has reported no activity under its key, once per key and device;
    /// returns how many.
    func recordUnconfirmedStarts(sentAfter: Date, sentBefore: Date, at now: Date) async throws -> Int
    func pushToStartTokens(deviceID: String) async throws -> [PushToStartTokenRecord]
    /// Ends every active key started before `startedBefore` (`expired`), setting their channels
    /// to be deleted at `channelDeleteAfter`. Returns the keys ended.
    func expireActivities(startedBefore: Date, at: Date, channelDeleteAfter: Date) async throws -> [String]
    /// A benchmark's kept data: the app's activities started before `startedBefore`, active or
    /// ended at 8 hours, are active again and started `at`, with the tokens the 8 hours ended.
    /// Returns how many. (A day later, a kept directory would otherwise measure refusals.)
    func restartActivities(app: String, startedBefore: Date, at: Date) async throws -> Int
    /// Counts of live tokens, keys and channels, for metrics.
    func counts() async throws -> StoreCounts
    /// A page of activities, newest first, without their channels.
    func activities(_ query: ActivityQuery) async throws -> [ActivityRecord]

    // MARK: Contracts

    /// Registers or replaces the contract of an app version's attributes type.
    func saveContract(_ contract: ContractRecord) async throws
    /// Every app's contracts, by app, type and version.
    func contracts() async throws -> [ContractRecord]
    /// Forgets one version's contract of a type; false when there was none.
    func deleteContract(app: String, attributesType: String, appVersion: String) async throws -> Bool

    // MARK: Channels

    func saveChannel(_ channel: ChannelRecord) async throws
    func channels() async throws -> [ChannelRecord]
    func channel(id: String) async throws -> ChannelRecord?
    func channelsToDelete(at: Date) async throws -> [ChannelRecord]
    func markChannelDeleted(id: String, at: Date) async throws
}

/// The writes that accept a backend's request, with their pushes, idempotency keys and schedules.
package protocol AcceptingStore: Sendable {
    // MARK: Accepting requests

    /// The answer kept under an idempotency key, if any.
    func idempotentAnswer(apiKeyID: String, key: String) async throws -> IdempotentAnswer?
    /// The APNs environments of the audience's live push-to-start tokens for the type (where a
    /// channel-bound start needs a channel).
    func audienceEnvironments(app: String, attributesType: String, audience: Audience) async throws -> Set<PushEnvironment>
    /// Starts an app's key: reads the audience's live push-to-start tokens for the type, and stores the
    /// plan made from them. Throws `keyExists` when the key is taken.
    func acceptStart<Outcome: Sendable>(
        app: String, key: String, attributesType: String, audience: Audience, context: WriteContext,
        plan: @Sendable ([PushToStartTokenRecord]) throws -> (StartPlan, Outcome)
    ) async throws -> Accepted<Outcome>
    /// Updates or ends a key: stores the plan made from the key, its live tokens and their
    /// priority-10 counts as `budget` says (`ChangeBudget.notCounted`: the snapshot then holds only
    /// the number of live tokens, and the plan's `fanOut` goes to each). The change supersedes the key's pushes still queued. `plan` must be
    /// pure: a store may call it again when the key changed before the plan could be written.
    ///
    /// Both return the outcome the plan gave with it (what the service answers).
    ///
    /// With a hand-over in `context`, both write their pushes claimed (as `claimDeliveries` would)
    /// and return them when there are no more than its limit; otherwise they are queued.
    func acceptChange<Outcome: Sendable>(
        app: String, key: String, budget: ChangeBudget, context: WriteContext, plan: @Sendable (ChangeSnapshot) throws -> (ChangePlan, Outcome)
    ) async throws -> Accepted<Outcome>

    // MARK: Schedules

    /// Keeps the schedule, and the schedule as the answer to the write's idempotency key.
    func insertSchedule(_ schedule: ScheduleRecord, context: WriteContext) async throws
    func schedule(id: String) async throws -> ScheduleRecord?
    /// The schedules of an app (nil: every app), of one key if given.
    func schedules(app: String?, key: String?) async throws -> [ScheduleRecord]
    /// Cancels a pending schedule; throws `scheduleNotPending` when it ran or was cancelled.
    func cancelSchedule(id: String, at: Date) async throws -> ScheduleRecord?
    func dueSchedules(at: Date, limit: Int) async throws -> [ScheduleRecord]
    /// Records that a schedule could not run, and why.
    func failSchedule(id: String, reason: String) async throws
}

/// The outbox: claiming pushes, recording what became of them, and the history of every push.
package protocol OutboxStore: Sendable {
    // MARK: The outbox

    /// Claims up to `limit` due deliveries for sending until `leaseUntil`; a claim that gets no
    /// outcome (a crash) is due again after it.
    func claimDeliveries(dueBy now: Date, limit: Int, leaseUntil: Date) async throws -> [DeliveryRecord]
    /// A server starts: on a store it is the only writer of (SQLite), every claimed delivery is due
    /// at once, since no dispatcher holds a claim after a restart; on a store several instances
    /// share (PostgreSQL), claims stand, and a dead instance's come due when their lease runs out.
    /// Either way, starts whose activity has been reported are not sent again. Webhook deliveries'
    /// claims go the same way.
    func releaseClaims(at: Date) async throws
    /// Gives claimed deliveries back unsent (`OutboxTrigger.abandoned`): due again at `at`, but
    /// for those another instance claimed since.
    func abandonClaims(_ ids: [Int64], leasedUntil: Date, at: Date) async throws
    /// Records outcomes and what they mean for the tokens: dead ones stop.
    func recordOutcomes(_ outcomes: [(id: Int64, outcome: DeliveryOutcome)], at: Date) async throws
    /// When the next queued delivery is due, if any.
    func nextDueDate() async throws -> Date?
    func deliveries(_ query: DeliveryQuery) async throws -> [DeliveryRecord]
    /// Queues a failed push of the app (nil: any app) again beside it, unless `DeliveryRetry.refusal`
    /// says no (in the same transaction, so that two retries at once make one push).
    func retryDelivery(id: Int64, app: String?, at now: Date) async throws -> DeliveryRetry.Outcome
    /// How many deliveries of the whole history are in each state: a read of every row, for tests
    /// and benchmarks; what the server shows is `waitingAndUnsentCounts()`.
    func deliveryCounts() async throws -> [DeliveryStatus: Int]
    /// How many deliveries are in each state but `sent` (queued, sending, failed, superseded,
    /// skipped): read from the indexes of claimable and of unsent pushes, so its cost is theirs,
    /// not the history's. For `/metrics` and the dashboard, which a browser reads again at every
    /// change; those sent are counted as APNs answers them (`liverelay_pushes_total`).
    func waitingAndUnsentCounts() async throws -> [DeliveryStatus: Int]
    /// How many deliveries wait to be sent or are being sent: read from the index of claimable
    /// pushes, so its cost is that of the pushes waiting, not of the history.
    func pendingDeliveryCount() async throws -> Int
}

/// What instances share besides the data: dashboard sessions, leases, and the news that another
/// instance queued pushes.
package protocol SessionAndLeaseStore: Sendable {
    // MARK: Dashboard sessions

    /// Keeps a new session, and forgets those that have run out by its start.
    func insertDashboardSession(_ session: DashboardSessionRecord) async throws
    /// The session with this hash, unless it ran out by `now` or its key was revoked, and its key.
    func dashboardSession(idHash: Data, at now: Date) async throws -> (session: DashboardSessionRecord, key: APIKeyRecord)?
    func deleteDashboardSession(idHash: Data) async throws

    // MARK: Instances

    /// Takes the lease `name` for `holder` until `until`, or renews it: true when it is the
    /// holder's now (it was free, had run out at `now`, or was the holder's already). What one
    /// instance at a time does runs under one; when its holder dies, another takes it once it runs out.
    func takeLease(_ name: String, holder: String, until: Date, at now: Date) async throws -> Bool
    /// Calls `queued` whenever another process sharing the store has queued pushes, until cancelled.
    /// A store one process writes (SQLite) has no one else to hear from and returns at once.
    func watchOutbox(_ queued: @escaping @Sendable () -> Void) async throws
}

extension RelayStore {
    /// Runs `body` while the store runs in a child task, and stops the store when `body` ends: a
    /// scope, so no connection outlives its command, test or server. `serve` runs its whole
    /// service group inside it: the store is used before the group starts and must outlive it.
    package func running<Value>(_ body: () async throws -> Value) async throws -> Value {
        try await withThrowingTaskGroup(of: Void.self) { group in
            let (started, signal) = AsyncStream<Void>.makeStream()
            group.addTask { await self.run(started: { signal.finish() }) }
            for await _ in started {}
            defer { group.cancelAll() }
            return try await body()
        }
    }
}

extension RegistryStore {
    /// Saves the token without catching its device up: what tests of the registry alone need.
    @discardableResult
    package func saveActivityToken(_ token: ActivityTokenRecord, attributesType: String) async throws -> ActivityRecord {
        try await saveActivityToken(token, attributesType: attributesType, catchUp: nil).activity
    }
}

extension SessionAndLeaseStore {
    package func watchOutbox(_ queued: @escaping @Sendable () -> Void) async throws {}
}

/// Sizes of what the store holds.
package struct StoreCounts: Sendable, Hashable {
    package var pushToStartTokens: Int
    package var liveActivityTokens: Int
    package var activeKeys: Int
    package var channels: Int

    package init(pushToStartTokens: Int, liveActivityTokens: Int, activeKeys: Int, channels: Int) {
        self.pushToStartTokens = pushToStartTokens
        self.liveActivityTokens = liveActivityTokens
        self.activeKeys = activeKeys
        self.channels = channels
    }
}

/// The endpoints, and each event's delivery to each endpoint that wants it: queued from the
/// event log in its order, posted in order per key, retried, and kept as the endpoint's history.
package protocol WebhookStore: Sendable {
    /// Keeps a new endpoint, unless its app has `limit` already (false then): it is sent the events
    /// written from now on. The count and the insert are one step: of creations at once, no more
    /// than the limit are kept.
    func insertWebhookEndpoint(_ endpoint: WebhookEndpointRecord, limit: Int) async throws -> Bool
    /// Replaces an endpoint's address, description, types and state (never its secret); false
    /// when there is none with its id.
    func updateWebhookEndpoint(_ endpoint: WebhookEndpointRecord) async throws -> Bool
    /// Replaces endpoints' secrets as stored (sealed anew), in one transaction.
    func replaceWebhookSecrets(_ secrets: [(id: String, secret: String)]) async throws
    /// The endpoints of an app (nil: every app), oldest first.
    func webhookEndpoints(app: String?) async throws -> [WebhookEndpointRecord]
    func webhookEndpoint(id: String) async throws -> WebhookEndpointRecord?
    /// Deletes the endpoint and its deliveries; false when there was none.
    func deleteWebhookEndpoint(id: String) async throws -> Bool
    /// Writes `event` (a `webhook.test`) to the log, queued for this endpoint alone; returns its id.
    func recordTestEvent(_ event: NewEvent, endpointID: String, at: Date) async throws -> String
    /// Queues the event for the endpoint again, at once (its earlier attempts forgotten); false
    /// when the endpoint's app has no such event.
    func redeliverWebhookEvent(endpointID: String, eventID: String, at: Date) async throws -> Bool
    /// Queues the events written since the last call for every enabled endpoint that wants them,
    /// then claims up to `limit` due deliveries until `leaseUntil`: of each endpoint and key, only
    /// the oldest undelivered event (in order per key), and of each endpoint no more than brings
    /// its claims in flight to `perEndpoint`. A claim that gets no outcome (a crash) is
    /// due again after its lease.
    func claimWebhookDeliveries(dueBy now: Date, limit: Int, perEndpoint: Int, leaseUntil: Date) async throws -> [ClaimedWebhookDelivery]
    /// Records the outcomes and what they mean for their endpoints: one delivered clears its
    /// endpoint's failing; one failed starts it, and an endpoint failing since before
    /// `disableFailingSince` is disabled. Returns the endpoints disabled now.
    @discardableResult
    func recordWebhookOutcomes(_ outcomes: [(id: Int64, outcome: WebhookOutcome)], disableFailingSince: Date, at: Date) async throws
        -> [String]
    /// The endpoint's latest deliveries, the last attempted first.
    func webhookDeliveries(endpointID: String, limit: Int) async throws -> [WebhookDeliveryRecord]
}

extension WebhookStore {
    /// Tests: a claim with no limit per endpoint.
    package func claimWebhookDeliveries(dueBy now: Date, limit: Int, leaseUntil: Date) async throws -> [ClaimedWebhookDelivery] {
        try await claimWebhookDeliveries(dueBy: now, limit: limit, perEndpoint: Int(Int32.max), leaseUntil: leaseUntil)
    }
}

/// Deletes what is past its time (`PruneKind`).
package protocol RetentionStore: Sendable {
    /// Deletes at most `limit` rows of `kind` older than `cutoff`, in one transaction; the rows
    /// deleted, by table (a kind's dependents, payloads or tokens, are counted under their own).
    func prune(_ kind: PruneKind, before cutoff: Date, limit: Int) async throws -> [String: Int]
    /// How much the store holds: rows of the tables that grow, and its size on disk.
    func footprint() async throws -> StoreFootprint
}
