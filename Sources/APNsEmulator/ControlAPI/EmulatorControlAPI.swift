import APNs
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import JSONAPI
import LiveActivityKit
import Logging
import WebPages

/// The emulator's JSON control API, on its own port: register keys and tokens, read the journal,
/// script faults. Apple has no such API; it is how tests and people drive and watch the emulator.
///
///     GET    /emulator                    each environment and its ports, counts
///     POST   /keys                        {keyID, teamID, publicKey (PEM, or a .p8), environments?, topics?}
///     GET    /keys
///     POST   /tokens                      {token, bundleID, environment? (sandbox)}
///     GET    /tokens/{token}
///     POST   /tokens/{token}/unregister   {at?}: APNs answers 410 Unregistered from now on
///     POST   /tokens/{token}/expire       APNs answers 410 ExpiredToken
///     GET    /channels?bundleID=
///     PUT    /broadcast-capability        {bundleIDs: [...] or null for every app}
///     GET    /journal?after=&limit=&token=&bundleID=&outcome=
///     GET    /journal/counts
///     POST   /faults                      {action, reason?, status?, delayMilliseconds?, token? | bundleID?, skip?, count?, untilRemoved?}
///     GET    /faults
///     DELETE /faults, /faults/{id}
///     GET    /latency                     each environment's, in milliseconds: {"sandbox": "0", "production": "40-120"}
///     PUT    /latency                     {sandbox?, production?}: "100" or "40-120" (from now on, every answer)
///
/// and the simulated devices' routes (DeviceControlAPI.swift) and page (DevicesPage.swift).
package struct EmulatorControlAPI: Sendable {
    package let emulator: APNsEmulator
    /// How long a request body may take to arrive (`HTTPTimeouts.body`).
    package let bodyTimeout: Duration
    /// What fills the drawn devices' regions.
    package let templates: ActivityTemplates
    /// Carried by the devices page's forms.
    let formToken: String

    package init(emulator: APNsEmulator, bodyTimeout: Duration = HTTPTimeouts().body, templates: ActivityTemplates = .init()) {
        self.emulator = emulator
        self.bodyTimeout = bodyTimeout
        self.templates = templates
        formToken = FormFields.newToken()
    }

    package func router() -> Router<ControlRequestContext> {
        let router = Router(context: ControlRequestContext.self)
        router.add(middleware: APIErrorMiddleware())
        router.add(middleware: LoopbackOnlyMiddleware(formRoutes: ["/person"]))
        router.add(middleware: BodyDeadlineMiddleware(timeout: bodyTimeout))
        router.get("/emulator") { _, _ in status() }
        router.post("/keys") { request, context in
            EditedResponse(status: .created, response: try registerKey(try await request.decodeJSON(KeyBody.self, context: context)))
        }
        router.get("/keys") { _, _ in KeyList(keys: emulator.registry.keys.map(KeyView.init)) }
        router.post("/tokens") { request, context in
            EditedResponse(status: .created, response: try registerToken(try await request.decodeJSON(TokenBody.self, context: context)))
        }
        router.get("/tokens/{token}") { _, context in TokenView(try knownToken(context)) }
        router.post("/tokens/{token}/unregister") { request, context in
            let token = try knownToken(context)
            let body = try await request.decodeJSONIfPresent(UnregisterBody.self, context: context)
            emulator.registry.setState(of: token.hex, to: .unregistered(since: body?.at ?? emulator.configuration.now()))
            return TokenView(try knownToken(context))
        }
        router.post("/tokens/{token}/expire") { _, context in
            emulator.registry.setState(of: try knownToken(context).hex, to: .expired)
            return TokenView(try knownToken(context))
        }
        router.get("/channels") { request, _ in
            ChannelList(channels: emulator.registry.allChannels(of: request.uri.queryParameters["bundleID"].map(String.init)).map(ChannelView.init))
        }
        router.put("/broadcast-capability") { request, context in
            let body = try await request.decodeJSON(CapabilityBody.self, context: context)
            emulator.registry.setBroadcastEnabled(for: body.bundleIDs.map(Set.init))
            return CapabilityBody(bundleIDs: emulator.registry.broadcastEnabledApps.map { $0.sorted() })
        }
        router.get("/journal") { request, _ in try journal(request.uri.queryParameters) }
        router.get("/journal/counts") { _, _ in Counts(counts: emulator.journal.counts, requests: emulator.journal.recordedCount) }
        router.post("/faults") { request, context in
            let fault = try makeFault(try await request.decodeJSON(FaultBody.self, context: context))
            let id = emulator.faults.add(fault)
            return EditedResponse(status: .created, response: FaultView(EmulatorFaults.Installed(id: id, fault: fault, applied: 0)))
        }
        router.get("/faults") { _, _ in FaultList(faults: emulator.faults.installed.map(FaultView.init)) }
        router.delete("/faults") { _, _ in
            emulator.faults.removeAll()
            return HTTPResponse.Status.noContent
        }
        router.delete("/faults/{id}") { _, context in
            guard let id = context.parameters.get("id", as: Int.self), emulator.faults.remove(id: id) else {
                throw APIError.notFound("id", "no fault with this id is in force")
            }
            return HTTPResponse.Status.noContent
        }
        router.get("/latency") { _, _ in latencyView() }
        router.put("/latency") { request, context in
            let body = try await request.jsonObject(fields: PushEnvironment.allCases.map(\.rawValue), context: context)
            var changes: [(LatencySetting, APNsLatency)] = []
            for environment in PushEnvironment.allCases {
                guard let text = try body.string(environment.rawValue) else { continue }
                guard emulator.environments.contains(environment) else {
                    throw APIError.invalid(environment.rawValue, "the emulator does not play \(environment.rawValue)")
                }
                do throws(LatencyError) {
                    changes.append((emulator.latency(environment), try APNsLatency(parsing: text)))
                } catch {
                    throw APIError.invalid(environment.rawValue, error.description)
                }
            }
            for (setting, latency) in changes { setting.latency = latency }
            return latencyView()
        }
        addDeviceRoutes(to: router)
        addDevicesPage(to: router)
        return router
    }

    // MARK: Handlers

    private func latencyView() -> JSONResponse {
        JSONResponse(.object(emulator.environments.map { ($0.rawValue, .string(emulator.latency($0).latency.text)) }))
    }

    private func status() -> Status {
        Status(
            environments: Dictionary(
                uniqueKeysWithValues: emulator.environments.map { environment in
                    let ports = emulator.ports(environment)
                    return (environment.rawValue, Status.Ports(pushPort: ports.push, channelManagementPort: ports.channelManagement))
                }), requests: emulator.journal.recordedCount,
            counts: emulator.journal.counts)
    }

    private func registerKey(_ body: KeyBody) throws -> KeyView {
        guard !body.keyID.isEmpty else { throw APIError.invalid("keyID", "must not be empty") }
        guard !body.teamID.isEmpty else { throw APIError.invalid("teamID", "must not be empty") }
        let publicKey: P256.Signing.PublicKey
        if let key = try? P256.Signing.PublicKey(pemRepresentation: body.publicKey) {
            publicKey = key
        } else if let key = try? P256.Signing.PrivateKey(pemRepresentation: body.publicKey) {
            publicKey = key.publicKey
        } else {
            throw APIError.invalid("publicKey", "must be a P-256 public key in PEM, or the contents of a .p8 file")
        }
        let environments = try Set(
            (body.environments ?? PushEnvironment.allCases.map(\.rawValue)).map { name in
                guard let environment = PushEnvironment(rawValue: name) else {
                    throw APIError.invalid("environments", "must list sandbox and/or production, got \"\(name)\"")
                }
                return environment
            })
        guard !environments.isEmpty else { throw APIError.invalid("environments", "must not be empty") }
        let scope: EmulatorKey.Scope = body.topics.map { .topics(Set($0)) } ?? .team
        let key = EmulatorKey(keyID: body.keyID, teamID: body.teamID, publicKey: publicKey, environments: environments, scope: scope)
        emulator.registry.register(key)
        return KeyView(key)
    }

    private func registerToken(_ body: TokenBody) throws -> TokenView {
        let token: DeviceToken
        let bundleID: BundleID
        do {
            token = try DeviceToken(body.token)
        } catch {
            throw APIError.invalid(error, field: "token")
        }
        do {
            bundleID = try BundleID(body.bundleID)
        } catch {
            throw APIError.invalid(error, field: "bundleID")
        }
        var environment = PushEnvironment.sandbox
        if let name = body.environment {
            guard let chosen = PushEnvironment(rawValue: name) else {
                throw APIError.invalid("environment", "must be sandbox or production, got \"\(name)\"")
            }
            environment = chosen
        }
        var pushType = APNsPushType.liveActivity
        if let name = body.pushType {
            guard let chosen = APNsPushType(rawValue: name) else {
                throw APIError.invalid("pushType", "must be liveactivity, widgets or controls, got \"\(name)\"")
            }
            pushType = chosen
        }
        let registered = EmulatorToken(hex: token.hex, bundleID: bundleID.value, environment: environment, pushType: pushType)
        emulator.registry.register(registered)
        return TokenView(registered)
    }

    private func knownToken(_ context: some RequestContext) throws -> EmulatorToken {
        let hex = try context.parameters.require("token")
        guard let token = emulator.registry.token(hex) else {
            throw APIError.notFound("token", "the emulator knows no token \(hex.prefix(12))…")
        }
        return token
    }

    private func journal(_ query: Parameters) throws -> Journal {
        func integer(_ name: String, default value: Int) throws -> Int {
            guard let text = query[Substring(name)] else { return value }
            guard let number = Int(text), number >= 0 else { throw APIError.invalid(name, "must be a whole number ≥ 0, got \"\(text)\"") }
            return number
        }
        let after = try integer("after", default: 0)
        let limit = try integer("limit", default: 1000)
        let token = query["token"].map { String($0).lowercased() }
        let bundleID = query["bundleID"].map(String.init)
        let outcome = query["outcome"].map(String.init)
        let requests = emulator.journal.requests(after: after, limit: limit) { entry in
            let request = ReceivedRequest(
                connectionID: entry.connectionID, method: entry.method, path: entry.path,
                authority: nil, headers: entry.headers, body: [])
            return (token == nil || request.deviceToken == token)
                && (bundleID == nil || request.bundleID == bundleID)
                && (outcome == nil || entry.outcome == outcome)
        }
        return Journal(requests: requests.map(JournalEntry.init), last: requests.last?.sequence ?? after)
    }

    private func makeFault(_ body: FaultBody) throws -> EmulatorFault {
        let scope: EmulatorFault.Scope
        switch (body.token, body.bundleID) {
        case (nil, nil): scope = .all
        case (let token?, nil):
            guard let hex = try? DeviceToken(token).hex else { throw APIError.invalid("token", "must be a device token in hex") }
            scope = .token(hex)
        case (nil, let bundleID?): scope = .bundleID(bundleID)
        case (_?, _?): throw APIError.invalid("bundleID", "give token or bundleID, not both")
        }
        func reason(default fallback: APNsReason? = nil) throws -> APNsReason {
            guard let text = body.reason else {
                if let fallback { return fallback }
                throw APIError(.badRequest, code: "missing", message: "is required for action \"\(body.action)\"", field: "reason")
            }
            return APNsReason(text)
        }
        let action: EmulatorFault.Action
        switch body.action {
        case "respond":
            let reason = try reason()
            let status = body.status ?? reason.known?.status
            guard let status, (400...599).contains(status) else {
                throw APIError.invalid("status", "must be an HTTP error status (400–599); required for a reason APNs does not document")
            }
            action = .respond(status: status, reason: reason)
        case "delay", "freeze":
            guard let milliseconds = body.delayMilliseconds, milliseconds > 0 else {
                throw APIError.invalid("delayMilliseconds", "must be a positive number of milliseconds for action \"\(body.action)\"")
            }
            action = body.action == "delay" ? .delay(.milliseconds(milliseconds)) : .freeze(.milliseconds(milliseconds))
        case "goaway": action = .goAway(reason: try reason(default: .shutdown))
        case "reset": action = .resetConnection
        case "stall": action = .stall
        case "shutdown": action = .shutdown
        default:
            throw APIError.invalid("action", "must be respond, delay, goaway, reset, stall, freeze or shutdown, got \"\(body.action)\"")
        }
        let skip = body.skip ?? 0
        guard skip >= 0 else { throw APIError.invalid("skip", "must be ≥ 0") }
        if body.untilRemoved == true, body.count != nil {
            throw APIError.invalid("count", "give count or untilRemoved, not both")
        }
        let count = body.untilRemoved == true ? nil : (body.count ?? 1)
        if let count, count < 1 { throw APIError.invalid("count", "must be ≥ 1") }
        return EmulatorFault(action, scope: scope, skip: skip, count: count)
    }
}

/// Request context of the control API: JSON with ISO 8601 dates and keys in a stable order.
package struct ControlRequestContext: RequestContext {
    package var coreContext: CoreRequestContextStorage

    package init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    package var responseEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .iso8601
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }
}

extension Request {
    /// Like `decodeJSON`, but an empty body is `nil`.
    func decodeJSONIfPresent<Body: APIRequestBody>(_ type: Body.Type, context: some RequestContext) async throws -> Body? {
        var request = self
        let buffer = try await request.collectBody(upTo: context.maxUploadSize)
        guard buffer.readableBytes > 0 else { return nil }
        return try await request.decodeJSON(type, context: context)
    }
}

extension APNsEmulator {
    /// The control API as an application listening on the emulator's host; `onRunning` gets the
    /// port it is bound to (0 picks a free one).
    package func controlApplication(
        port: Int = 0, timeouts: HTTPTimeouts = .init(), templates: ActivityTemplates = .init(),
        logger: Logger = Logger(label: "liverelay.emulator.control"), onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: EmulatorControlAPI(emulator: self, bodyTimeout: timeouts.body, templates: templates).router(),
            server: timeouts.server,
            configuration: ApplicationConfiguration(address: .hostname(configuration.host, port: port), serverName: nil),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: logger)
    }
}
