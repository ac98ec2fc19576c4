import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import NIOCore
import ServiceLifecycle
import SimulatedDevices
import WebPages

/// The dashboard at `/dashboard`: pages rendered here from the store, for a person signed in with
/// an admin or viewer key. Every page reads and every form works without JavaScript; with it,
/// pages follow the server's events and swap their live sections.
///
/// Signing in trades the key for a session cookie (`HttpOnly`, `SameSite=Strict`, path
/// `/dashboard`). Every form carries the session's form token, checked before anything else; the
/// sign-in form, before there is a session, a token that must match a cookie of its own.
struct Dashboard: Sendable {
    let relay: RelayService
    /// The built-in emulator's simulated iPhones, drawn on the devices page; `nil` without one.
    let devices: DeviceGallery?
    /// Whether the operator said people reach the dashboard over https (`--public-url https://…`):
    /// its cookies are then `Secure`, as they are on any request a proxy says came over TLS.
    let secureCookies: Bool
    /// What each page took to draw the last time: its live updates are spaced by it.
    let drawCosts: DrawCosts

    private static let forwardedProto = HTTPField.Name("x-forwarded-proto")!
    private static let forwarded = HTTPField.Name("forwarded")!

    static let sessionCookie = "liverelay_session"
    static let signInCookie = "liverelay_sign_in"

    func add(to router: Router<RelayRequestContext>) {
        let open = router.group("/dashboard")
        open.get("/assets/dashboard.css") { _, _ in LivePage.asset(PageStyle.sheet, type: "text/css; charset=utf-8") }
        open.get("/assets/dashboard.js") { _, _ in LivePage.asset(LivePage.script, type: "text/javascript; charset=utf-8") }
        open.get("/assets/icon.svg") { _, _ in LivePage.asset(LivePage.icon, type: "image/svg+xml") }
        // A browser sent to the server itself lands on the dashboard, and finds its icon.
        router.get("/") { _, _ in LivePage.redirect("/dashboard") }
        router.get("/favicon.ico") { _, _ in LivePage.asset(LivePage.icon, type: "image/svg+xml") }
        open.get("/sign-in") { request, _ in
            signInPage(next: Self.localPath(request.uri.queryParameters["next"].map(String.init)), secure: isSecure(request))
        }
        open.post("/sign-in") { request, context in try await signIn(request, context) }

        let signedIn = router.group("/dashboard").add(
            middleware: DashboardSessionMiddleware(relay: relay, hasDevices: devices != nil, drawCosts: drawCosts))
        signedIn.get { _, context in try await overview(context) }
        signedIn.get("/activities") { request, context in try await activities(request, context) }
        signedIn.get("/activity") { request, context in try await activity(request, context) }
        signedIn.post("/activity/change") { request, context in try await change(request, context) }
        signedIn.post("/schedule/cancel") { request, context in try await cancelSchedule(request, context) }
        signedIn.get("/deliveries") { request, context in try await deliveries(request, context) }
        signedIn.get("/device") { request, context in
            guard let id = request.uri.queryParameters["id"].map(String.init), !id.isEmpty else {
                throw APIError.invalid("id", "name the device: ?id=<device id>")
            }
            let tokens = try await relay.deviceTokens(deviceID: id)
            return LivePage.html(DashboardPages.device(id, pushToStart: tokens.pushToStart, surfaces: tokens.surfaces, viewer: try viewer(context)))
        }
        signedIn.post("/deliveries/retry") { request, context in try await retry(request, context) }
        signedIn.get("/event-log") { request, context in try await eventLog(request, context) }
        signedIn.get("/webhooks") { _, context in try await webhooks(context) }
        signedIn.post("/webhooks/act") { request, context in try await webhookAction(request, context) }
        signedIn.get("/channels") { _, context in
            LivePage.html(DashboardPages.channels(try await relay.channels(), viewer: try viewer(context)))
        }
        signedIn.post("/channels/delete") { request, context in try await deleteChannel(request, context) }
        signedIn.get("/api-keys") { _, context in try await apiKeys(context) }
        signedIn.post("/api-keys") { request, context in try await createAPIKey(request, context) }
        signedIn.post("/api-keys/revoke") { request, context in try await revokeAPIKey(request, context) }
        signedIn.post("/sign-out") { request, context in try await signOut(request, context) }
        signedIn.get("/events") { request, _ in events(request) }
        if let devices {
            signedIn.get("/devices") { request, context in try await devicesPage(devices, request, context) }
            signedIn.post("/devices/act") { request, context in try await act(devices, request, context) }
        }
    }

    private func viewer(_ context: RelayRequestContext) throws -> DashboardViewer {
        try context.dashboardViewer(relay, hasDevices: devices != nil)
    }

    // MARK: Signing in and out

    private func signInPage(next: String, error: String? = nil, status: HTTPResponse.Status = .ok, secure: Bool) -> Response {
        let token = FormFields.newToken()
        var response = LivePage.html(DashboardPages.signIn(formToken: token, next: next, error: error), status: status)
        response.setCookie(Self.cookie(Self.signInCookie, token, maxAge: 3600, secure: secure))
        return response
    }

    private func signIn(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        var request = request
        let form = try await FormFields.read(&request, context)
        let next = Self.localPath(form["next"])
        let secure = isSecure(request)
        guard let expected = request.cookies[Self.signInCookie]?.value, form.has("csrf", equalTo: expected) else {
            return signInPage(next: next, error: "This form had run out or came from elsewhere: sign in again.", status: .forbidden, secure: secure)
        }
        guard let secret = form["key"]?.trimmingCharacters(in: .whitespaces), !secret.isEmpty else {
            return signInPage(next: next, error: "key: give an API key.", status: .badRequest, secure: secure)
        }
        do {
            let signedIn = try await relay.signIn(secret: secret, from: context.source)
            var response = LivePage.redirect(next)
            response.setCookie(Self.cookie(Self.sessionCookie, signedIn.cookie, maxAge: Int(RelayService.dashboardSessionLifetime), secure: secure))
            response.setCookie(Self.cookie(Self.signInCookie, "", maxAge: 0, secure: secure))
            return response
        } catch let error as RelayError {
            return signInPage(next: next, error: error.message, status: error.kind.httpStatus, secure: secure)
        }
    }

    private func signOut(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        _ = try await checkedForm(request, context)
        if let cookie = request.cookies[Self.sessionCookie]?.value { try await relay.signOut(cookie: cookie) }
        var response = LivePage.redirect("/dashboard/sign-in")
        response.setCookie(Self.cookie(Self.sessionCookie, "", maxAge: 0, secure: isSecure(request)))
        return response
    }

    // MARK: Pages

    private func overview(_ context: RelayRequestContext) async throws -> Response {
        let viewer = try viewer(context)
        return LivePage.html(
            DashboardPages.overview(
                counts: try await relay.counts(), deliveries: try await relay.waitingAndUnsentCounts(),
                failures: try await relay.deliveries(DeliveryQuery(status: .failed, limit: 500)),
                pushesPerMinute: relay.metrics.pushesPerMinute(upTo: relay.currentDate, count: 30),
                nearBudget: relay.metrics.keysNearBudget(at: relay.currentDate, limit: 20), viewer: viewer))
    }

    private func activities(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let viewer = try viewer(context)
        let size = 50
        var query = try ActivityQuery(parameters: request.queryDictionary(droppingEmpty: true), bundleID: nil, limit: size)
        query.limit = size + 1
        var page = try await relay.activities(query)
        let next = page.count > size ? ActivityCursor(after: page[size - 1]).token : nil
        page = Array(page.prefix(size))
        let contracts = try await relay.contracts(app: nil)
        return LivePage.html(
            DashboardPages.activities(
                page, next: next, filter: query, apps: try await relay.apps().map(\.bundleID),
                types: Array(Set(contracts.map(\.attributesType) + page.map(\.attributesType))).sorted(), viewer: viewer))
    }

    private func activity(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let viewer = try viewer(context)
        let parameters = request.uri.queryParameters
        guard let app = parameters["app"].map(String.init), let key = parameters["key"].map(String.init) else {
            throw APIError.invalid("key", "name the activity: ?app=<bundle id>&key=<key>")
        }
        return LivePage.html(try await activityPage(app: app, key: key, viewer: viewer))
    }

    private func activityPage(app: String, key: String, viewer: DashboardViewer, refused: DashboardPages.RefusedChange? = nil) async throws -> HTML {
        let description = try await relay.describe(app: app, key: key)
        let deliveries = try await relay.deliveries(DeliveryQuery(bundleID: app, key: key, limit: 200))
        let log = try await relay.events(EventQuery(bundleID: app, key: key, limit: 200))
        // With the built-in emulator, the phones that show the activity now, beside its timeline:
        // those whose token is live or ended (an ended activity stays on the Lock Screen until it
        // is dismissed, which its app reports), and those listening to its channel. Drawn live, so
        // that a phone appears when its first token arrives and goes when the activity leaves it.
        var phones: (html: HTML, shows: String)?
        var held: [String] = []
        if let devices {
            let live = description.tokens.filter { $0.state == .live || $0.state == .ended }.map(\.deviceID).filter(devices.fleet.contains)
            let listening = devices.fleet.devices(showingActivitiesOn: Set(description.activity.channelIDs.values))
            held = Array(Set(live + listening).sorted().prefix(4))
            phones = held.isEmpty ? ("", devices.shows(only: [])) : devices.phones(only: held)
        }
        return DashboardPages.activity(
            description, deliveries: deliveries, log: log, phones: phones?.html, viewer: viewer, refused: refused,
            events: viewer.eventsPath(devices: held.map { ("device", $0) }, shows: phones?.shows))
    }

    private func deliveries(_ request: Request, _ context: RelayRequestContext, notice: String? = nil) async throws -> Response {
        let viewer = try viewer(context)
        let size = 100
        var query = try DeliveryQuery(parameters: request.queryDictionary(droppingEmpty: true), bundleID: nil, limit: size)
        query.limit = size + 1
        var page = try await relay.deliveries(query)
        let next = page.count > size ? page[size - 1].id : nil
        page = Array(page.prefix(size))
        return LivePage.html(DashboardPages.deliveries(page, filter: query, next: next, viewer: viewer, notice: notice))
    }

    /// The event log, newest first, of one type or key if asked.
    private func eventLog(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let viewer = try viewer(context)
        let parameters = request.queryDictionary(droppingEmpty: true)
        var query = EventQuery(limit: 200, newestFirst: true)
        if let name = parameters["type"] {
            guard let type = EventType(rawValue: name) else { throw APIError.invalid("type", "is not an event type") }
            query.types = [type]
        }
        if let key = parameters["key"] {
            try RelayService.checkKey(key)
            query.key = key
        }
        return LivePage.html(DashboardPages.eventLog(try await relay.events(query), filter: query, viewer: viewer))
    }

    private func webhooks(_ context: RelayRequestContext, notice: String? = nil, status: HTTPResponse.Status = .ok) async throws -> Response {
        let viewer = try viewer(context)
        var endpoints: [(WebhookEndpointRecord, [WebhookDeliveryRecord])] = []
        for endpoint in try await relay.webhooks(app: nil) {
            endpoints.append((endpoint, try await relay.webhookDeliveries(id: endpoint.id, app: nil, limit: 20)))
        }
        return LivePage.html(DashboardPages.webhooks(endpoints, viewer: viewer, notice: notice), status: status)
    }

    // MARK: Forms that change things

    /// An endpoint's buttons: a test, disable or enable, or an event posted again.
    private func webhookAction(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let (form, _) = try await checkedForm(request, context, changing: true)
        guard let id = form["id"] else { throw APIError.invalid("id", "the form names no endpoint") }
        do {
            switch form["action"] {
            case "test": _ = try await relay.testWebhook(id: id, app: nil)
            case "enable": _ = try await relay.updateWebhook(id: id, app: nil, WebhookChange(enabled: true))
            case "disable": _ = try await relay.updateWebhook(id: id, app: nil, WebhookChange(enabled: false))
            case "redeliver":
                guard let event = form["eventID"] else { throw APIError.invalid("eventID", "the form names no event") }
                try await relay.redeliverWebhookEvent(id: id, app: nil, eventID: event)
            default: throw APIError.invalid("action", "must be test, enable, disable or redeliver")
            }
            return LivePage.redirect("/dashboard/webhooks")
        } catch let error as RelayError where error.kind != .notFound {
            return try await webhooks(context, notice: "\(id): \(error.message)", status: error.kind.httpStatus)
        }
    }

    private func apiKeys(
        _ context: RelayRequestContext, made: DashboardPages.MadeKey? = nil, notice: String? = nil, status: HTTPResponse.Status = .ok
    ) async throws -> Response {
        let viewer = try viewer(context)
        return LivePage.html(
            DashboardPages.apiKeys(
                try await relay.apiKeys(), apps: try await relay.apps(), viewer: viewer, made: made, notice: notice),
            status: status)
    }

    /// Makes a key as `POST /v1/api-keys` does, and shows its secret on the page it answers with
    /// (never in a redirect's address).
    private func createAPIKey(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let (form, _) = try await checkedForm(request, context, changing: true)
        do {
            let name = (form["name"] ?? "").trimmingCharacters(in: .whitespaces)
            guard !name.isEmpty, name.count <= 200 else {
                throw RelayError(.invalid, .invalidValue, message: "must be 1 to 200 characters", field: "name")
            }
            guard let scope = form["scope"].flatMap(APIKeyScope.init(rawValue:)) else {
                throw RelayError(.invalid, .invalidValue, message: "must be \(APIKeyScope.listed)", field: "scope")
            }
            let app = form["bundleID"].flatMap { $0.isEmpty ? nil : $0 }
            let (record, secret) = try await relay.createAPIKey(name: name, scope: scope, app: app)
            return try await apiKeys(context, made: DashboardPages.MadeKey(record: record, secret: secret), status: .created)
        } catch let error as RelayError {
            return try await apiKeys(context, notice: "No key was made: \(error.description)", status: error.kind.httpStatus)
        }
    }

    private func revokeAPIKey(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let (form, _) = try await checkedForm(request, context, changing: true)
        guard let id = form["id"] else { throw APIError.invalid("id", "the form names no key") }
        do {
            try await relay.revokeAPIKey(id: id)
            return LivePage.redirect("/dashboard/api-keys")
        } catch let error as RelayError {
            return try await apiKeys(context, notice: "\(id) was not revoked: \(error.message)", status: error.kind.httpStatus)
        }
    }

    private func deleteChannel(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let (form, viewer) = try await checkedForm(request, context, changing: true)
        guard let id = form["id"] else { throw APIError.invalid("id", "the form names no channel") }
        do {
            try await relay.deleteChannel(id)
            return LivePage.redirect("/dashboard/channels")
        } catch let error as RelayError {
            return LivePage.html(
                DashboardPages.channels(try await relay.channels(), viewer: viewer, notice: "\(id) was not deleted: \(error.message)"),
                status: error.kind.httpStatus)
        }
    }

    /// Sends a failed push again; back to where the button was, or the refusal on the deliveries page.
    private func retry(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let (form, viewer) = try await checkedForm(request, context, changing: true)
        guard let text = form["id"], let id = Int64(text) else { throw APIError.invalid("id", "must be a delivery id") }
        do {
            let retried = try await relay.retryDelivery(id: id, app: nil)
            let back = request.headers[.referer].flatMap(Self.refererPath) ?? DashboardPages.activityPath(app: retried.bundleID, key: retried.key)
            return LivePage.redirect(back)
        } catch let error as RelayError where error.code == .notRetryable {
            let page = try await relay.deliveries(DeliveryQuery(limit: 100))
            return LivePage.html(
                DashboardPages.deliveries(
                    page, filter: DeliveryQuery(), next: nil, viewer: viewer, notice: "Push \(id) was not retried: \(error.message)"),
                status: .conflict)
        }
    }

    /// Updates or ends an activity as `POST /v1/activities/{key}/update` or `/end` would, with the
    /// same rules; a refusal shows the form again with what was typed and the reason.
    private func change(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let (form, viewer) = try await checkedForm(request, context, changing: true)
        guard let app = form["app"], let key = form["key"] else { throw APIError.invalid("key", "the form names no activity") }
        guard let event = form["event"].flatMap(LiveActivityPayload.Event.init(rawValue:)), event != .start else {
            throw APIError.invalid("event", "must be update or end")
        }
        let typed = DashboardPages.RefusedChange(
            event: event.rawValue, contentState: form["contentState"] ?? "", alertTitle: form["alertTitle"] ?? "",
            alertBody: form["alertBody"] ?? "", message: "")
        do {
            var body: JSONValue.Members = []
            let content = typed.contentState.trimmingCharacters(in: .whitespacesAndNewlines)
            if !content.isEmpty {
                do {
                    body.append(("contentState", try JSONValue(parsing: content)))
                } catch {
                    throw JSONFieldError.invalid("contentState", "must be JSON: \(error)")
                }
            }
            if !typed.alertTitle.isEmpty || !typed.alertBody.isEmpty {
                body.append(("alert", .object([("title", .string(typed.alertTitle)), ("body", .string(typed.alertBody))])))
            }
            _ = try await relay.change(app: app, key: key, ChangeRequest(event: event, json: .object(body)), idempotency: nil)
            return LivePage.redirect(DashboardPages.activityPath(app: app, key: key))
        } catch let error as JSONFieldError {
            return try await refusedChange(typed, error.description, status: .badRequest, app: app, key: key, viewer: viewer)
        } catch let error as LiveActivityValidationError {
            return try await refusedChange(typed, error.description, status: .badRequest, app: app, key: key, viewer: viewer)
        } catch let error as RelayError where error.kind != .notFound {
            return try await refusedChange(typed, error.description, status: error.kind.httpStatus, app: app, key: key, viewer: viewer)
        }
    }

    private func refusedChange(
        _ typed: DashboardPages.RefusedChange, _ message: String, status: HTTPResponse.Status, app: String, key: String, viewer: DashboardViewer
    ) async throws -> Response {
        var refused = typed
        refused.message = message
        return LivePage.html(try await activityPage(app: app, key: key, viewer: viewer, refused: refused), status: status)
    }

    private func cancelSchedule(_ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let (form, _) = try await checkedForm(request, context, changing: true)
        guard let id = form["id"] else { throw APIError.invalid("id", "the form names no schedule") }
        let schedule = try await relay.cancelSchedule(id: id)
        return LivePage.redirect(DashboardPages.activityPath(app: schedule.bundleID, key: schedule.key))
    }

    /// The form of a signed-in person, once its form token matches the session's; a form that
    /// changes something also needs an admin key.
    private func checkedForm(
        _ request: Request, _ context: RelayRequestContext, changing: Bool = false
    ) async throws -> (FormFields, DashboardViewer) {
        var request = request
        let viewer = try viewer(context)
        let form = try await FormFields.read(&request, context)
        guard form.has("csrf", equalTo: viewer.formToken) else {
            throw APIError(
                .forbidden, code: "form_token", message: "the form's token is missing or not this session's: load the page again", field: "csrf")
        }
        if changing, !viewer.mayChange {
            throw APIError(.forbidden, code: "wrong_scope", message: "a viewer key watches; changing needs an admin key")
        }
        return (form, viewer)
    }

    // MARK: Live updates

    /// `changed` whenever this process changed what the store holds since the page's revision; on
    /// a page that draws devices (`?devices=all` or `?device=<id>`…) also whenever they change; and
    /// every 5 s on a store other instances share, whose changes this process cannot see.
    private func events(_ request: Request) -> Response {
        let relay = relay
        let query = request.uri.queryParameters
        let named = query.getAll("device")
        let devices = query["devices"] == "all" || !named.isEmpty ? devices : nil
        let only = named.isEmpty ? nil : named
        // The middleware let the stream open with a live session; it ends once the session does.
        let cookie = request.cookies[Self.sessionCookie]?.value ?? ""
        let stillSignedIn: @Sendable () async -> Bool = { (try? await relay.dashboardSession(cookie: cookie)) != nil }
        let page = query["page"].map(String.init)
        return LivePage.events(
            shown: LivePage.shown(request), forcedEvery: relay.isShared ? .seconds(5) : nil, spacing: { [drawCosts] in drawCosts.spacing(page) },
            stillAllowed: stillSignedIn
        ) {
            devices.map { "\(relay.revision).\($0.shows(only: only))" } ?? "\(relay.revision)"
        }
    }

    // MARK: The simulated devices

    private func devicesPage(_ devices: DeviceGallery, _ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let viewer = try viewer(context)
        let only = request.uri.queryParameters["device"].map { [String($0)] }
        let controls = viewer.mayChange ? PersonControls(action: "/dashboard/devices/act", hiddenFields: [("csrf", viewer.formToken)]) : nil
        let (drawn, shows) = devices.draw(only: only, controls: controls)
        let events = viewer.eventsPath(devices: only.map { $0.map { ("device", $0) } } ?? [("devices", "all")], shows: shows)
        return LivePage.html(DashboardPages.devices(drawn, viewer: viewer, events: events))
    }

    /// A drawn iPhone's button: what the person did, then back to the page it was pressed on.
    private func act(_ devices: DeviceGallery, _ request: Request, _ context: RelayRequestContext) async throws -> Response {
        let (form, _) = try await checkedForm(request, context, changing: true)
        do {
            _ = try devices.perform(form)
        } catch let error as DeviceFleet.FleetError {
            throw APIError.notFound("device", error.description)
        }
        return LivePage.redirect(request.headers[.referer].flatMap(Self.refererPath) ?? "/dashboard/devices")
    }

    // MARK: Responses

    static func cookie(_ name: String, _ value: String, maxAge: Int, secure: Bool) -> Cookie {
        Cookie(name: name, value: value, maxAge: maxAge, path: "/dashboard", secure: secure, httpOnly: true, sameSite: .strict)
    }

    /// Whether the browser reached us over TLS: the operator said so, or the proxy in front says
    /// so (`X-Forwarded-Proto: https`, `Forwarded: proto=https`). Believing a client that claims it
    /// costs nothing: its cookies only become stricter.
    private func isSecure(_ request: Request) -> Bool {
        if secureCookies { return true }
        if let proto = request.headers[Self.forwardedProto],
            proto.split(separator: ",").first?.trimmingCharacters(in: .whitespaces).lowercased() == "https"
        {
            return true
        }
        return request.headers[Self.forwarded]?.lowercased().contains("proto=https") == true
    }

    /// The dashboard path of a `Referer` from this server.
    static func refererPath(_ referer: String) -> String? {
        guard let url = URL(string: referer), url.path.hasPrefix("/dashboard") else { return nil }
        return localPath(url.query.map { url.path + "?" + $0 } ?? url.path)
    }

    /// Where to go after signing in: a dashboard path of this server, never another site.
    static func localPath(_ requested: String?) -> String {
        guard let requested, requested.hasPrefix("/dashboard"), !requested.contains("//"), !requested.contains("\\") else { return "/dashboard" }
        return requested
    }
}

/// Lets a request through with a live session: the person's key and form token go into the
/// context. Without one, a page sends the person to sign in (and back after); anything else is 401.
struct DashboardSessionMiddleware: RouterMiddleware {
    typealias Context = RelayRequestContext
    let relay: RelayService

    let hasDevices: Bool
    let drawCosts: DrawCosts

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let cookie = request.cookies[Dashboard.sessionCookie]?.value, !cookie.isEmpty,
            let (session, key) = try await relay.dashboardSession(cookie: cookie)
        else {
            guard request.method == .get, request.uri.path != "/dashboard/events" else {
                return LivePage.html(DashboardPages.error(status: 401, message: "Sign in first.", viewer: nil), status: .unauthorized)
            }
            let back = request.uri.query.map { request.uri.path + "?" + $0 } ?? request.uri.path
            return LivePage.redirect("/dashboard/sign-in?" + QueryString.make([("next", back)]))
        }
        var context = context
        context.apiKey = key
        context.dashboardFormToken = session.formToken
        context.dashboardPage = request.uri.path
        do {
            let started = ContinuousClock.now
            let response = try await next(request, context)
            if request.method == .get, response.status == .ok, response.headers[.contentType]?.hasPrefix("text/html") == true {
                drawCosts.record(request.uri.path, took: ContinuousClock.now - started)
            }
            return response
        } catch {
            // A refusal as a page, in the dashboard's frame; what the API would answer decides the status.
            let answer = APIError(describing: RelayError.asAPIError(error), request: request, context: context)
            let viewer = try? context.dashboardViewer(relay, hasDevices: hasDevices)
            return LivePage.html(
                DashboardPages.error(status: Int(answer.status.code), message: answer.description, viewer: viewer), status: answer.status)
        }
    }
}

extension RelayRequestContext {
    /// Who is signed in, on a route behind `DashboardSessionMiddleware`, and the revision of the
    /// store now: taken before the page reads the store, so that a change made while it renders
    /// still reaches it.
    func dashboardViewer(_ relay: RelayService, hasDevices: Bool) throws -> DashboardViewer {
        guard let key = apiKey, let formToken = dashboardFormToken else {
            throw APIError(.unauthorized, code: "unauthorized", message: "sign in first")
        }
        return DashboardViewer(key: key, formToken: formToken, revision: relay.revision, hasDevices: hasDevices, page: dashboardPage ?? "/dashboard")
    }
}
