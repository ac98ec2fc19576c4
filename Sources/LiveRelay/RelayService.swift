import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// The service core: registrations from apps, starts, updates and ends from the backend, written
/// with their pushes to the outbox in one transaction; schedules, expiry and channel cleanup.
/// The dispatcher sends what this accepts.
public final class RelayService: Sendable {
    let store: any RelayStore
    public let configuration: RelayConfiguration
    /// The API's format of scheduled requests and kept answers.
    let wire: any RelayWireFormat
    public let metrics: RelayMetrics
    /// Sends, and creates and deletes broadcast channels, in each environment served; nil when no
    /// APNs is configured (tests of the API alone, which take tokens of both environments).
    let apns: APNsRoutes?
    let now: @Sendable () -> Date
    let logger: Logger
    /// Wakes the dispatcher when pushes are queued.
    let outboxSignal = OutboxSignal()
    /// Takes the pushes of small requests straight to the running dispatcher.
    let handOver = DispatchHandOver()
    private let governor: PriorityGovernor
    /// What the app's widget decodes, by attributes type: requests are checked against it.
    private let contractBook = ContractBook()
    /// Live keys recently looked up, by secret hash: most requests then skip a read. A revocation
    /// here clears it; one made by another process sharing the store takes effect within the TTL.
    private let keyCache = Mutex<[Data: (key: APIKeyRecord, until: ContinuousClock.Instant)]>([:])
    static let keyCacheTTL = Duration.seconds(5)

    /// The service over `store`, migrated first.
    public static func open(
        store: any RelayStore, configuration: RelayConfiguration, wire: any RelayWireFormat, apns: APNsRoutes?,
        now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "liverelay")
    ) async throws -> RelayService {
        let applied = try await store.migrate()
        if !applied.isEmpty { logger.info("migrations applied", metadata: ["names": "\(applied.joined(separator: ", "))"]) }
        return RelayService(store: store, configuration: configuration, wire: wire, apns: apns, now: now, logger: logger)
    }

    /// The service over a store already migrated.
    public init(
        store: any RelayStore, configuration: RelayConfiguration, wire: any RelayWireFormat, apns: APNsRoutes?,
        now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "liverelay")
    ) {
        self.store = store
        self.configuration = configuration
        self.wire = wire
        self.apns = apns
        self.now = now
        self.logger = logger
        self.metrics = RelayMetrics()
        self.governor = PriorityGovernor(policy: configuration.budget)
    }

    public var currentDate: Date { now() }

    /// The APNs environments whose tokens this server takes and sends to.
    public var environments: Set<PushEnvironment> { apns?.environments ?? Set(PushEnvironment.allCases) }

    // MARK: API keys

    /// Makes a key and returns its secret, which is shown once: only its hash is stored.
    public func createAPIKey(name: String, scope: APIKeyScope) async throws -> (record: APIKeyRecord, secret: String) {
        try await Self.createAPIKey(name: name, scope: scope, in: store, at: now())
    }

    /// The same without a running server: `liverelay keys create` recovers access this way.
    public static func createAPIKey(
        name: String, scope: APIKeyScope, in store: any RelayStore, at date: Date
    ) async throws -> (record: APIKeyRecord, secret: String) {
        let secret = "lr_\(scope.rawValue)_" + randomHex(bytes: 24)
        let record = APIKeyRecord(id: "key_" + randomHex(bytes: 8), name: name, scope: scope, secretHash: hash(secret), createdAt: date)
        try await store.insertAPIKey(record)
        return (record, secret)
    }

    /// The live key with this secret.
    public func authenticate(secret: String) async throws -> APIKeyRecord? {
        let hash = Self.hash(secret)
        let moment = ContinuousClock.now
        if let cached = keyCache.withLock({ $0[hash] }), cached.until > moment { return cached.key }
        guard let key = try await store.apiKey(secretHash: hash), key.revokedAt == nil else { return nil }
        keyCache.withLock { cache in
            if cache.count >= 10_000 { cache.removeAll() }  // bounded: live keys are few
            cache[hash] = (key, moment + Self.keyCacheTTL)
        }
        return key
    }

    /// Revokes a key at once. The last live admin key stays: without it nothing could make a key
    /// (`liverelay keys create` makes one offline).
    public func revokeAPIKey(id: String) async throws {
        switch try await store.revokeAPIKey(id: id, at: now()) {
        case .revoked:
            keyCache.withLock { cache in cache = cache.filter { $0.value.key.id != id } }
        case .notFound:
            throw RelayError.notFound("id", "no live API key \(id)")
        case .lastAdminKey:
            throw RelayError(
                .conflict, .lastAdminKey,
                message: "\(id) is the last live admin key; make another admin key first (POST /v1/api-keys, or `liverelay keys create --scope admin` on the server)",
                field: "id")
        }
    }

    public func apiKeys() async throws -> [APIKeyRecord] {
        try await store.apiKeys()
    }

    /// The answer kept under an idempotency key of an API key, if any.
    public func idempotentResponse(apiKeyID: String, key: String) async throws -> IdempotentResponse? {
        try await store.idempotentResponse(apiKeyID: apiKeyID, key: key)
    }

    static func hash(_ secret: String) -> Data { Data(SHA256.hash(data: Data(secret.utf8))) }

    // MARK: Registrations from apps

    public func registerPushToStartToken(_ registration: PushToStartRegistration) async throws {
        try checkApp(bundleID: registration.bundleID, environment: registration.environment)
        try await store.savePushToStartToken(PushToStartTokenRecord(
            deviceID: registration.deviceID, attributesType: registration.attributesType, userID: registration.userID,
            token: registration.token.hex, frequentPushesEnabled: registration.frequentPushesEnabled,
            environment: registration.environment, updatedAt: now()))
        metrics.count("liverelay_registrations_total", ["kind": "push_to_start"])
        logger.info("push-to-start token registered", metadata: ["device": "\(registration.deviceID)", "token": "\(registration.token.shortened)"])
    }

    /// Registers a device's update token under the key (creating the key when the app started
    /// the activity itself) and returns the key.
    @discardableResult
    public func registerActivityToken(key: String, _ registration: ActivityTokenRegistration) async throws -> ActivityRecord {
        try Self.checkKey(key)
        try checkApp(bundleID: registration.bundleID, environment: registration.environment)
        do {
            let activity = try await store.saveActivityToken(
                ActivityTokenRecord(
                    key: key, deviceID: registration.deviceID, activityID: registration.activityID, token: registration.token.hex,
                    frequentPushesEnabled: registration.frequentPushesEnabled, environment: registration.environment, registeredAt: now()),
                attributesType: registration.attributesType)
            metrics.count("liverelay_registrations_total", ["kind": "activity"])
            logger.info(
                "activity token registered",
                metadata: ["activity.key": "\(key)", "device": "\(registration.deviceID)", "token": "\(registration.token.shortened)"])
            return activity
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Records that the activity ended or was dismissed on the device; false when the device has
    /// no token under the key (a channel-subscribed activity has none).
    public func reportEnded(key: String, _ report: EndedReport) async throws -> Bool {
        try Self.checkKey(key)
        guard try await store.activity(key: key) != nil else { throw RelayError.notFound("key", "no activity key \"\(key)\"") }
        return try await store.endActivityToken(key: key, deviceID: report.deviceID, state: report.state, at: report.at ?? now())
    }

    private func checkApp(bundleID: String, environment: PushEnvironment? = nil) throws {
        guard bundleID == configuration.bundleID.value else {
            throw RelayError.invalid("bundleID", "this server sends to \(configuration.bundleID.value), not \(bundleID)")
        }
        guard let environment else { return }
        guard environments.contains(environment) else {
            let served = PushEnvironment.allCases.filter(environments.contains).map(\.rawValue).joined(separator: " and ")
            throw RelayError.invalid(
                "environment", "this server sends to APNs \(served) only; a \(environment.rawValue) token would never be reached")
        }
    }

    /// Keys are chosen by the backend: 1 to 200 characters (Unicode scalars, as the OpenAPI
    /// document counts them), no whitespace or control characters.
    static func checkKey(_ key: String) throws {
        guard !key.isEmpty, key.unicodeScalars.count <= 200, !key.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F })
        else { throw RelayError.invalid("key", "must be 1 to 200 characters without spaces or control characters") }
    }

    // MARK: Contracts

    /// Registers (or replaces) what the app's widget decodes `contract.attributesType` from: the
    /// requests that follow are checked against it.
    public func registerContract(_ contract: ActivityContract, bundleID: String) async throws -> ContractRecord {
        try checkApp(bundleID: bundleID)
        let record = ContractRecord(bundleID: bundleID, attributesType: contract.attributesType, contract: contract.json, updatedAt: now())
        try await store.saveContract(record)
        contractBook.registered(contract)
        metrics.count("liverelay_registrations_total", ["kind": "contract"])
        logger.info("contract registered", metadata: ["attributes.type": "\(contract.attributesType)"])
        return record
    }

    public func contracts() async throws -> [ContractRecord] {
        try await store.contracts().filter { $0.bundleID == configuration.bundleID.value }
    }

    public func contract(attributesType: String) async throws -> ContractRecord {
        guard let record = try await contracts().first(where: { $0.attributesType == attributesType }) else {
            throw RelayError.notFound("attributesType", "no contract registered for \(attributesType)")
        }
        return record
    }

    private func currentContracts() async throws -> [String: ActivityContract] {
        try await contractBook.contracts(bundleID: configuration.bundleID.value, from: store)
    }

    // MARK: Starting, updating, ending

    /// Starts `key` on the audience's devices through their push-to-start tokens, or schedules it.
    public func start(key: String, _ request: StartRequest, idempotency: IdempotencyClaim? = nil) async throws -> AcceptedRequest {
        try await start(key: key, request, context: WriteContext(idempotency: idempotency))
    }

    private func start(key: String, _ request: StartRequest, context: WriteContext) async throws -> AcceptedRequest {
        try Self.checkKey(key)
        // Checked before anything is written or created, and again when a schedule runs.
        let warnings = try StartPlanner.check(request, against: try await currentContracts()[request.attributesType])
        if let at = request.at, at > now() { return try await schedule(key: key, .start(request), at: at, context: context) }
        var channelIDs: [PushEnvironment: String] = [:]
        switch request.channel {
        case nil:
            break
        case .existing(let id):
            guard let channel = try await store.channel(id: id), channel.deletedAt == nil else {
                throw RelayError.notFound("channel.id", "no live channel \(id) made by this server")
            }
            channelIDs[channel.environment] = id
        case .create(let policy):
            // A channel lives in one environment: one in each the audience spans (in the first
            // served when it has no device yet).
            var needed = try await store.audienceEnvironments(attributesType: request.attributesType, audience: request.audience)
                .intersection(environments)
            if needed.isEmpty, let first = PushEnvironment.allCases.first(where: environments.contains) { needed = [first] }
            for environment in PushEnvironment.allCases where needed.contains(environment) {
                channelIDs[environment] = try await createChannel(for: key, in: environment, storagePolicy: policy)
            }
        }
        let acceptedAt = now()
        let channels = channelIDs
        let payloads = try StartPlanner.payloads(request, channelIDs: channels, at: acceptedAt)
        let planner = StartPlanner(environments: environments, governor: governor, answer: answerKept)
        let requestID = UUID().uuidString.lowercased()
        var context = context
        context.handOver = handOver.offer(at: acceptedAt, policy: configuration.dispatch)
        do {
            let accepted = try await store.acceptStart(
                key: key, attributesType: request.attributesType, audience: request.audience, context: context
            ) { tokens in
                planner.plan(
                    key: key, request, payloads: payloads, channelIDs: channels, tokens: tokens, at: acceptedAt, requestID: requestID,
                    warnings: warnings)
            }
            dispatch(accepted.claimed, action: "start")
            return .accepted(accepted.outcome)
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Updates or ends `key`: one push per live update token, or one broadcast when the key is
    /// bound to a channel; or schedules it.
    public func change(key: String, _ request: ChangeRequest, idempotency: IdempotencyClaim? = nil) async throws -> AcceptedRequest {
        try await change(key: key, request, context: WriteContext(idempotency: idempotency))
    }

    private func change(key: String, _ request: ChangeRequest, context: WriteContext) async throws -> AcceptedRequest {
        try Self.checkKey(key)
        if let at = request.at, at > now() {
            // A key that exists already is checked against its type's contract now, not only when due.
            if let content = request.contentState, let activity = try await store.activity(key: key),
               let contract = try await currentContracts()[activity.attributesType]
            {
                _ = try ContractCheck.contentState(content, contract)
            }
            return try await schedule(key: key, .change(request), at: at, context: context)
        }
        let acceptedAt = now()
        let planner = ChangePlanner(
            governor: governor, channelStorageWindow: configuration.channelStorageWindow, answer: answerKept, contracts: try await currentContracts())
        let requestID = UUID().uuidString.lowercased()
        var context = context
        context.handOver = handOver.offer(at: acceptedAt, policy: configuration.dispatch)
        do {
            let accepted = try await store.acceptChange(
                key: key, budgetWindowStart: ChangePlanner.budgetWindowStart(for: request, at: acceptedAt), context: context
            ) { snapshot in
                try planner.plan(key: key, request, snapshot: snapshot, at: acceptedAt, requestID: requestID)
            }
            dispatch(accepted.claimed, action: request.event.rawValue)
            return .accepted(accepted.outcome)
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// The answer kept with an accepting write, in the API's format.
    private var answerKept: @Sendable (Acceptance) -> StoredResponse {
        { [wire] acceptance in wire.answer(.accepted(acceptance)) }
    }

    /// Gives the dispatcher the pushes the request claimed, or wakes it to claim what was queued.
    private func dispatch(_ claimed: [DeliveryRecord], action: String) {
        metrics.count("liverelay_requests_accepted_total", ["action": action])
        if claimed.isEmpty {
            outboxSignal.queued()
        } else {
            handOver.give(claimed)
        }
    }

    // MARK: Channels

    private func createChannel(for key: String, in environment: PushEnvironment, storagePolicy: Int) async throws -> String {
        guard let apns = apns?.client(environment), let policy = MessageStoragePolicy(rawValue: storagePolicy) else {
            throw RelayError(.upstream, .apnsUnavailable, message: "no APNs connection to create a channel with", field: "channel")
        }
        do {
            let id = try await apns.createChannel(bundleID: configuration.bundleID, storagePolicy: policy)
            try await store.saveChannel(ChannelRecord(
                channelID: id, environment: environment, key: key, storagePolicy: storagePolicy, createdAt: now()))
            return id
        } catch let error as APNsError {
            throw RelayError(.upstream, .apnsRefused, message: "APNs refused to create the channel: \(error)", field: "channel")
        }
    }

    public func channels() async throws -> [ChannelRecord] {
        try await store.channels()
    }

    /// Deletes a live channel at APNs and marks it deleted.
    public func deleteChannel(_ id: String) async throws {
        guard let channel = try await store.channel(id: id), channel.deletedAt == nil else { throw RelayError.notFound("id", "no live channel \(id)") }
        guard let apns = apns?.client(channel.environment) else {
            throw RelayError(.upstream, .apnsUnavailable, message: "no APNs connection to \(channel.environment.rawValue)")
        }
        do {
            try await apns.deleteChannel(id, bundleID: configuration.bundleID)
        } catch let error as APNsError where error.status == 404 || error.reason == .badChannelId || error.reason == .channelNotRegistered {
            // Already gone at APNs.
        } catch let error as APNsError {
            throw RelayError(.upstream, .apnsRefused, message: "APNs refused to delete the channel: \(error)")
        }
        try await store.markChannelDeleted(id: id, at: now())
    }

    // MARK: Schedules

    private func schedule(key: String, _ request: ScheduledRequest, at: Date, context: WriteContext) async throws -> AcceptedRequest {
        var body = wire.json(of: request)
        body.remove("at")  // run as given, when due
        let schedule = ScheduleRecord(
            id: "sch_" + randomHex(bytes: 8), key: key, action: request.action, request: body, dueAt: at, createdAt: now())
        try await store.insertSchedule(schedule, context: context, response: wire.answer(.scheduled(schedule)))
        metrics.count("liverelay_requests_accepted_total", ["action": "schedule"])
        return .scheduled(schedule)
    }

    public func schedules(key: String?) async throws -> [ScheduleRecord] {
        try await store.schedules(key: key)
    }

    public func schedule(id: String) async throws -> ScheduleRecord {
        guard let schedule = try await store.schedule(id: id) else { throw RelayError.notFound("id", "no schedule \(id)") }
        return schedule
    }

    public func cancelSchedule(id: String) async throws -> ScheduleRecord {
        do {
            guard let schedule = try await store.cancelSchedule(id: id, at: now()) else { throw RelayError.notFound("id", "no schedule \(id)") }
            return schedule
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Runs the schedules that are due; a schedule whose request no longer reads or applies fails
    /// with the reason.
    @discardableResult
    public func runDueSchedules() async throws -> Int {
        let due = try await store.dueSchedules(at: now(), limit: 100)
        for schedule in due {
            let context = WriteContext(scheduleID: schedule.id)
            let request: ScheduledRequest
            do {
                request = try wire.request(action: schedule.action, json: schedule.request)
            } catch {
                try await store.failSchedule(id: schedule.id, reason: "\(error)")
                continue
            }
            do {
                switch request {
                case .start(let request): _ = try await start(key: schedule.key, request, context: context)
                case .change(let request): _ = try await change(key: schedule.key, request, context: context)
                }
            } catch let error as RelayError {
                try await store.failSchedule(id: schedule.id, reason: error.description)
            } catch let error as LiveActivityValidationError {
                try await store.failSchedule(id: schedule.id, reason: error.description)
            }
        }
        return due.count
    }

    // MARK: Time

    /// What time does on its own: schedules run, activities past their lifetime end, and
    /// channels of ended keys are deleted once their storage window has passed.
    public func tick() async throws {
        try await runDueSchedules()
        let date = now()
        let expired = try await store.expireActivities(
            startedBefore: date - configuration.activityLifetime, at: date, channelDeleteAfter: date + configuration.channelStorageWindow)
        if !expired.isEmpty {
            metrics.count("liverelay_activities_expired_total", [:], by: expired.count)
            logger.info("activities expired", metadata: ["count": "\(expired.count)"])
        }
        for channel in try await store.channelsToDelete(at: date) where apns != nil {
            do {
                try await deleteChannel(channel.channelID)
            } catch {
                logger.warning("channel deletion failed", metadata: ["channel": "\(channel.channelID)", "error": "\(error)"])
            }
        }
    }

    // MARK: Reading

    /// A key, its tokens with their last delivery results, and its schedules.
    public func describe(key: String) async throws -> ActivityDescription {
        try Self.checkKey(key)
        guard let activity = try await store.activity(key: key) else { throw RelayError.notFound("key", "no activity key \"\(key)\"") }
        return ActivityDescription(activity: activity, tokens: try await store.activityTokens(key: key), schedules: try await store.schedules(key: key))
    }

    /// The outbox's deliveries, newest first.
    public func deliveries(_ query: DeliveryQuery) async throws -> [DeliveryRecord] {
        try await store.deliveries(query)
    }

    /// How many deliveries the outbox holds in each state.
    public func deliveryCounts() async throws -> [DeliveryStatus: Int] {
        try await store.deliveryCounts()
    }

    /// The metrics in Prometheus' text format.
    public func renderMetrics() async throws -> String {
        metrics.render(store: try await store.counts(), deliveries: try await store.deliveryCounts())
    }
}

func randomHex(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
}
