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
    /// The dashboard page asked for, its path.
    var dashboardPage: String?
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
    /// What each dashboard page took to draw the last time: its live updates are spaced by it.
    package let dashboardDrawCosts = DrawCosts()

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
        // A span per request, in the caller's trace when it sent `traceparent` (`RelayTracing`);
        // none without a tracer, whose spans would go nowhere at 10 µs a request.
        if RelayTracing.isOn { router.add(middleware: TracingMiddleware()) }
        router.add(middleware: APIErrorMiddleware())
        router.add(middleware: MethodNotAllowedMiddleware(table: routes))
        router.add(middleware: RelayErrorMiddleware())
        router.add(middleware: BodyLimitMiddleware(limit: configuration.maximumBodySize))
        router.add(middleware: BodyDeadlineMiddleware(timeout: configuration.timeouts.body))
        router.get("/openapi.json") { _, _ in Self.json(Self.openAPIDocument) }
        router.get("/v1/health") { _, _ in try await health() }
        router.group("/metrics").add(middleware: guarded(.admin, .metrics)).get { _, _ in try await metrics() }

        // A file of routes per resource (`Routes/`).
        addReportRoutes(to: router)
        addActivityRoutes(to: router)
        addGrantRoutes(to: router)
        addHistoryRoutes(to: router)
        addScheduleRoutes(to: router)
        addContractRoutes(to: router)
        addAppRoutes(to: router)
        addAPIKeyRoutes(to: router)
        addChannelRoutes(to: router)
        addWebhookRoutes(to: router)
        Dashboard(
            relay: relay, devices: configuration.devices, secureCookies: configuration.publicURL?.lowercased().hasPrefix("https://") == true,
            drawCosts: dashboardDrawCosts
        ).add(to: router)
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
    func app(_ request: Request, _ context: RelayRequestContext, key: String? = nil) async throws -> String {
        if let named = try Self.appFilter(request, context) { return named }
        let apps = try await relay.apps()
        if apps.count == 1 { return apps[0].bundleID }
        if let key, apps.count > 1 {
            let holding = try await relay.apps(holdingKey: key, among: apps)
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
    func schedule(_ id: String, _ context: RelayRequestContext) async throws -> ScheduleRecord {
        let schedule = try await relay.schedule(id: id)
        if let bound = context.apiKey?.bundleID, bound != schedule.bundleID { throw APIError.notFound("id", "no schedule \(id)") }
        return schedule
    }

    func deliveries(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
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
    func idempotent(
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
                var response = answer(stored.answer)
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

    func activityKey(_ context: RelayRequestContext) throws -> String {
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
    func answer(_ accepted: AcceptedRequest) -> Response {
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
