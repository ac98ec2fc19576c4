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
    public let store: any RelayStore
    public let configuration: RelayConfiguration
    public let metrics: RelayMetrics
    /// Creates and deletes broadcast channels; nil when no APNs is configured (tests of the API alone).
    let apns: APNsClient?
    let now: @Sendable () -> Date
    let logger: Logger
    /// Wakes the dispatcher when pushes are queued.
    let outboxSignal = OutboxSignal()
    /// Takes the pushes of small requests straight to the running dispatcher.
    let handOver = DispatchHandOver()
    private let governor: PriorityGovernor
    /// Live keys recently looked up, by secret hash: most requests then skip a read. A revocation
    /// here clears it; one made by another process sharing the store takes effect within the TTL.
    private let keyCache = Mutex<[Data: (key: APIKeyRecord, until: ContinuousClock.Instant)]>([:])
    static let keyCacheTTL = Duration.seconds(5)

    public init(
        store: any RelayStore, configuration: RelayConfiguration, apns: APNsClient?, now: @escaping @Sendable () -> Date = { Date() },
        logger: Logger = Logger(label: "liverelay")
    ) {
        self.store = store
        self.configuration = configuration
        self.apns = apns
        self.now = now
        self.logger = logger
        self.metrics = RelayMetrics()
        self.governor = PriorityGovernor(policy: configuration.budget)
    }

    public var currentDate: Date { now() }

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
            throw RelayError(.notFound, code: "not_found", message: "no live API key \(id)", field: "id")
        case .lastAdminKey:
            throw RelayError(
                .conflict, code: "last_admin_key",
                message: "\(id) is the last live admin key; make another admin key first (POST /v1/api-keys, or `liverelay keys create --scope admin` on the server)",
                field: "id")
        }
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
                    frequentPushesEnabled: registration.frequentPushesEnabled, registeredAt: now()),
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
        guard try await store.activity(key: key) != nil else {
            throw RelayError(.notFound, code: "not_found", message: "no activity key \"\(key)\"", field: "key")
        }
        return try await store.endActivityToken(key: key, deviceID: report.deviceID, state: report.state, at: report.at ?? now())
    }

    private func checkApp(bundleID: String, environment: String) throws {
        guard bundleID == configuration.bundleID.value else {
            throw RelayError.invalid("bundleID", "this server sends to \(configuration.bundleID.value), not \(bundleID)")
        }
        guard environment == configuration.environment else {
            throw RelayError.invalid("environment", "this server sends to APNs \(configuration.environment); a \(environment) token would be refused")
        }
    }

    /// Keys are chosen by the backend: 1 to 200 characters (Unicode scalars, as the OpenAPI
    /// document counts them), no whitespace or control characters.
    static func checkKey(_ key: String) throws {
        guard !key.isEmpty, key.unicodeScalars.count <= 200, !key.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F })
        else { throw RelayError.invalid("key", "must be 1 to 200 characters without spaces or control characters") }
    }

    // MARK: Starting, updating, ending

    /// Starts `key` on the audience's devices through their push-to-start tokens, or schedules it.
    public func start(key: String, _ request: StartRequest, body: JSONValue, context: WriteContext = .init()) async throws -> StoredResponse {
        try Self.checkKey(key)
        if let at = request.at, at > now() {
            return try await schedule(key: key, action: "start", body: body, at: at, context: context)
        }
        let channelID: String?
        switch request.channel {
        case nil:
            channelID = nil
        case .existing(let id):
            guard let channel = try await store.channel(id: id), channel.deletedAt == nil else {
                throw RelayError(.notFound, code: "not_found", message: "no live channel \(id) made by this server", field: "channel.id")
            }
            channelID = id
        case .create(let policy):
            channelID = try await createChannel(for: key, storagePolicy: policy)
        }
        let acceptedAt = now()
        let payload = LiveActivityPayload(LiveActivityPayload.Fields(
            event: .start, timestamp: acceptedAt, contentState: request.contentState, staleDate: request.staleDate,
            relevanceScore: request.relevanceScore, alert: request.alert, attributesType: request.attributesType,
            attributes: request.attributes, inputPush: channelID.map { .channel($0) } ?? .token))
        let encoded = try encode(payload, for: .device)
        let requestID = UUID().uuidString.lowercased()
        let environment = configuration.environment
        let governor = governor
        let timestamp = unixSeconds(acceptedAt)
        let expiration = request.expiration.map(unixSeconds)
        var context = context
        context.handOver = handOver.offer(at: acceptedAt, policy: configuration.dispatch)
        do {
            let accepted = try await store.acceptStart(
                key: key, attributesType: request.attributesType, audience: request.audience, context: context
            ) { tokens in
                let live = tokens.filter { $0.environment == environment }
                let deliveries = live.map { token in
                    let decision = governor.decide(request.priority, alerting: true, used: 0, frequentPushesEnabled: token.frequentPushesEnabled)
                    return NewDelivery(
                        key: key, event: "start", target: .pushToStartToken(deviceID: token.deviceID, token: token.token), payloadIndex: 0,
                        priority: decision.priority, priorityReason: decision.reason, expiration: expiration, timestamp: timestamp,
                        requestID: requestID)
                }
                let activity = ActivityRecord(
                    key: key, attributesType: request.attributesType, attributes: request.attributes, channelID: channelID,
                    contentState: request.contentState, staleDate: request.staleDate, relevanceScore: request.relevanceScore,
                    startedAt: acceptedAt, lastTimestamp: timestamp)
                var answer: [(String, JSONValue)] = [
                    ("key", .string(key)), ("action", .string("start")), ("requestID", .string(requestID)),
                    ("timestamp", .integer(timestamp)), ("deliveries", .integer(deliveries.count)), ("state", .string("active")),
                ]
                if let channelID { answer.append(("channelID", .string(channelID))) }
                return StartPlan(
                    acceptedAt: acceptedAt, activity: activity, payloads: [encoded], deliveries: deliveries,
                    response: StoredResponse(status: 201, body: JSONValue.object(answer).serialized))
            }
            dispatch(accepted, action: "start")
            return accepted.response
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Updates or ends `key`: one push per live update token, or one broadcast when the key is
    /// bound to a channel; or schedules it.
    public func change(key: String, _ request: ChangeRequest, body: JSONValue, context: WriteContext = .init()) async throws -> StoredResponse {
        try Self.checkKey(key)
        let action = request.event.rawValue
        if let at = request.at, at > now() {
            return try await schedule(key: key, action: action, body: body, at: at, context: context)
        }
        let acceptedAt = now()
        let governor = governor
        let storageWindow = configuration.channelStorageWindow
        let requestID = UUID().uuidString.lowercased()
        let alerting = request.alert != nil
        var context = context
        context.handOver = handOver.offer(at: acceptedAt, policy: configuration.dispatch)
        do {
            // Only `auto` without an alert spends the budget, so only it needs the counts.
            let budgetWindowStart = request.priority == .auto && !alerting ? acceptedAt - 3600 : nil
            let accepted = try await store.acceptChange(key: key, budgetWindowStart: budgetWindowStart, context: context) { snapshot in
                let channelPolicy = snapshot.channel?.storagePolicy
                guard var activity = snapshot.activity else {
                    throw RelayError(.notFound, code: "not_found", message: "no activity key \"\(key)\"; start it first", field: "key")
                }
                guard activity.state == .active else {
                    let when = activity.endedAt.map { " at \(ISO8601DateFormatter().string(from: $0))" } ?? ""
                    throw RelayError(
                        .conflict, code: "activity_ended",
                        message: "activity key \"\(key)\" ended\(when) (\(activity.endReason ?? "ended")); start a new key")
                }
                guard let contentState = request.contentState ?? activity.contentState else {
                    throw RelayError(.invalid, code: "missing", message: "is required: the key has no content to end with", field: "contentState")
                }
                let timestamp = max(unixSeconds(acceptedAt), activity.lastTimestamp + 1)
                var dismissal = ActivityUIDismissalPolicy.default
                if request.event == .end, let date = request.dismissalDate { dismissal = date <= acceptedAt ? .immediate : .after(date) }
                let payload = LiveActivityPayload(LiveActivityPayload.Fields(
                    event: request.event, timestamp: Date(timeIntervalSince1970: TimeInterval(timestamp)), contentState: contentState,
                    staleDate: request.staleDate, dismissalPolicy: dismissal, relevanceScore: request.relevanceScore, alert: request.alert))
                var deliveries: [NewDelivery] = []
                var fanOut: NewPush?
                let encoded: [UInt8]
                if let channelID = activity.channelID {
                    encoded = try self.encode(payload, for: .broadcast)
                    let decision = governor.decide(request.priority, alerting: alerting, used: snapshot.priority10Counts[""] ?? 0, frequentPushesEnabled: false)
                    // A No-Message-Stored channel takes only 0; a stored message lives at most the storage window.
                    let expiration = channelPolicy == 0 ? 0 : (request.expiration.map(unixSeconds) ?? unixSeconds(acceptedAt + storageWindow))
                    deliveries.append(NewDelivery(
                        key: key, event: action, target: .channel(channelID), payloadIndex: 0, priority: decision.priority,
                        priorityReason: decision.reason, expiration: expiration, timestamp: timestamp, requestID: requestID))
                } else {
                    encoded = try self.encode(payload, for: .device)
                    let expiration = request.expiration.map(unixSeconds)
                    if budgetWindowStart == nil {
                        // One priority for all: the store writes a push to each live token itself.
                        let decision = governor.decide(request.priority, alerting: alerting, used: 0, frequentPushesEnabled: false)
                        fanOut = NewPush(
                            key: key, event: action, payloadIndex: 0, priority: decision.priority, priorityReason: decision.reason,
                            expiration: expiration, timestamp: timestamp, requestID: requestID)
                    } else {
                        // A priority for each token, from its own budget.
                        for token in snapshot.liveTokens {
                            let decision = governor.decide(
                                request.priority, alerting: alerting, used: snapshot.priority10Counts[token.deviceID] ?? 0,
                                frequentPushesEnabled: token.frequentPushesEnabled)
                            deliveries.append(NewDelivery(
                                key: key, event: action, target: .activityToken(deviceID: token.deviceID, token: token.token),
                                payloadIndex: 0, priority: decision.priority, priorityReason: decision.reason, expiration: expiration,
                                timestamp: timestamp, requestID: requestID))
                        }
                    }
                }
                activity.contentState = contentState
                activity.staleDate = request.staleDate
                activity.relevanceScore = request.relevanceScore ?? activity.relevanceScore
                activity.lastTimestamp = timestamp
                var channelDeleteAfter: Date?
                if request.event == .end {
                    activity.state = .ended
                    activity.endedAt = acceptedAt
                    activity.endReason = "ended"
                    activity.dismissalDate = request.dismissalDate
                    channelDeleteAfter = acceptedAt + (channelPolicy == 1 ? storageWindow : 0)
                }
                let answer = JSONValue.object([
                    ("key", .string(key)), ("action", .string(action)), ("requestID", .string(requestID)),
                    ("timestamp", .integer(timestamp)), ("deliveries", .integer(deliveries.count + (fanOut == nil ? 0 : snapshot.liveTokenCount))),
                    ("state", .string(activity.state.rawValue)),
                ])
                return ChangePlan(
                    acceptedAt: acceptedAt, activity: activity, payloads: [encoded], deliveries: deliveries, fanOut: fanOut,
                    channelDeleteAfter: channelDeleteAfter, response: StoredResponse(status: 200, body: answer.serialized))
            }
            dispatch(accepted, action: action)
            return accepted.response
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Gives the dispatcher the pushes the request claimed, or wakes it to claim what was queued.
    private func dispatch(_ accepted: Accepted, action: String) {
        metrics.count("liverelay_requests_accepted_total", ["action": action])
        if accepted.claimed.isEmpty {
            outboxSignal.queued()
        } else {
            handOver.give(accepted.claimed)
        }
    }

    /// Validates and encodes a payload, naming the API field at fault.
    private func encode(_ payload: LiveActivityPayload, for destination: LiveActivityPayload.Destination) throws -> [UInt8] {
        do {
            return try payload.encoded(for: destination)
        } catch {
            throw RelayError(error, field: Self.apiField(ofPayloadPath: error.field))
        }
    }

    private static func apiField(ofPayloadPath path: String) -> String? {
        let names = [
            "content-state": "contentState", "stale-date": "staleDate", "relevance-score": "relevanceScore", "alert": "alert",
            "attributes": "attributes", "attributes-type": "attributesType", "dismissal-date": "dismissalDate",
        ]
        guard path.hasPrefix("aps.") else { return nil }
        let rest = path.dropFirst(4)
        let head = rest.prefix { $0 != "." && $0 != "[" }
        guard let name = names[String(head)] else { return nil }
        return name + rest.dropFirst(head.count)
    }

    // MARK: Channels

    private func createChannel(for key: String, storagePolicy: Int) async throws -> String {
        guard let apns, let policy = MessageStoragePolicy(rawValue: storagePolicy) else {
            throw RelayError(.upstream, code: "apns_unavailable", message: "no APNs connection to create a channel with", field: "channel")
        }
        do {
            let id = try await apns.createChannel(bundleID: configuration.bundleID, storagePolicy: policy)
            try await store.saveChannel(ChannelRecord(channelID: id, key: key, storagePolicy: storagePolicy, createdAt: now()))
            return id
        } catch let error as APNsError {
            throw RelayError(.upstream, code: "apns_refused", message: "APNs refused to create the channel: \(error)", field: "channel")
        }
    }

    /// Deletes a channel at APNs and marks it deleted.
    public func deleteChannel(_ id: String) async throws {
        guard let apns else { throw RelayError(.upstream, code: "apns_unavailable", message: "no APNs connection") }
        do {
            try await apns.deleteChannel(id, bundleID: configuration.bundleID)
        } catch let error as APNsError where error.status == 404 || error.reason == .badChannelId || error.reason == .channelNotRegistered {
            // Already gone at APNs.
        } catch let error as APNsError {
            throw RelayError(.upstream, code: "apns_refused", message: "APNs refused to delete the channel: \(error)")
        }
        try await store.markChannelDeleted(id: id, at: now())
    }

    // MARK: Schedules

    private func schedule(key: String, action: String, body: JSONValue, at: Date, context: WriteContext) async throws -> StoredResponse {
        var request = body
        request.remove("at")  // run as given, when due
        let schedule = ScheduleRecord(
            id: "sch_" + randomHex(bytes: 8), key: key, action: action, request: request, dueAt: at, createdAt: now())
        let response = StoredResponse(status: 202, body: RelayView.json(schedule).serialized)
        try await store.insertSchedule(schedule, context: context, response: response)
        metrics.count("liverelay_requests_accepted_total", ["action": "schedule"])
        return response
    }

    public func cancelSchedule(id: String) async throws -> ScheduleRecord {
        do {
            guard let schedule = try await store.cancelSchedule(id: id, at: now()) else {
                throw RelayError(.notFound, code: "not_found", message: "no schedule \(id)", field: "id")
            }
            return schedule
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Runs the schedules that are due; a schedule whose request no longer applies fails with the reason.
    @discardableResult
    public func runDueSchedules() async throws -> Int {
        let due = try await store.dueSchedules(at: now(), limit: 100)
        for schedule in due {
            let context = WriteContext(scheduleID: schedule.id)
            do {
                switch schedule.action {
                case "start":
                    _ = try await start(key: schedule.key, StartRequest(json: schedule.request), body: schedule.request, context: context)
                case "update", "end":
                    let event: LiveActivityPayload.Event = schedule.action == "end" ? .end : .update
                    _ = try await change(key: schedule.key, ChangeRequest(event: event, json: schedule.request), body: schedule.request, context: context)
                default:
                    try await store.failSchedule(id: schedule.id, reason: "unknown action \(schedule.action)")
                }
            } catch let error as RelayError {
                try await store.failSchedule(id: schedule.id, reason: error.description)
            } catch let error as JSONFieldError {
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
    public func describe(key: String) async throws -> JSONValue {
        try Self.checkKey(key)
        guard let activity = try await store.activity(key: key) else {
            throw RelayError(.notFound, code: "not_found", message: "no activity key \"\(key)\"", field: "key")
        }
        let tokens = try await store.activityTokens(key: key)
        let schedules = try await store.schedules(key: key)
        return RelayView.activity(activity, tokens: tokens, schedules: schedules)
    }
}

func randomHex(bytes: Int) -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<bytes).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
}
