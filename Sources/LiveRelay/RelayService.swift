import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// The service core: the apps it sends for, registrations from them, starts, updates and ends
/// from the backend, written with their pushes to the outbox in one transaction; schedules,
/// expiry and channel cleanup. Every key, token, channel and push belongs to one app. The
/// dispatcher sends what this accepts.
public final class RelayService: Sendable {
    public let store: any RelayStore
    public let configuration: RelayConfiguration
    /// The API's format of scheduled requests and kept answers.
    let wire: any RelayWireFormat
    public let metrics: RelayMetrics
    /// Sends, and creates and deletes broadcast channels, in each environment served; nil when no
    /// APNs is configured (tests of the API alone, which take tokens of both environments).
    let apns: APNsRoutes?
    let now: @Sendable () -> Date
    let logger: Logger
    /// Wakes the dispatcher when pushes are queued (here, or by another instance on the same store).
    let outboxSignal = OutboxSignal()
    /// This process among the instances sharing a store: the holder of the leases it takes.
    public let instanceID = randomHex(bytes: 8)
    /// Takes the pushes of small requests straight to the running dispatcher.
    let handOver = DispatchHandOver()
    private let governor: PriorityGovernor
    /// The apps by bundle ID, with the credentials their pushes are signed with.
    private let appBook = StoreCache<[String: AppRecord]> { store in
        Dictionary(try await store.apps().map { ($0.bundleID, $0) }, uniquingKeysWith: { _, last in last })
    }
    /// What each app's widget decodes, by bundle ID: requests are checked against it.
    private let contractBook: StoreCache<[String: AppContracts]>
    /// Live keys recently looked up, by secret hash: most requests then skip a read. A revocation
    /// here clears it; one made by another process sharing the store takes effect within the TTL.
    private let keyCache = Mutex<[Data: (key: APIKeyRecord, until: ContinuousClock.Instant)]>([:])
    static let keyCacheTTL = Duration.seconds(5)
    private let failures = Mutex(AuthenticationFailures())
    private let changes = Atomic<UInt64>(0)

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
        self.contractBook = StoreCache { [logger] store in
            var contracts: [String: AppContracts] = [:]
            for record in try await store.contracts() {
                do throws(LiveActivityValidationError) {
                    contracts[record.bundleID, default: AppContracts()].readable[record.attributesType] =
                        try ActivityContract(json: record.contract, name: record.attributesType)
                } catch {
                    contracts[record.bundleID, default: AppContracts()].unreadable[record.attributesType] = error.description
                    logger.error(
                        "a stored contract cannot be read: its type's requests are refused until it is registered again",
                        metadata: ["app": "\(record.bundleID)", "attributes.type": "\(record.attributesType)", "reason": "\(error)"])
                }
            }
            return contracts
        }
    }

    public var currentDate: Date { now() }

    /// Grows with every change this process makes to what the store holds, so that a watcher (the
    /// dashboard's live pages) knows when to look again. Changes made by other instances sharing
    /// the store are not counted.
    public var revision: UInt64 { changes.load(ordering: .relaxed) }

    func noteChange() { changes.add(1, ordering: .relaxed) }

    /// The APNs environments whose tokens this server takes and sends to.
    public var environments: Set<PushEnvironment> { apns?.environments ?? Set(PushEnvironment.allCases) }

    // MARK: Apps

    /// Registers an app, or replaces its credentials: its pushes are signed with them from now on.
    /// `isNew`: the server did not have the app before.
    @discardableResult
    public func registerApp(_ registration: AppRegistration) async throws -> (record: AppRecord, isNew: Bool) {
        do {
            _ = try APNsSigningKey(pem: registration.signingKey, keyID: registration.keyID, teamID: registration.teamID)
        } catch {
            let field = ["key-id": "keyID", "team-id": "teamID"][error.field] ?? "signingKey"
            throw RelayError.invalid(field, error.message)
        }
        let existing = try await store.apps().first { $0.bundleID == registration.bundleID.value }
        let date = now()
        let app = AppRecord(
            bundleID: registration.bundleID.value, teamID: registration.teamID, keyID: registration.keyID,
            signingKey: registration.signingKey, createdAt: existing?.createdAt ?? date, updatedAt: date)
        try await store.saveApp(app)
        appBook.invalidate()
        logger.info("app registered", metadata: ["app": "\(app.bundleID)", "key.id": "\(app.keyID)"])
        return (app, existing == nil)
    }

    public func apps() async throws -> [AppRecord] {
        try await appBook.value(from: store).values.sorted { $0.bundleID < $1.bundleID }
    }

    /// The apps that have an activity under `key`.
    public func apps(holdingKey key: String) async throws -> [String] {
        var holding: [String] = []
        for app in try await apps() where try await store.activity(app: app.bundleID, key: key) != nil {
            holding.append(app.bundleID)
        }
        return holding
    }

    /// The app, or 404 naming `field`.
    public func app(_ bundleID: String, field: String = "app") async throws -> AppRecord {
        guard let app = try await appBook.value(from: store)[bundleID] else {
            throw RelayError.notFound(field, "no app \(bundleID) on this server (PUT /v1/apps/\(bundleID) registers it)")
        }
        return app
    }

    /// Gives `bundleID` what an earlier release's store held for its one app (see `0009-apps`).
    public func adoptUnnamedData(bundleID: String) async throws {
        if try await store.adoptUnnamedData(bundleID: bundleID) {
            logger.notice("data of the release before apps now belongs to \(bundleID)")
        }
    }

    // MARK: API keys

    /// Makes a key and returns its secret, which is shown once: only its hash is stored. A client
    /// key is for one app; a server key for one app or (nil) for every app; an admin key for every app.
    public func createAPIKey(
        name: String, scope: APIKeyScope, app bundleID: String? = nil
    ) async throws -> (record: APIKeyRecord, secret: String) {
        switch (scope, bundleID) {
        case (.client, nil): throw RelayError(.invalid, .missing, message: "a client key is for one app: name it", field: "bundleID")
        case (.admin, .some): throw RelayError.invalid("bundleID", "an admin key is for every app: leave bundleID out")
        case (.viewer, .some): throw RelayError.invalid("bundleID", "a viewer key reads every app: leave bundleID out")
        default: break
        }
        if let bundleID { _ = try await app(bundleID, field: "bundleID") }
        defer { noteChange() }
        return try await Self.createAPIKey(name: name, scope: scope, app: bundleID, in: store, at: now())
    }

    /// The same without a running server: `liverelay keys create` recovers access this way.
    public static func createAPIKey(
        name: String, scope: APIKeyScope, app bundleID: String? = nil, in store: any RelayStore, at date: Date
    ) async throws -> (record: APIKeyRecord, secret: String) {
        let secret = "lr_\(scope.rawValue)_" + randomHex(bytes: 24)
        let record = APIKeyRecord(
            id: "key_" + randomHex(bytes: 8), name: name, scope: scope, bundleID: bundleID, secretHash: hash(secret), createdAt: date)
        try await store.insertAPIKey(record)
        return (record, secret)
    }

    /// The live key with this secret, presented from `source` (an address) through `route` (`api`,
    /// `dashboard`). A source that keeps failing is refused for a while (`AuthenticationFailures`),
    /// but for keys this process has seen live.
    public func authenticate(secret: String, from source: String, route: String) async throws -> APIKeyRecord? {
        let hash = Self.hash(secret)
        let moment = ContinuousClock.now
        let cached = keyCache.withLock { $0[hash] }
        if let cached, cached.until > moment { return cached.key }
        let date = now()
        // A key seen live before is looked up again (revoked since?) whatever its source did: a
        // source shared by many (a proxy, a NAT) keeps its good keys.
        if cached == nil, let wait = failures.withLock({ $0.refusal(for: source, at: date) }) {
            metrics.count("liverelay_authentication_refused_total", ["route": route])
            throw RelayError(
                .throttled, .tooManyFailures, message: "too many failed authentications from this address; retry after \(wait) s",
                retryAfter: wait)
        }
        guard let key = try await store.apiKey(secretHash: hash), key.revokedAt == nil else {
            if cached != nil { keyCache.withLock { $0[hash] = nil } }  // revoked through another instance
            metrics.count("liverelay_authentication_failures_total", ["route": route])
            if let count = failures.withLock({ $0.failed(source, at: date) }) {
                // Never the secret: the source and how often, enough to find and block it.
                logger.warning(
                    "authentication failed: an API key unknown or revoked",
                    metadata: ["source": "\(source)", "route": "\(route)", "failures": "\(count)"])
            }
            return nil
        }
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
            noteChange()
        case .notFound:
            throw RelayError.notFound("id", "no live API key \(id)")
        case .lastAdminKey:
            throw RelayError(
                .conflict, .lastAdminKey,
                message:
                    "\(id) is the last live admin key; make another admin key first (POST /v1/api-keys, or `liverelay keys create --scope admin` on the server)",
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
        try await checkApp(bundleID: registration.bundleID, environment: registration.environment)
        try await store.savePushToStartToken(
            PushToStartTokenRecord(
                bundleID: registration.bundleID, deviceID: registration.deviceID, attributesType: registration.attributesType,
                userID: registration.userID, token: registration.token.hex, frequentPushesEnabled: registration.frequentPushesEnabled,
                environment: registration.environment, updatedAt: now()))
        metrics.count("liverelay_registrations_total", ["kind": "push_to_start"])
        noteChange()
        logger.info("push-to-start token registered", metadata: ["device": "\(registration.deviceID)", "token": "\(registration.token.shortened)"])
    }

    /// Registers a device's update token under the key (creating the key when the app started
    /// the activity itself) and returns the key.
    @discardableResult
    public func registerActivityToken(key: String, _ registration: ActivityTokenRegistration) async throws -> ActivityRecord {
        try Self.checkKey(key)
        try await checkApp(bundleID: registration.bundleID, environment: registration.environment)
        do {
            let activity = try await store.saveActivityToken(
                ActivityTokenRecord(
                    bundleID: registration.bundleID, key: key, deviceID: registration.deviceID, activityID: registration.activityID,
                    token: registration.token.hex, frequentPushesEnabled: registration.frequentPushesEnabled,
                    environment: registration.environment, registeredAt: now()),
                attributesType: registration.attributesType)
            metrics.count("liverelay_registrations_total", ["kind": "activity"])
            noteChange()
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
        try await checkApp(bundleID: report.bundleID)
        guard try await store.activity(app: report.bundleID, key: key) != nil else {
            throw RelayError.notFound("key", "no activity key \"\(key)\"")
        }
        defer { noteChange() }
        return try await store.endActivityToken(
            app: report.bundleID, key: key, deviceID: report.deviceID, state: report.state, at: report.at ?? now())
    }

    /// An app's report names a registered app, and a token one of the environments served.
    private func checkApp(bundleID: String, environment: PushEnvironment? = nil) async throws {
        _ = try await app(bundleID, field: "bundleID")
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
        guard !key.isEmpty, key.unicodeScalars.count <= 200,
            !key.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F })
        else { throw RelayError.invalid("key", "must be 1 to 200 characters without spaces or control characters") }
    }

    // MARK: Contracts

    /// Registers (or replaces) what the app's widget decodes `contract.attributesType` from: the
    /// requests that follow are checked against it.
    public func registerContract(_ contract: ActivityContract, bundleID: String) async throws -> ContractRecord {
        try await checkApp(bundleID: bundleID)
        let record = ContractRecord(bundleID: bundleID, attributesType: contract.attributesType, contract: contract.json, updatedAt: now())
        try await store.saveContract(record)
        contractBook.invalidate()
        metrics.count("liverelay_registrations_total", ["kind": "contract"])
        noteChange()
        logger.info("contract registered", metadata: ["app": "\(bundleID)", "attributes.type": "\(contract.attributesType)"])
        return record
    }

    /// The contracts of an app (nil: of every app).
    public func contracts(app bundleID: String?) async throws -> [ContractRecord] {
        try await store.contracts().filter { bundleID == nil || $0.bundleID == bundleID }
    }

    public func contract(app bundleID: String, attributesType: String) async throws -> ContractRecord {
        guard let record = try await contracts(app: bundleID).first(where: { $0.attributesType == attributesType }) else {
            throw RelayError.notFound("attributesType", "no contract registered for \(attributesType) of \(bundleID)")
        }
        return record
    }

    private func currentContracts(app bundleID: String) async throws -> AppContracts {
        try await contractBook.value(from: store)[bundleID] ?? AppContracts()
    }

    // MARK: Starting, updating, ending

    /// Starts the app's `key` on the audience's devices through their push-to-start tokens, or schedules it.
    public func start(
        app bundleID: String, key: String, _ request: StartRequest, idempotency: IdempotencyClaim? = nil
    ) async throws -> AcceptedRequest {
        try await start(app: try await app(bundleID), key: key, request, context: WriteContext(idempotency: idempotency))
    }

    private func start(app: AppRecord, key: String, _ request: StartRequest, context: WriteContext) async throws -> AcceptedRequest {
        try Self.checkKey(key)
        // Checked before anything is written or created, and again when a schedule runs.
        let warnings = try StartPlanner.check(request, against: try await currentContracts(app: app.bundleID).contract(for: request.attributesType))
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
        let planner = StartPlanner(environments: environments, governor: governor, answer: answerKept)
        let requestID = GeneratedUUID.string()
        var context = context
        context.handOver = handOver.offer(at: acceptedAt, policy: configuration.dispatch)
        do {
            let accepted = try await store.acceptStart(
                app: app.bundleID, key: key, attributesType: request.attributesType, audience: request.audience, context: context
            ) { [bundleID = app.bundleID] tokens in
                planner.plan(
                    app: bundleID, key: key, request, payloads: payloads, channelIDs: channels, tokens: tokens, at: acceptedAt,
                    requestID: requestID, warnings: warnings)
            }
            dispatch(accepted.claimed, action: .start)
            return .accepted(accepted.outcome)
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Updates or ends the app's `key`: one push per live update token, or one broadcast per
    /// channel when the key is bound to channels; or schedules it.
    public func change(
        app bundleID: String, key: String, _ request: ChangeRequest, idempotency: IdempotencyClaim? = nil
    ) async throws -> AcceptedRequest {
        try await change(app: try await app(bundleID), key: key, request, context: WriteContext(idempotency: idempotency))
    }

    private func change(app: AppRecord, key: String, _ request: ChangeRequest, context: WriteContext) async throws -> AcceptedRequest {
        try Self.checkKey(key)
        let contracts = try await currentContracts(app: app.bundleID)
        if let at = request.at, at > now() {
            // A key that exists already is checked against its type's contract now, not only when due.
            if let content = request.contentState, let activity = try await store.activity(app: app.bundleID, key: key),
                let contract = try contracts.contract(for: activity.attributesType)
            {
                _ = try ContractCheck.contentState(content, contract)
            }
            return try await schedule(app: app.bundleID, key: key, .change(request), at: at, context: context)
        }
        let acceptedAt = now()
        let planner = ChangePlanner(
            governor: governor, channelStorageWindow: configuration.channelStorageWindow, answer: answerKept, contracts: contracts)
        let requestID = GeneratedUUID.string()
        var context = context
        context.handOver = handOver.offer(at: acceptedAt, policy: configuration.dispatch)
        do {
            let accepted = try await store.acceptChange(
                app: app.bundleID, key: key, budget: ChangePlanner.budget(for: request, at: acceptedAt), context: context
            ) { snapshot in
                try planner.plan(key: key, request, snapshot: snapshot, at: acceptedAt, requestID: requestID)
            }
            dispatch(accepted.claimed, action: request.event)
            metrics.noteBudget(accepted.outcome.budgetUse, app: app.bundleID, key: key, at: acceptedAt)
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
    private func dispatch(_ claimed: [DeliveryRecord], action: LiveActivityPayload.Event) {
        metrics.count("liverelay_requests_accepted_total", ["action": action.rawValue])
        noteChange()
        if claimed.isEmpty {
            outboxSignal.queued()
        } else {
            handOver.give(claimed)
        }
    }

    // MARK: Channels

    /// The client that sends for `app` in `environment`, or why there is none.
    func apnsClient(for app: AppRecord, in environment: PushEnvironment, field: String? = nil) throws(RelayError) -> APNsClient {
        do {
            if let client = try apns?.client(for: app, in: environment) { return client }
        } catch {
            throw RelayError(.upstream, .apnsUnavailable, message: "\(app.bundleID)'s key cannot sign: \(error)", field: field)
        }
        throw RelayError(.upstream, .apnsUnavailable, message: "no APNs connection to \(environment.rawValue)", field: field)
    }

    private func createChannel(for app: AppRecord, key: String, in environment: PushEnvironment, storagePolicy: Int) async throws -> String {
        guard let policy = MessageStoragePolicy(rawValue: storagePolicy) else {
            throw RelayError.invalid("channel.storagePolicy", "must be 0 or 1")
        }
        let apns = try apnsClient(for: app, in: environment, field: "channel")
        do {
            let id = try await apns.createChannel(bundleID: try BundleID(app.bundleID), storagePolicy: policy)
            try await store.saveChannel(
                ChannelRecord(
                    channelID: id, bundleID: app.bundleID, environment: environment, key: key, storagePolicy: storagePolicy, createdAt: now()))
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
        guard let channel = try await store.channel(id: id), channel.deletedAt == nil else {
            throw RelayError.notFound("id", "no live channel \(id)")
        }
        let apns = try apnsClient(for: try await app(channel.bundleID), in: channel.environment)
        do {
            try await apns.deleteChannel(id, bundleID: try BundleID(channel.bundleID))
        } catch let error as APNsError where error.status == 404 || error.reason == .badChannelId || error.reason == .channelNotRegistered {
            // Already gone at APNs.
        } catch let error as APNsError {
            throw RelayError(.upstream, .apnsRefused, message: "APNs refused to delete the channel: \(error)")
        }
        try await store.markChannelDeleted(id: id, at: now())
        noteChange()
    }

    // MARK: Schedules

    private func schedule(
        app: String, key: String, _ request: ScheduledRequest, at: Date, context: WriteContext
    ) async throws -> AcceptedRequest {
        var body = wire.json(of: request)
        body.remove("at")  // run as given, when due
        let schedule = ScheduleRecord(
            id: "sch_" + randomHex(bytes: 8), bundleID: app, key: key, action: request.action, request: body, dueAt: at, createdAt: now())
        try await store.insertSchedule(schedule, context: context, response: wire.answer(.scheduled(schedule)))
        metrics.count("liverelay_requests_accepted_total", ["action": "schedule"])
        noteChange()
        return .scheduled(schedule)
    }

    /// The schedules of an app (nil: every app), of one key if given.
    public func schedules(app: String?, key: String?) async throws -> [ScheduleRecord] {
        try await store.schedules(app: app, key: key)
    }

    public func schedule(id: String) async throws -> ScheduleRecord {
        guard let schedule = try await store.schedule(id: id) else { throw RelayError.notFound("id", "no schedule \(id)") }
        return schedule
    }

    public func cancelSchedule(id: String) async throws -> ScheduleRecord {
        do {
            guard let schedule = try await store.cancelSchedule(id: id, at: now()) else { throw RelayError.notFound("id", "no schedule \(id)") }
            noteChange()
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
        if !due.isEmpty { noteChange() }
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
                let app = try await app(schedule.bundleID)
                switch request {
                case .start(let request): _ = try await start(app: app, key: schedule.key, request, context: context)
                case .change(let request): _ = try await change(app: app, key: schedule.key, request, context: context)
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
    /// One instance at a time does it: the one holding the `ticker` lease, which it renews on every
    /// tick; when it dies, another takes the lease once it runs out (`tickerLease`). Returns
    /// whether this instance did the work.
    @discardableResult
    public func tick() async throws -> Bool {
        let start = now()
        guard try await store.takeLease("ticker", holder: instanceID, until: start + configuration.tickerLease, at: start) else { return false }
        try await runDueSchedules()
        let date = now()
        let expired = try await store.expireActivities(
            startedBefore: date - configuration.activityLifetime, at: date, channelDeleteAfter: date + configuration.channelStorageWindow)
        if !expired.isEmpty {
            noteChange()
            metrics.count("liverelay_activities_expired_total", [:], by: expired.count)
            logger.info("activities expired", metadata: ["count": "\(expired.count)"])
        }
        for channel in try await store.channelsToDelete(at: date) where apns != nil {
            // A channel kept from before apps, for an app not named yet, waits for it.
            guard try await appBook.value(from: store)[channel.bundleID] != nil else { continue }
            do {
                try await deleteChannel(channel.channelID)
            } catch {
                logger.warning("channel deletion failed", metadata: ["channel": "\(channel.channelID)", "error": "\(error)"])
            }
        }
        return true
    }

    // MARK: Reading

    /// An app's key, its tokens with their last delivery results, and its schedules.
    public func describe(app: String, key: String) async throws -> ActivityDescription {
        try Self.checkKey(key)
        guard var activity = try await store.activity(app: app, key: key) else {
            throw RelayError.notFound("key", "no activity key \"\(key)\"")
        }
        let tokens = try await store.activityTokens(app: app, key: key)
        activity.devices = ActivityDevices(tokens: tokens)
        return ActivityDescription(activity: activity, tokens: tokens, schedules: try await store.schedules(app: app, key: key))
    }

    /// A page of activities, newest first.
    public func activities(_ query: ActivityQuery) async throws -> [ActivityRecord] {
        try await store.activities(query)
    }

    /// The outbox's deliveries, newest first, as people read them: without the pushes' bytes.
    public func deliveries(_ query: DeliveryQuery) async throws -> [DeliveryRecord] {
        var query = query
        query.includePayloads = false
        return try await store.deliveries(query)
    }

    /// Sends a failed push again: the same payload to the same target, queued beside the failure
    /// (`DeliveryRetry`). `app`: the only app the caller may act for, if bound to one.
    public func retryDelivery(id: Int64, app: String?) async throws -> DeliveryRecord {
        switch try await store.retryDelivery(id: id, app: app, at: now()) {
        case .retried(let delivery):
            noteChange()
            outboxSignal.queued()
            logger.info("failed push retried", metadata: ["delivery": "\(id)", "retry": "\(delivery.id)"])
            return delivery
        case .refused(let refusal):
            throw RelayError(.conflict, .notRetryable, message: refusal.description, field: "id")
        case .notFound:
            throw RelayError.notFound("id", "no push \(id)")
        }
    }

    /// How many deliveries the outbox holds in each state.
    public func deliveryCounts() async throws -> [DeliveryStatus: Int] {
        try await store.deliveryCounts()
    }

    /// The metrics in Prometheus' text format.
    public func renderMetrics() async throws -> String {
        metrics.render(
            store: try await store.counts(), deliveries: try await store.deliveryCounts(), apnsConnections: apns?.pushConnectionCount ?? 0)
    }
}

func randomHex(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
}
