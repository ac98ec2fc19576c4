import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import Logging
import NIOCore
import WebPages

/// How the HTTP API guards itself.
package struct RelayAPIConfiguration: Sendable {
    package var host: String
    /// 0 picks a free port.
    package var port: Int
    /// Largest request body accepted (413 beyond).
    package var maximumBodySize: Int
    /// Requests per second each API key may make, and the burst above it (429 with `Retry-After` beyond).
    package var requestsPerSecond: Double
    package var burst: Double
    /// Idle connections (and request heads) 60 s, bodies 30 s.
    package var timeouts: HTTPTimeouts
    /// The built-in emulator's simulated devices, drawn on the dashboard's devices page.
    package var devices: DeviceGallery?
    /// Whether pushes go to the built-in emulator (whose devices are then drawn), not to Apple.
    package var sendsToBuiltInEmulator: Bool { devices != nil }
    /// Where people reach the API and the dashboard, when that is not `host:port` (a proxy in
    /// front of it); an `https://` address makes the dashboard's cookies `Secure`.
    package var publicURL: String?

    package init(
        host: String = "127.0.0.1", port: Int = 8080, maximumBodySize: Int = 64 * 1024, requestsPerSecond: Double = 500, burst: Double = 1000,
        timeouts: HTTPTimeouts = .init(), devices: DeviceGallery? = nil, publicURL: String? = nil
    ) {
        self.devices = devices
        self.publicURL = publicURL
        self.host = host
        self.port = port
        self.maximumBodySize = maximumBodySize
        self.requestsPerSecond = requestsPerSecond
        self.burst = burst
        self.timeouts = timeouts
    }
}

/// Request context of the API: the body limit and the caller's key, once authenticated.
package struct RelayRequestContext: RequestContext {
    package var coreContext: CoreRequestContextStorage
    package var apiKey: APIKeyRecord?
    /// The dashboard session's form token, once signed in there.
    var dashboardFormToken: String?
    var bodyLimit = 64 * 1024

    private let remoteAddress: SocketAddress?
    /// The address the request came from, as failed authentications are counted by it (made
    /// into text only when asked: most requests never are).
    var source: String { remoteAddress?.ipAddress ?? "unknown" }

    package init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        remoteAddress = source.channel.remoteAddress
    }

    package var maxUploadSize: Int { bodyLimit }
}

/// The HTTP API under `/v1`, described by `/openapi.json`.
package struct RelayAPI: Sendable {
    package let relay: RelayService
    package let configuration: RelayAPIConfiguration
    private let limiter: RequestLimiter
    private let wire = RelayWire()

    package init(relay: RelayService, configuration: RelayAPIConfiguration = .init()) {
        self.relay = relay
        self.configuration = configuration
        self.limiter = relay.requestLimiter(rate: configuration.requestsPerSecond, burst: configuration.burst)
    }

    /// The OpenAPI 3.1 document of this API, as shipped in the repository.
    package static let openAPIDocument: [UInt8] = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json"), let data = try? Data(contentsOf: url) else {
            return Array(#"{"openapi":"3.1.0","info":{"title":"LiveRelay","version":"missing"},"paths":{}}"#.utf8)
        }
        return [UInt8](data)
    }()

    package func router() -> Router<RelayRequestContext> {
        let router = Router(context: RelayRequestContext.self)
        let routes = RouteTable()
        router.add(middleware: RequestMetricsMiddleware(metrics: relay.metrics))
        // A span per request, in the caller's trace when it sent `traceparent` (`RelayTracing`).
        router.add(middleware: TracingMiddleware())
        router.add(middleware: APIErrorMiddleware())
        router.add(middleware: MethodNotAllowedMiddleware(table: routes))
        router.add(middleware: RelayErrorMiddleware())
        router.add(middleware: BodyLimitMiddleware(limit: configuration.maximumBodySize))
        router.add(middleware: BodyDeadlineMiddleware(timeout: configuration.timeouts.body))
        router.get("/openapi.json") { _, _ in Self.json(Self.openAPIDocument) }
        router.get("/v1/health") { _, _ in try await health() }
        router.group("/metrics").add(middleware: guarded(.admin, .metrics)).get { _, _ in try await metrics() }

        // The app: its tokens and what the person did. A client key is for one app, which its
        // bodies may name.
        let client = router.group("/v1").add(middleware: guarded(.client))
        client.post("/push-to-start-tokens") { request, context in
            let body = try await request.decodeJSON(PushToStartBody.self, context: context)
            var registration = body.registration
            registration.bundleID = try Self.bodyApp(body.namedApp, context)
            try await relay.registerPushToStartToken(registration)
            return Self.json(.object([("registered", .bool(true))]), status: .created)
        }
        client.post("/push-to-start-tokens/withdraw") { request, context in
            let body = try await request.decodeJSON(WithdrawBody.self, context: context)
            let app = try Self.bodyApp(body.namedApp, context)
            return Self.json(.object([("withdrawn", .integer(try await relay.withdrawPushToStartTokens(deviceID: body.deviceID, bundleID: app)))]))
        }
        client.post("/activities/{key}/tokens") { request, context in
            let key = try activityKey(context)
            let body = try await request.decodeJSON(ActivityTokenBody.self, context: context)
            var registration = body.registration
            registration.bundleID = try Self.bodyApp(body.namedApp, context)
            registration.reportedBy = try Self.reportedBy(request)
            let saved = try await relay.registerActivityToken(key: key, registration)
            var answer: JSONValue.Members = [("key", .string(key)), ("state", .string(saved.activity.state.rawValue))]
            if let caughtUp = saved.caughtUp { answer.append(("caughtUp", .string(caughtUp.push.event.rawValue))) }
            return Self.json(.object(answer), status: .created)
        }
        client.post("/activities/{key}/listening") { request, context in
            let key = try activityKey(context)
            let body = try await request.decodeJSON(ChannelListenerBody.self, context: context)
            var registration = body.registration
            registration.bundleID = try Self.bodyApp(body.namedApp, context)
            registration.reportedBy = try Self.reportedBy(request)
            try await relay.registerChannelListener(key: key, registration)
            return Self.json(.object([("key", .string(key)), ("listening", .bool(true))]), status: .created)
        }
        client.post("/activities/{key}/ended") { request, context in
            let body = try await request.decodeJSON(EndedBody.self, context: context)
            var report = body.report
            report.bundleID = try Self.bodyApp(body.namedApp, context)
            return Self.json(.object([("recorded", .bool(try await relay.reportEnded(key: try activityKey(context), report)))]))
        }

        // The backend: an app's activities by key, deliveries, schedules.
        let server = router.group("/v1").add(middleware: guarded(.server))
        server.post("/activities/{key}/start") { request, context in
            let key = try activityKey(context)
            let app = try await app(request, context)
            return try await idempotent(request, context, app: app) { json, claim in
                try await relay.start(app: app, key: key, StartRequest(json: json), idempotency: claim)
            }
        }
        for event in [LiveActivityPayload.Event.update, .end] {
            server.post("/activities/{key}/\(event.rawValue)") { request, context in
                let key = try activityKey(context)
                let app = try await app(request, context, key: key)
                return try await idempotent(request, context, app: app) { json, claim in
                    try await relay.change(app: app, key: key, ChangeRequest(event: event, json: json), idempotency: claim)
                }
            }
        }
        server.post("/grants") { request, context in
            let body = try await request.decodeJSON(GrantBody.self, context: context)
            let app = try Self.bodyApp(body.namedApp, context)
            let (grant, expiresAt) = try await relay.issueGrant(app: app, key: body.key, user: body.user, expiresIn: body.expiresIn)
            var answer: JSONValue.Members = [("bundleID", .string(app))]
            if let key = body.key { answer.append(("key", .string(key))) }
            if let user = body.user { answer.append(("user", .string(user))) }
            answer += [("grant", .string(grant)), ("expiresAt", .string(expiresAt.iso8601))]
            return Self.json(.object(answer), status: .created)
        }
        server.get("/activities/{key}") { request, context in
            let key = try activityKey(context)
            return Self.json(RelayView.json(try await relay.describe(app: try await app(request, context, key: key), key: key)))
        }
        server.get("/deliveries") { request, context in try await deliveries(request, context) }
        router.group("/v1").add(middleware: guarded(.server, .admin)).get("/events") { request, context in
            let query = try EventQuery(parameters: request.queryDictionary(), bundleID: try Self.appFilter(request, context))
            if let key = query.key { try RelayService.checkKey(key) }
            let page = try await relay.events(query)
            // Where to read on from: after the last event read, or where this read started.
            let next = page.last?.sequence ?? query.after
            return Self.json(.object([("events", .array(page.map(\.json))), ("next", .string(String(next)))]))
        }
        server.post("/deliveries/{id}/retry") { request, context in
            let text = try Self.pathParameter("id", context)
            guard let id = Int64(text) else { throw APIError.invalid("id", "must be a delivery id") }
            let retry = try await relay.retryDelivery(id: id, app: try Self.appFilter(request, context))
            return Self.json(RelayView.json(retry), status: .created)
        }
        server.get("/schedules") { request, context in
            let key = request.uri.queryParameters["key"].map(String.init)
            let schedules = try await relay.schedules(app: try Self.appFilter(request, context), key: key)
            return Self.json(.object([("schedules", .array(schedules.map(RelayView.json)))]))
        }
        server.get("/schedules/{id}") { _, context in
            Self.json(RelayView.json(try await schedule(try Self.pathParameter("id", context), context)))
        }
        server.delete("/schedules/{id}") { _, context in
            let id = try Self.pathParameter("id", context)
            _ = try await schedule(id, context)
            return Self.json(RelayView.json(try await relay.cancelSchedule(id: id)))
        }

        // What an app's widget decodes: registered by each version of the app (or the backend, or
        // the operator), read by the backend, retired by the backend.
        router.group("/v1").add(middleware: guarded(.client, .server, .admin)).put("/contracts/{attributesType}") { request, context in
            let type = try Self.pathParameter("attributesType", context)
            var request = request
            let buffer = try await request.collectBody(upTo: context.maxUploadSize)
            let body = try ContractBody(json: try JSONBodyReader.parse(buffer.readableBytesView), attributesType: type)
            let registration = ContractRegistration(
                contract: body.contract, bundleID: try Self.bodyApp(body.namedApp, context), appVersion: body.appVersion,
                environment: body.environment, pinned: body.pinned, byApp: context.apiKey?.scope == .client)
            return Self.json(RelayView.json(try await relay.registerContract(registration)))
        }
        router.group("/v1").add(middleware: guarded(.server, .admin)).delete("/contracts/{attributesType}") { request, context in
            let type = try Self.pathParameter("attributesType", context)
            let version = request.uri.queryParameters["appVersion"].map(String.init)
            return Self.json(
                RelayView.json(try await relay.retireContract(app: try await app(request, context), attributesType: type, appVersion: version)))
        }
        let reading = router.group("/v1").add(middleware: guarded(.server, .admin, .viewer))
        reading.get("/activities") { request, context in
            let query = try ActivityQuery(parameters: request.queryDictionary(), bundleID: try Self.appFilter(request, context), limit: 50)
            let page = try await relay.activities(query)
            var members: JSONValue.Members = [("activities", .array(page.map(RelayView.json)))]
            if page.count == query.limit, let last = page.last { members.append(("after", .string(ActivityCursor(after: last).token))) }
            return Self.json(.object(members))
        }
        reading.get("/contracts") { request, context in
            let contracts = try await relay.contracts(app: try Self.appFilter(request, context))
            return Self.json(.object([("contracts", .array(contracts.map(RelayView.json)))]))
        }
        reading.get("/contracts/{attributesType}") { request, context in
            let type = try Self.pathParameter("attributesType", context)
            let version = request.uri.queryParameters["appVersion"].map(String.init)
            return Self.json(
                RelayView.json(try await relay.contract(app: try await app(request, context), attributesType: type, appVersion: version)))
        }

        // The operator: apps, keys and channels.
        let admin = router.group("/v1").add(middleware: guarded(.admin))
        admin.get("/apps") { _, _ in
            let contracts = try await relay.contracts(app: nil)
            return Self.json(.object([("apps", .array(try await relay.apps().map { RelayView.json($0, contracts: contracts) }))]))
        }
        admin.get("/apps/{bundleID}") { _, context in
            let app = try await relay.app(try Self.pathParameter("bundleID", context), field: "bundleID")
            return Self.json(RelayView.json(app, contracts: try await relay.contracts(app: app.bundleID)))
        }
        admin.put("/apps/{bundleID}") { [configuration] request, context in
            let body = try await request.decodeJSON(AppBody.self, context: context)
            let (app, isNew) = try await relay.registerApp(try body.registration(bundleID: try Self.pathParameter("bundleID", context)))
            var json = RelayView.json(app, contracts: try await relay.contracts(app: app.bundleID))
            if configuration.sendsToBuiltInEmulator {
                json.set(
                    "warnings",
                    .array([
                        .string(
                            "this server sends every app's pushes to its built-in emulator, not to Apple: start it with APNs credentials to reach iPhones"
                        )
                    ]))
            }
            return Self.json(json, status: isNew ? .created : .ok)
        }
        admin.post("/api-keys") { request, context in
            let body = try await request.decodeJSON(APIKeyBody.self, context: context)
            let (record, secret) = try await relay.createAPIKey(name: body.name, scope: body.scope, app: body.bundleID)
            var view = RelayView.json(record)
            view.set("secret", .string(secret))
            return Self.json(view, status: .created)
        }
        admin.get("/api-keys") { _, _ in
            Self.json(.object([("apiKeys", .array(try await relay.apiKeys().map(RelayView.json)))]))
        }
        admin.delete("/api-keys/{id}") { _, context in
            let id = try Self.pathParameter("id", context)
            try await relay.revokeAPIKey(id: id)
            return Self.json(.object([("id", .string(id)), ("revoked", .bool(true))]))
        }
        admin.get("/channels") { _, _ in
            Self.json(.object([("channels", .array(try await relay.channels().map(RelayView.json)))]))
        }
        admin.delete("/channels/{id}") { _, context in
            let id = try Self.pathParameter("id", context)
            try await relay.deleteChannel(id)
            return Self.json(.object([("channelID", .string(id)), ("deleted", .bool(true))]))
        }
        addWebhookRoutes(to: router)
        Dashboard(relay: relay, devices: configuration.devices, secureCookies: configuration.publicURL?.lowercased().hasPrefix("https://") == true)
            .add(to: router)
        routes.fill(from: router)
        return router
    }

    // MARK: Handlers

    func guarded(_ scopes: APIKeyScope...) -> KeyMiddleware {
        KeyMiddleware(scopes: scopes, relay: relay, limiter: limiter)
    }

    /// Asked by load balancers, without a key: what it reads costs what is waiting to be sent,
    /// never the history (the totals by state are in `/metrics`).
    private func health() async throws -> Response {
        let queued = try await relay.pendingDeliveryCount()
        return Self.json(.object([("status", .string("ok")), ("outbox", .object([("queued", .integer(queued))]))]))
    }

    private func metrics() async throws -> Response {
        let text = try await relay.renderMetrics()
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4"], body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    // MARK: Apps

    /// The app a request acts for: `app` in the query when given (a key for one app may name only
    /// its own), else the key's app, else the server's only app, else the only app that has an
    /// activity under `key` (a request about an existing key is never ambiguous).
    private func app(_ request: Request, _ context: RelayRequestContext, key: String? = nil) async throws -> String {
        if let named = try Self.appFilter(request, context) { return named }
        let apps = try await relay.apps()
        if apps.count == 1 { return apps[0].bundleID }
        if let key, apps.count > 1 {
            let holding = try await relay.apps(holdingKey: key)
            if holding.count == 1 { return holding[0] }
        }
        throw RelayError(
            .invalid, .missing,
            message: apps.isEmpty
                ? "no app is registered (PUT /v1/apps/{bundleID})"
                : "name the app (?app=<bundle id>): this key serves every app, and there are \(apps.count)",
            field: "app")
    }

    /// The app a listing is narrowed to: the key's, or the one the query names (nil: every app).
    static func appFilter(_ request: Request, _ context: RelayRequestContext) throws -> String? {
        let named = request.uri.queryParameters["app"].map(String.init)
        if named?.isEmpty == true { throw APIError.invalid("app", "must be a bundle ID, not empty") }
        guard let bound = context.apiKey?.bundleID else { return named }
        try check(context, mayActFor: named ?? bound, field: "app")
        return bound
    }

    /// The app a body acts for: the one it names (a key for one app may name only its own), else
    /// the key's.
    static func bodyApp(_ named: String?, _ context: RelayRequestContext) throws -> String {
        guard let app = named ?? context.apiKey?.bundleID else {
            throw RelayError(.invalid, .missing, message: "is required: this key serves every app", field: "bundleID")
        }
        try check(context, mayActFor: app)
        return app
    }

    /// `LiveRelayKit-Version: 0.1.0` as `LiveRelayKit 0.1.0`; nil without the header.
    static func reportedBy(_ request: Request) throws -> String? {
        guard let version = request.headers[HTTPField.Name("LiveRelayKit-Version")!] else { return nil }
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: ".-+"))
        guard (1...32).contains(version.count), version.unicodeScalars.allSatisfy({ $0.isASCII && allowed.contains($0) }) else {
            throw RelayError(
                .invalid, .invalidValue, message: "must be 1 to 32 letters, digits, '.', '-' or '+', such as 0.1.0", field: "LiveRelayKit-Version")
        }
        return "LiveRelayKit \(version)"
    }

    /// A key for one app acts only for it.
    private static func check(_ context: RelayRequestContext, mayActFor bundleID: String, field: String = "bundleID") throws {
        guard let bound = context.apiKey?.bundleID, bound != bundleID else { return }
        throw RelayError(.forbidden, .otherApp, message: "this key is for \(bound), not \(bundleID)", field: field)
    }

    /// A schedule the key may see (one of another app does not exist for it).
    private func schedule(_ id: String, _ context: RelayRequestContext) async throws -> ScheduleRecord {
        let schedule = try await relay.schedule(id: id)
        if let bound = context.apiKey?.bundleID, bound != schedule.bundleID { throw APIError.notFound("id", "no schedule \(id)") }
        return schedule
    }

    private func deliveries(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let filter = try DeliveryQuery(parameters: request.queryDictionary(), bundleID: try Self.appFilter(request, context))
        // A key no key can hold is refused, rather than read (PostgreSQL's text holds no NUL).
        if let key = filter.key { try RelayService.checkKey(key) }
        let page = try await relay.deliveries(filter)
        var members: JSONValue.Members = [("deliveries", .array(page.map(RelayView.json)))]
        if page.count == filter.limit, let last = page.last { members.append(("before", .integer(last.id))) }
        return Self.json(.object(members))
    }

    /// Runs a write once per `Idempotency-Key`: the same key with the same request replays the
    /// stored answer; with another request it is refused.
    private func idempotent(
        _ request: Request, _ context: RelayRequestContext, app: String,
        _ perform: (JSONValue, IdempotencyClaim?) async throws -> AcceptedRequest
    ) async throws -> Response {
        var request = request
        let buffer = try await request.collectBody(upTo: context.maxUploadSize)
        let json = buffer.readableBytes == 0 ? JSONValue.object([]) : try JSONBodyReader.parse(buffer.readableBytesView)
        guard let key = request.headers[HTTPField.Name("Idempotency-Key")!], let apiKey = context.apiKey else {
            return answer(try await perform(json, nil))
        }
        guard !key.isEmpty, key.count <= 255 else { throw APIError.invalid("Idempotency-Key", "must be 1 to 255 characters") }
        var hasher = SHA256()
        hasher.update(data: Data("\(request.method.rawValue) \(app) \(request.uri.path)\n".utf8))
        hasher.update(data: Data(buffer.readableBytesView))
        let hash = hasher.finalize().map { String(format: "%02x", $0) }.joined()
        for attempt in 0..<2 {
            if let stored = try await relay.idempotentAnswer(apiKeyID: apiKey.id, key: key) {
                guard stored.requestHash == hash else {
                    throw APIError(
                        .unprocessableContent, code: "idempotency_key_reused",
                        message: "this Idempotency-Key was used with a different request", field: "Idempotency-Key")
                }
                var response: Response
                switch stored.answer {
                case .typed(let accepted): response = answer(accepted)
                case .rendered(let status, let body): response = Self.json(body, status: HTTPResponse.Status(code: status))
                }
                response.headers[HTTPField.Name("Idempotent-Replayed")!] = "true"
                return response
            }
            do {
                let claim = IdempotencyClaim(apiKeyID: apiKey.id, key: key, requestHash: hash)
                return answer(try await perform(json, claim))
            } catch let error as RelayError where error.code == .idempotencyConflict && attempt == 0 {
                continue  // the same key committed concurrently: replay it
            }
        }
        throw APIError(.conflict, code: "idempotency_conflict", message: "the request with this Idempotency-Key is still being processed")
    }

    private func activityKey(_ context: RelayRequestContext) throws -> String {
        try Self.pathParameter("key", context)
    }

    /// A path parameter as the client meant it: percent-decoded (`%3Cx%3E` is `<x>`), as the
    /// OpenAPI document's clients encode it.
    static func pathParameter(_ name: String, _ context: RelayRequestContext) throws -> String {
        let raw = try context.parameters.require(name)
        return raw.removingPercentEncoding ?? raw
    }

    // MARK: Responses

    static func json(_ value: JSONValue, status: HTTPResponse.Status = .ok) -> Response {
        json(value.serialized, status: status)
    }

    static func json(_ bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    /// The answer to an accepted request, fresh or replayed: one rendering for both.
    private func answer(_ accepted: AcceptedRequest) -> Response {
        let (status, body) = wire.answer(accepted)
        return Self.json(body, status: HTTPResponse.Status(code: status))
    }
}

extension RelayAPI {
    /// The API as an application; `onRunning` gets the port it is bound to.
    package func application(
        logger: Logger = Logger(label: "liverelay.http"), onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: router(),
            server: configuration.timeouts.server,
            configuration: ApplicationConfiguration(address: .hostname(configuration.host, port: configuration.port), serverName: nil),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? configuration.port) },
            logger: logger)
    }
}
