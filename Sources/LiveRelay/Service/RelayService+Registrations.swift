import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// What apps send: their tokens, the ends their devices saw, and their contracts.
extension RelayService {
    package func registerPushToStartToken(_ registration: PushToStartRegistration) async throws {
        let app = try await checkApp(bundleID: registration.bundleID, environment: registration.environment)
        try await throttle(app: registration.bundleID, deviceID: registration.deviceID, kind: "push_to_start")
        if let version = registration.appVersion { try Self.checkAppVersion(version, field: "appVersion") }
        if let userID = registration.userID {
            try Self.checkUserID(userID, field: "userID")
            try admitUser(app: app, userID: userID, environment: registration.environment, grant: registration.grant)
        }
        try await store.savePushToStartToken(
            PushToStartTokenRecord(
                bundleID: registration.bundleID, deviceID: registration.deviceID, attributesType: registration.attributesType,
                userID: registration.userID, token: registration.token.hex, frequentPushesEnabled: registration.frequentPushesEnabled,
                environment: registration.environment, updatedAt: now(), systemVersion: registration.systemVersion,
                appVersion: registration.appVersion))
        metrics.count(Metric.registrationsTotal, ["kind": "push_to_start"])
        noteChange()
        logger.info("push-to-start token registered", metadata: ["device": "\(registration.deviceID)", "token": "\(registration.token.shortened)"])
    }

    /// Replaces the device's widget token (and the widgets placed) or its control tokens with
    /// what its widget extension reports; returns how many tokens it holds now.
    @discardableResult
    package func registerSurfaceTokens(_ registration: SurfaceRegistration) async throws -> Int {
        let app = try await checkApp(bundleID: registration.bundleID, environment: registration.environment)
        try await throttle(app: registration.bundleID, deviceID: registration.deviceID, kind: registration.type.rawValue)
        if let version = registration.appVersion { try Self.checkAppVersion(version, field: "appVersion") }
        if let userID = registration.userID {
            try Self.checkUserID(userID, field: "userID")
            try admitUser(app: app, userID: userID, environment: registration.environment, grant: registration.grant)
        }
        let at = now()
        func record(kind: String, token: DeviceToken, widgets: [WidgetPlacement]) -> SurfaceTokenRecord {
            SurfaceTokenRecord(
                bundleID: registration.bundleID, deviceID: registration.deviceID, pushType: registration.type, kind: kind, token: token.hex,
                widgets: widgets, environment: registration.environment, userID: registration.userID, appVersion: registration.appVersion,
                updatedAt: at)
        }
        let records: [SurfaceTokenRecord]
        switch registration.type {
        case .widgets:
            try Self.checkSurfaceList(registration.widgets.map(\.kind), field: "widgets")
            for (index, widget) in registration.widgets.enumerated() {
                try Self.checkName(widget.family, field: "widgets[\(index)].family", longest: 64, example: "systemSmall")
            }
            if registration.widgetToken == nil, !registration.widgets.isEmpty {
                throw RelayError.invalid("token", "is required while widgets are placed; without widgets it withdraws the token")
            }
            records = registration.widgetToken.map { [record(kind: "", token: $0, widgets: registration.widgets)] } ?? []
        case .controls:
            let kinds = registration.controls.map(\.kind)
            try Self.checkSurfaceList(kinds, field: "controls")
            guard Set(kinds).count == kinds.count else { throw RelayError.invalid("controls", "must name each kind once") }
            records = registration.controls.map { record(kind: $0.kind, token: $0.token, widgets: []) }
        }
        try await store.saveSurfaceTokens(app: registration.bundleID, deviceID: registration.deviceID, type: registration.type, records)
        metrics.count(Metric.registrationsTotal, ["kind": registration.type.rawValue])
        noteChange()
        logger.info(
            "\(registration.type.rawValue) tokens registered",
            metadata: ["device": "\(registration.deviceID)", "tokens": "\(records.count)", "app": "\(registration.bundleID)"])
        return records.count
    }

    /// Widget or control kinds: at most `SurfaceRegistration.limit`, each a name of 1 to 200 characters.
    private static func checkSurfaceList(_ kinds: [String], field: String) throws(RelayError) {
        guard kinds.count <= SurfaceRegistration.limit else { throw RelayError.invalid(field, "must list at most \(SurfaceRegistration.limit)") }
        for (index, kind) in kinds.enumerated() { try checkName(kind, field: "\(field)[\(index)].kind", longest: 200) }
    }

    /// Forgets the device's push-to-start tokens of the app (Live Activities switched off on it:
    /// a start would not show); returns how many there were. The app registers new ones when
    /// they are switched on again.
    package func withdrawPushToStartTokens(deviceID: String, bundleID: String) async throws -> Int {
        try await checkApp(bundleID: bundleID)
        try await throttle(app: bundleID, deviceID: deviceID, kind: "withdraw")
        let withdrawn = try await store.withdrawPushToStartTokens(app: bundleID, deviceID: deviceID)
        noteChange()
        logger.info("push-to-start tokens withdrawn", metadata: ["device": "\(deviceID)", "count": "\(withdrawn)"])
        return withdrawn
    }

    /// Registers a device's update token under the key (creating the key when the app started
    /// the activity itself), sends the device the key's latest state when it missed some of it
    /// (`CatchUpPlanner`), and returns the key.
    @discardableResult
    package func registerActivityToken(key: String, _ registration: ActivityTokenRegistration) async throws -> SavedActivityToken {
        try Self.checkKey(key)
        let app = try await checkApp(bundleID: registration.bundleID, environment: registration.environment)
        try await throttle(app: registration.bundleID, deviceID: registration.deviceID, kind: "activity")
        if let version = registration.appVersion { try Self.checkAppVersion(version, field: "appVersion") }
        try await admit(
            app: app, key: key, deviceID: registration.deviceID, environment: registration.environment, grant: registration.grant)
        let registeredAt = now()
        let planner = CatchUpPlanner(governor: governor)
        let requestID = GeneratedUUID.string()
        let catchUp = CatchUp(
            budgetWindowStart: registeredAt - PriorityGovernor.window,
            context: WriteContext(handOver: handOver.offer(at: registeredAt, policy: configuration.dispatch))
        ) { snapshot in planner.plan(snapshot, at: registeredAt, requestID: requestID) }
        do {
            let saved = try await store.saveActivityToken(
                ActivityTokenRecord(
                    bundleID: registration.bundleID, key: key, deviceID: registration.deviceID, activityID: registration.activityID,
                    token: registration.token.hex, frequentPushesEnabled: registration.frequentPushesEnabled,
                    environment: registration.environment, registeredAt: registeredAt, reportedBy: registration.reportedBy,
                    appVersion: registration.appVersion),
                attributesType: registration.attributesType, catchUp: catchUp)
            metrics.count(Metric.registrationsTotal, ["kind": "activity"])
            noteChange()
            logger.info(
                "activity token registered",
                metadata: ["activity.key": "\(key)", "device": "\(registration.deviceID)", "token": "\(registration.token.shortened)"])
            if let caughtUp = saved.caughtUp {
                metrics.count(Metric.catchUpsTotal, ["event": caughtUp.push.event.rawValue])
                logger.info(
                    "device caught up with its key's latest state",
                    metadata: ["activity.key": "\(key)", "device": "\(registration.deviceID)", "event": "\(caughtUp.push.event.rawValue)"])
                if saved.claimed.isEmpty { outboxSignal.queued() } else { handOver.give(saved.claimed) }
            }
            return saved
        } catch let error as StoreError {
            throw RelayError(error)
        }
    }

    /// Records that the device's channel-bound activity listens to the key's channel: the one the
    /// key has in the device's environment, which the report may name (it must then be that one).
    package func registerChannelListener(key: String, _ registration: ChannelListenerRegistration) async throws {
        try Self.checkKey(key)
        let app = try await checkApp(bundleID: registration.bundleID, environment: registration.environment)
        try await throttle(app: registration.bundleID, deviceID: registration.deviceID, kind: "channel_listener")
        try await admit(
            app: app, key: key, deviceID: registration.deviceID, environment: registration.environment, grant: registration.grant)
        guard let activity = try await store.activity(app: registration.bundleID, key: key) else {
            throw RelayError.notFound("key", "no activity key \"\(key)\"")
        }
        let environment = registration.environment.rawValue
        guard let channelID = activity.channelIDs[registration.environment] else {
            throw RelayError(.conflict, .otherChannel, message: "the key has no channel in \(environment)", field: "channelID")
        }
        if let named = registration.channelID, named != channelID {
            throw RelayError(
                .conflict, .otherChannel, message: "\(named) is not the key's channel: its channel in \(environment) is \(channelID)",
                field: "channelID")
        }
        do {
            try await store.saveChannelListener(
                ChannelListenerRecord(
                    bundleID: registration.bundleID, key: key, deviceID: registration.deviceID, activityID: registration.activityID,
                    channelID: channelID, environment: registration.environment, registeredAt: now(),
                    reportedBy: registration.reportedBy))
        } catch let error as StoreError {
            throw RelayError(error)
        }
        metrics.count(Metric.registrationsTotal, ["kind": "channel_listener"])
        noteChange()
        logger.info("channel listener registered", metadata: ["activity.key": "\(key)", "device": "\(registration.deviceID)"])
    }

    /// Records that the activity ended or was dismissed on the device; false when the device
    /// reported neither a token nor a channel under the key.
    package func reportEnded(key: String, _ report: EndedReport) async throws -> Bool {
        try Self.checkKey(key)
        try await checkApp(bundleID: report.bundleID)
        try await throttle(app: report.bundleID, deviceID: report.deviceID, kind: "ended")
        guard try await store.activity(app: report.bundleID, key: key) != nil else {
            throw RelayError.notFound("key", "no activity key \"\(key)\"")
        }
        defer { noteChange() }
        return try await store.endActivityOnDevice(
            app: report.bundleID, key: key, deviceID: report.deviceID, state: report.state, cause: report.cause, at: report.at ?? now())
    }

    /// Whether a device may report under a key: in an environment its app takes reports from
    /// without grants (sandbox, unless the operator says otherwise); or the key knows the device
    /// (its start was sent there, or it reported under the key before); or the report carries the
    /// backend's grant for the key. Otherwise `403`, and nothing is stored.
    func admit(app: AppRecord, key: String, deviceID: String, environment: PushEnvironment, grant: String?) async throws {
        guard !app.ungrantedReports.contains(environment), try await !store.deviceKnownToKey(app: app.bundleID, key: key, deviceID: deviceID)
        else { return }
        try requireGrant(
            grant, app: app.bundleID, for: .key(key),
            missing:
                "the key's start was not sent to this device, and \(environment.rawValue) reports of \(app.bundleID) need the backend's grant for the key"
        )
    }

    /// Whether a push-to-start token may be kept with `userID`: in an environment its app takes
    /// ungranted reports from, or with the backend's grant for that user. Otherwise `403`: any
    /// install could claim a user id, and be started with that user's activities.
    func admitUser(app: AppRecord, userID: String, environment: PushEnvironment, grant: String?) throws {
        guard !app.ungrantedReports.contains(environment) else { return }
        try requireGrant(
            grant, app: app.bundleID, for: .user(userID),
            missing: "\(environment.rawValue) push-to-start tokens of \(app.bundleID) name a user only with the backend's grant for that user")
    }

    /// Passes with this server's grant for `scope`; otherwise `403` (`missing` says what a report
    /// without one lacks), counted by reason.
    private func requireGrant(_ grant: String?, app: String, for scope: ActivityGrant.Scope, missing: String) throws {
        do throws(RelayError) {
            guard let grant else { throw RelayError(.forbidden, .grantRequired, message: missing + " (POST /v1/grants)", field: "grant") }
            try ActivityGrant.check(grant, app: app, for: scope, secret: grantSecret, at: now())
        } catch {
            metrics.count(.reportsRefusedTotal, ["reason": error.code.rawValue])
            throw error
        }
    }

    /// A grant for the app's key or user (or both), for the backend to hand its app
    /// (`ActivityGrant`), valid for `expiresIn` seconds (an hour unless told; at most a day).
    package func issueGrant(
        app bundleID: String, key: String?, user: String?, expiresIn: TimeInterval?
    ) async throws -> (grant: String, expiresAt: Date) {
        guard key != nil || user != nil else { throw RelayError(.invalid, .missing, message: "is required, or user", field: "key") }
        if let key { try Self.checkKey(key) }
        if let user { try Self.checkUserID(user, field: "user") }
        _ = try await app(bundleID)
        let lifetime = expiresIn ?? ActivityGrant.defaultLifetime
        guard lifetime >= 1, lifetime <= ActivityGrant.longestLifetime else {
            throw RelayError.invalid("expiresIn", "must be 1 to \(Int(ActivityGrant.longestLifetime)) seconds")
        }
        let grant = ActivityGrant(app: bundleID, key: key, user: user, expiresAt: now() + lifetime)
        return (grant.signed(with: grantSecret), grant.expiresAt)
    }

    /// Takes one of the device's reports (`DeviceReportLimits`), or refuses it with `429` and
    /// how long to wait: an app in a loop, or an install flooding the registry, is held back
    /// without holding back the app's other devices or the backend.
    func throttle(app: String, deviceID: String, kind: String) async throws {
        guard let wait = try await deviceReports.take("device \(app) \(deviceID)", at: now()) else { return }
        metrics.count(.reportsThrottledTotal, ["kind": kind])
        let date = now()
        let logNow = deviceThrottleLogged.withLock { last in
            guard last.map({ date.timeIntervalSince($0) >= 60 }) ?? true else { return false }
            last = date
            return true
        }
        if logNow {
            logger.warning(
                "a device reports faster than a device may (logged once a minute)", metadata: ["app": "\(app)", "device": "\(deviceID)"])
        }
        throw RelayError(
            .throttled, .deviceRateLimited,
            message:
                "this device reported more than \(Int(configuration.deviceReports.burst)) times at once, \(configuration.deviceReports.perSecond) a second after; retry after \(wait) s",
            field: "deviceID", retryAfter: wait)
    }

    /// An app's report names a registered app, and a token one of the environments served.
    @discardableResult
    func checkApp(bundleID: String, environment: PushEnvironment? = nil) async throws -> AppRecord {
        let app = try await app(bundleID, field: "bundleID")
        guard let environment else { return app }
        guard environments.contains(environment) else {
            let served = PushEnvironment.allCases.filter(environments.contains).map(\.rawValue).joined(separator: " and ")
            throw RelayError.invalid(
                "environment", "this server sends to APNs \(served) only; a \(environment.rawValue) token would never be reached")
        }
        return app
    }

    /// A user id, as the backend names its users: 1 to 200 characters without control characters.
    static func checkUserID(_ id: String, field: String) throws(RelayError) {
        try checkName(id, field: field, longest: 200)
    }

    /// An app version, as the app says it (`2.1 (45)`): 1 to 64 characters without control characters.
    static func checkAppVersion(_ version: String, field: String) throws(RelayError) {
        try checkName(version, field: field, longest: 64, example: "2.1 (45)")
    }

    /// A name someone else chose: 1 to `longest` characters (Unicode scalars) without control characters.
    static func checkName(_ name: String, field: String, longest: Int, example: String? = nil) throws(RelayError) {
        guard !name.isEmpty, name.unicodeScalars.count <= longest, !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
        else {
            throw RelayError.invalid(
                field, "must be 1 to \(longest) characters without control characters" + (example.map { ", such as \"\($0)\"" } ?? ""))
        }
    }

    /// Keys are chosen by the backend: 1 to 200 characters (Unicode scalars, as the OpenAPI
    /// document counts them), no whitespace or control characters.
    /// A key the backend may choose: also what a `key` filter must be (PostgreSQL's text holds no NUL).
    package static func checkKey(_ key: String) throws {
        guard !key.isEmpty, key.unicodeScalars.count <= 200,
            !key.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F })
        else { throw RelayError.invalid("key", "must be 1 to 200 characters without spaces or control characters") }
    }

    /// Registers what a version of the app's widget decodes `contract.attributesType` from: the
    /// requests that follow are checked against it, for the devices on that version. An app (a
    /// client key) adds its own version's contract, and never replaces one another contract holds:
    /// a shipped build's types never change, so a different one under its version is an attack or
    /// a mistake. But a development build's (one registered from an environment the app takes
    /// ungranted reports from, sandbox unless the operator says otherwise) may be replaced:
    /// builds change under one version all day there. A contract keeps the environment it was
    /// first registered from while its shape stays, so that registering a production build's
    /// again as a development one unlocks nothing. The backend (a server or admin key) may
    /// replace any, and pin one (`ContractRecord.pinned`).
    package func registerContract(_ registration: ContractRegistration) async throws -> ContractRecord {
        let app = try await checkApp(bundleID: registration.bundleID)
        let type = registration.contract.attributesType
        if let version = registration.appVersion { try Self.checkAppVersion(version, field: "appVersion") }
        let version = registration.appVersion ?? ContractRecord.anyVersion
        let kept = try await contracts(app: registration.bundleID)
        let existing = kept.first { $0.attributesType == type && $0.appVersion == version }
        let named = version == ContractRecord.anyVersion ? "any app version" : "app version \(version)"
        let unchanged = existing.map { $0.contract.sortingKeys == registration.contract.json.sortingKeys } ?? false
        if registration.byApp {
            if registration.pinned != nil {
                throw RelayError(.forbidden, .wrongScope, message: "only the backend (a server or admin key) pins a version", field: "pinned")
            }
            // A stored contract that no longer reads is registered again, whoever does it.
            if let existing, !unchanged,
                !(existing.registeredIn.map(app.ungrantedReports.contains) ?? false),
                (try? ActivityContract(json: existing.contract, name: type)) != nil
            {
                metrics.count(.reportsRefusedTotal, ["reason": RelayError.Code.contractVersionKept.rawValue])
                throw RelayError(
                    .forbidden, .contractVersionKept,
                    message:
                        "\(type) has another contract for \(named): an app adds its own version's contract and never replaces one (a new build is a new version; the backend may replace it with its server key)",
                    field: "appVersion")
            }
        }
        if existing == nil, kept.count >= configuration.deviceReports.contractsPerApp,
            try await store.prune(.unusedContractVersions, before: now() - Self.contractRoomAge, limit: 1)["contracts", default: 0] == 0
        {
            throw RelayError(
                .conflict, .tooManyContracts,
                message:
                    "an app may keep \(configuration.deviceReports.contractsPerApp) contracts (attributes types by app version); retire old versions with DELETE /v1/contracts/{attributesType}?appVersion=",
                field: "attributesType")
        }
        let record = ContractRecord(
            bundleID: registration.bundleID, attributesType: type, appVersion: version, contract: registration.contract.json, updatedAt: now(),
            pinned: registration.pinned ?? existing?.pinned ?? false,
            registeredIn: !registration.byApp ? nil : unchanged ? existing?.registeredIn : registration.environment)
        try await store.saveContract(record)
        contractBook.invalidate()
        metrics.count(Metric.registrationsTotal, ["kind": "contract"])
        noteChange()
        logger.info("contract registered", metadata: ["app": "\(registration.bundleID)", "attributes.type": "\(type)", "app.version": "\(version)"])
        return record
    }

    /// How long a version's contract is kept before a new one may take its room, when no live
    /// token has its version: versions made up with the public client key (which no device runs)
    /// cannot fill an app's room for contracts, and a version just registered keeps its place
    /// until its devices report their tokens.
    static let contractRoomAge: TimeInterval = 3_600

    /// Forgets one version's contract of a type (the backend retires a version its devices have
    /// left); `404` when there is none.
    package func retireContract(app bundleID: String, attributesType: String, appVersion: String?) async throws -> ContractRecord {
        let record = try await contract(app: bundleID, attributesType: attributesType, appVersion: appVersion ?? ContractRecord.anyVersion)
        guard try await store.deleteContract(app: bundleID, attributesType: attributesType, appVersion: record.appVersion) else {
            throw RelayError.notFound("appVersion", "no contract of \(attributesType) for that version")
        }
        contractBook.invalidate()
        noteChange()
        logger.info(
            "contract retired", metadata: ["app": "\(bundleID)", "attributes.type": "\(attributesType)", "app.version": "\(record.appVersion)"])
        return record
    }

    /// The contracts of an app (nil: of every app).
    package func contracts(app bundleID: String?) async throws -> [ContractRecord] {
        try await store.contracts().filter { bundleID == nil || $0.bundleID == bundleID }
    }

    /// A type's contract for an app version; without one named, the one registered last.
    package func contract(app bundleID: String, attributesType: String, appVersion: String? = nil) async throws -> ContractRecord {
        let versions = try await contracts(app: bundleID).filter { $0.attributesType == attributesType }
        let found = appVersion.map { version in versions.first { $0.appVersion == version } } ?? versions.max { $0.updatedAt < $1.updatedAt }
        guard let record = found else {
            let which = appVersion.map { $0.isEmpty ? " for any app version" : " for app version \($0)" } ?? ""
            throw RelayError.notFound("attributesType", "no contract registered for \(attributesType) of \(bundleID)\(which)")
        }
        return record
    }

    func currentContracts(app bundleID: String) async throws -> AppContracts {
        try await contractBook.value(from: store)[bundleID] ?? AppContracts()
    }
}
