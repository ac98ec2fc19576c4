import APNs
import APNsEmulator
import AsyncHTTPClient
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import LiveRelayTesting
import NIOCore
import NIOHTTP1
import SimulatedDevices
import Testing
import WebPages

/// The dashboard over HTTP as a browser without JavaScript sees it: sessions, form tokens, scopes,
/// escaping, and the activity listing it shares with the API. (A real browser: `DashboardBrowserTests`.)
@Suite(.timeLimit(.minutes(2)))
struct DashboardTests {
    @Test func anAdminKeySignsInToACookieThatIsHttpOnlyStrictAndForTheDashboardOnly() async throws {
        try await withRelayHarness { relay in
            let browser = DashboardBrowser(relay)
            // A browser sent to the server itself lands on the dashboard, and finds an icon.
            let root = try await browser.get("/")
            #expect(root.status == 303 && root.location == "/dashboard")
            for icon in ["/favicon.ico", "/dashboard/assets/icon.svg"] {
                let answer = try await browser.get(icon)
                #expect(answer.status == 200 && answer.header("content-type") == "image/svg+xml" && answer.text.hasPrefix("<svg"), "\(icon)")
            }
            let first = try await browser.get("/dashboard/activities?state=active")
            #expect(first.status == 303)
            #expect(first.location == "/dashboard/sign-in?next=/dashboard/activities%3Fstate%3Dactive")

            let form = try await browser.get("/dashboard/sign-in")
            #expect(form.status == 200)
            let signInCookie = try #require(form.setCookies.first { $0.hasPrefix("liverelay_sign_in=") })
            #expect(signInCookie.contains("HttpOnly") && signInCookie.contains("SameSite=Strict") && signInCookie.contains("Path=/dashboard"))

            let signedIn = try await browser.signIn(key: try #require(relay.keys[.admin]), next: "/dashboard/activities")
            #expect(signedIn.status == 303)
            #expect(signedIn.location == "/dashboard/activities")
            let session = try #require(signedIn.setCookies.first { $0.hasPrefix("liverelay_session=") })
            #expect(session.contains("HttpOnly") && session.contains("SameSite=Strict") && session.contains("Path=/dashboard"))
            #expect(!session.contains(try #require(relay.keys[.admin])))

            let overview = try await browser.get("/dashboard")
            #expect(overview.status == 200)
            #expect(overview.text.contains("<h1>Overview</h1>"))
            #expect(overview.header("content-security-policy")?.contains("default-src 'self'") == true)
            #expect(overview.header("cache-control") == "no-store")

            // Signing out ends the session on the server, not only in this browser.
            let stolen = browser.cookies["liverelay_session"]
            #expect(try await browser.post("/dashboard/sign-out", [:]).status == 303)
            let other = DashboardBrowser(relay)
            other.cookies["liverelay_session"] = stolen
            #expect(try await other.get("/dashboard").status == 303)
        }
    }

    /// A page's live stream ends soon after its session does (signed out here; a revoked key the
    /// same), at its next heartbeat, instead of running on for its 600 s.
    @Test(arguments: ["sign out", "revoke the key"])
    func aLiveStreamEndsWithItsSession(ending: String) async throws {
        try await withRelayHarness { relay in
            let browser = DashboardBrowser(relay)
            let admin = try await relay.relay.createAPIKey(name: "watcher", scope: .admin, app: nil)
            _ = try await browser.signIn(key: admin.secret)
            let stream = try await browser.open("/dashboard/events?since=0")
            #expect(stream.status == .ok)
            let started = ContinuousClock.now
            let read = Task { try await stream.body.collect(upTo: 1 << 20) }
            if ending == "sign out" {
                #expect(try await browser.post("/dashboard/sign-out", [:]).status == 303)
            } else {
                try await relay.relay.revokeAPIKey(id: admin.record.id)
            }
            let text = String(buffer: try await withDeadline(.seconds(15)) { try await read.value })
            #expect(ContinuousClock.now - started < .seconds(12))
            #expect(text.hasPrefix("retry: 2000"))
            // Reopened, as the browser would, it is refused.
            #expect(try await browser.open("/dashboard/events?since=0").status == .unauthorized)
        }
    }

    /// Behind a proxy that ends TLS the cookies are `Secure`: when the operator gives an https
    /// public URL, or the proxy says the request came over https; on plain loopback they are not.
    @Test(
        arguments: [(nil, nil, false), (nil, "https", true), (nil, "http", false), ("https://relay.example.com", nil, true)]
            as [(String?, String?, Bool)])
    func cookiesAreSecureWhenPeopleComeOverTLS(publicURL: String?, forwardedProto: String?, secure: Bool) async throws {
        try await withRelayHarness(configure: { _, api in api.publicURL = publicURL }) { relay in
            let browser = DashboardBrowser(relay)
            if let forwardedProto { browser.headers = [("x-forwarded-proto", forwardedProto)] }
            let form = try await browser.get("/dashboard/sign-in")
            let signedIn = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let cookies = form.setCookies + signedIn.setCookies
            #expect(cookies.count == 3)
            for cookie in cookies { #expect(cookie.contains("; Secure") == secure, "\(cookie)") }
        }
    }

    /// The activity page draws the phones that show the key now: none before a device reports
    /// it, the phone once its token arrives (the section is live) and while the ended activity is
    /// on its Lock Screen, none once the person dismissed it there (not the phone's other activities); a channel-bound key's phone, which reports no
    /// token. The update form holds the key's current content, live.
    @Test func theActivityPageDrawsThePhonesThatShowItNow() async throws {
        try await withRelayHarness { relay in
            relay.emulator.registry.setBroadcastEnabled(for: nil)
            try await relay.addRegisteredDevice("iphone-1")
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            func page(_ key: String) async throws -> String { try await browser.get("/dashboard/activity?app=\(harnessApp)&key=\(key)").text }
            let phones = #"<aside class="on-device" data-live id="activity-phones">"#

            _ = try await relay.post("/v1/activities/k/start", startBody(key: "k"))
            let before = try await page("k")
            #expect(before.contains(phones) && before.contains("No device shows it now.") && !before.contains(#"id="phone-iphone-1""#))
            try await relay.dispatch()
            try await relay.waitForToken("k", device: "iphone-1")
            #expect(try await page("k").contains(#"id="phone-iphone-1""#))

            _ = try await relay.post("/v1/activities/k/update", .object([("contentState", content("on the way", 10))]))
            #expect(try await page("k").contains(#"<div data-live id="activity-change">"#))
            #expect(try await page("k").contains("&quot;on the way&quot;"))

            let channelKey = try await relay.post(
                "/v1/activities/match-7/start", startBody(key: "match-7", extra: [("channel", json(#"{"storagePolicy": 1}"#))]))
            #expect(channelKey.status == 201)
            try await relay.dispatch()
            try await eventually { try relay.emulator.devices.device("iphone-1").activities.count == 2 }
            #expect(try await page("match-7").contains(#"id="phone-iphone-1""#))

            // Ended, it stays on the Lock Screen until it is dismissed: still drawn.
            _ = try await relay.post("/v1/activities/k/end", .object([("contentState", content("delivered", 0))]))
            try await relay.dispatch()
            try await eventually { try relay.emulator.devices.device("iphone-1").activities.first { $0.pushType == .token }?.state == .ended }
            #expect(try await page("k").contains(#"id="phone-iphone-1""#))

            let first = try #require(try relay.emulator.devices.device("iphone-1").activities.first { $0.pushType == .token })
            try relay.emulator.devices.perform(.dismiss(activityID: first.id), on: "iphone-1")
            try await eventually { try await relay.store.activityTokens(app: harnessApp, key: "k").first?.state == .dismissed }
            let after = try await page("k")
            #expect(after.contains("No device shows it now.") && !after.contains(#"id="phone-iphone-1""#))
        }
    }

    @Test func badSignInsAreRefusedWithTheReason() async throws {
        try await withRelayHarness { relay in
            let browser = DashboardBrowser(relay)
            let unknown = try await browser.signIn(key: "lr_admin_000000")
            #expect(unknown.status == 401)
            #expect(unknown.text.contains("the API key is unknown or revoked"))
            let server = try await browser.signIn(key: try #require(relay.keys[.server]))
            #expect(server.status == 403)
            #expect(server.text.contains("the dashboard takes an admin or viewer key"))
            let empty = try await browser.signIn(key: "")
            #expect(empty.status == 400)
            #expect(empty.text.contains("key: give an API key."))
            // A sign-in form posted from elsewhere has no token matching this browser's cookie.
            _ = try await browser.get("/dashboard/sign-in")
            let forged = try await browser.post("/dashboard/sign-in", ["key": try #require(relay.keys[.admin]), "csrf": "guessed"])
            #expect(forged.status == 403)
            for answer in [unknown, server, empty, forged] {
                #expect(!answer.setCookies.contains { $0.hasPrefix("liverelay_session=") && !$0.hasPrefix("liverelay_session=;") })
            }
            // The next page is always one of the dashboard's.
            let elsewhere = try await browser.signIn(key: try #require(relay.keys[.admin]), next: "//evil.example/dashboard")
            #expect(elsewhere.location == "/dashboard")
        }
    }

    @Test func everyFormNeedsTheSessionsFormTokenAndChangesNothingWithout() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            #expect(try await relay.post("/v1/activities/order-7/start", startBody(key: "order-7")).status == 201)
            let browser = DashboardBrowser(relay)
            #expect(try await browser.signIn(key: try #require(relay.keys[.admin])).status == 303)
            let change = ["app": harnessApp, "key": "order-7", "event": "update", "contentState": #"{"status": "late", "etaMinutes": 50}"#]

            let missing = try await browser.post("/dashboard/activity/change", change, formToken: .none)
            #expect(missing.status == 403)
            #expect(missing.text.contains("csrf: the form&#39;s token is missing or not this session&#39;s"))
            let wrong = try await browser.post("/dashboard/activity/change", change, formToken: .given("0123456789abcdef0123456789abcdef"))
            #expect(wrong.status == 403)
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "order-7")).count == 1)

            let accepted = try await browser.post("/dashboard/activity/change", change)
            #expect(accepted.status == 303)
            #expect(accepted.location == "/dashboard/activity?app=\(harnessApp)&key=order-7")
            #expect(try await relay.store.activity(app: harnessApp, key: "order-7")?.contentState == content("late", 50))
        }
    }

    @Test func aRefusedChangeShowsTheFormAgainWithTheFieldAndTheRule() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            #expect(try await relay.post("/v1/activities/order-8/start", startBody(key: "order-8")).status == 201)
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let broken = try await browser.post(
                "/dashboard/activity/change", ["app": harnessApp, "key": "order-8", "event": "update", "contentState": #"{"status": "#])
            #expect(broken.status == 400)
            #expect(broken.text.contains("contentState: must be JSON"))
            #expect(broken.text.contains(#"{&quot;status&quot;: </textarea>"#))
            let missing = try await browser.post("/dashboard/activity/change", ["app": harnessApp, "key": "order-8", "event": "update"])
            #expect(missing.status == 400)
            #expect(missing.text.contains("contentState"))
            let unknown = try await browser.post(
                "/dashboard/activity/change", ["app": harnessApp, "key": "no-such-order", "event": "update", "contentState": "{}"])
            #expect(unknown.status == 404)
            #expect(unknown.text.contains("no activity key"))
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "order-8")).count == 1)
        }
    }

    /// The events page lists what backends hear, newest first; the webhooks page each endpoint's
    /// latest deliveries, with their answers, and its buttons for an admin alone.
    @Test func theEventsAndWebhooksPagesShowWhatBackendsHearAndAnAdminActsOnEndpoints() async throws {
        try await withRelayHarness(configure: { configuration, _ in configuration.webhooks.addresses = .loopback }) { relay in
            try await relay.startActivity("order-1", on: ["iphone-1"])
            let made = try await relay.post("/v1/webhooks", json(#"{"url": "http://127.0.0.1:9/hooks", "description": "<b>the backend</b>"}"#))
            let id = try #require(made.json["id"]?.stringValue)
            _ = try await relay.post("/v1/activities/order-1/end", .object([("contentState", content("delivered", 0))]))
            try await relay.postWebhooks()

            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let log = try await browser.get("/dashboard/event-log")
            #expect(log.status == 200)
            let ended = try #require(log.text.range(of: "<code>activity.ended</code>")?.lowerBound)
            let started = try #require(log.text.range(of: "<code>activity.started</code>")?.lowerBound)
            #expect(ended < started, "newest first")
            let onlyStarts = try await browser.get("/dashboard/event-log?type=activity.started&key=order-1")
            #expect(onlyStarts.text.contains("<code>activity.started</code>") && !onlyStarts.text.contains("<code>activity.ended</code>"))
            #expect(try await browser.get("/dashboard/event-log?type=nope").status == 400)

            let page = try await browser.get("/dashboard/webhooks")
            #expect(page.text.contains("http://127.0.0.1:9/hooks") && page.text.contains("&lt;b&gt;the backend&lt;/b&gt;"))
            #expect(page.text.contains("connection refused") && page.text.contains("failing since"))
            #expect(page.text.contains(#"value="disable""#))
            let disabled = try await browser.post("/dashboard/webhooks/act", ["id": id, "action": "disable"])
            #expect(disabled.status == 303)
            #expect(try await relay.relay.webhook(id: id, app: nil).enabled == false)
            _ = try await browser.get("/dashboard/webhooks")
            let test = try await browser.post("/dashboard/webhooks/act", ["id": id, "action": "test"])
            #expect(test.status == 409 && test.text.contains("enable it first"))
            _ = try await browser.post("/dashboard/webhooks/act", ["id": id, "action": "enable"])
            #expect(try await relay.relay.webhook(id: id, app: nil).enabled)
            let event = try #require(try await relay.relay.events(EventQuery(types: [.activityStarted])).first?.id)
            #expect(try await browser.post("/dashboard/webhooks/act", ["id": id, "action": "redeliver", "eventID": event]).status == 303)

            // A viewer reads, and has no button.
            let viewer = try await relay.relay.createAPIKey(name: "support", scope: .viewer, app: nil).secret
            let watching = DashboardBrowser(relay)
            _ = try await watching.signIn(key: viewer)
            let watched = try await watching.get("/dashboard/webhooks")
            #expect(watched.status == 200 && watched.text.contains("http://127.0.0.1:9/hooks") && !watched.text.contains("/dashboard/webhooks/act"))
            #expect(try await watching.post("/dashboard/webhooks/act", ["id": id, "action": "disable"]).status == 403)
        }
    }

    @Test func aViewerKeyReadsEveryPageAndChangesNothing() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            #expect(try await relay.post("/v1/activities/order-9/start", startBody(key: "order-9")).status == 201)
            // A viewer key reads every app.
            let forOneApp = try await relay.call(
                .POST, "/v1/api-keys", .object([("name", .string("support")), ("scope", .string("viewer")), ("bundleID", .string(harnessApp))]),
                scope: .admin)
            #expect(forOneApp.status == 400)
            #expect(forOneApp.json["error"]?["field"] == .string("bundleID"))
            let made = try await relay.call(
                .POST, "/v1/api-keys", .object([("name", .string("support")), ("scope", .string("viewer"))]), scope: .admin)
            #expect(made.status == 201)
            let (viewerSecret, viewerID) = (try #require(made.json["secret"]?.stringValue), try #require(made.json["id"]?.stringValue))
            let browser = DashboardBrowser(relay)
            #expect(try await browser.signIn(key: viewerSecret).status == 303)
            let page = try await browser.get(DashboardBrowser.activityPath("order-9"))
            #expect(page.status == 200)
            #expect(page.text.contains("order-9"))
            #expect(!page.text.contains("/dashboard/activity/change"))
            let change = try await browser.post(
                "/dashboard/activity/change", ["app": harnessApp, "key": "order-9", "event": "end", "contentState": "{}"])
            #expect(change.status == 403)
            #expect(change.text.contains("a viewer key watches; changing needs an admin key"))
            #expect(try await relay.store.activity(app: harnessApp, key: "order-9")?.state == .active)

            // Revoking the key signs its sessions out.
            try await relay.relay.revokeAPIKey(id: viewerID)
            #expect(try await browser.get("/dashboard").status == 303)
        }
    }

    @Test func theDevicesPageDrawsTheEmulatorsIPhonesAndOnlyAnAdminPressesTheirButtons() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("order-11", on: ["iphone-1"])
            let admin = DashboardBrowser(relay)
            _ = try await admin.signIn(key: try #require(relay.keys[.admin]))
            let page = try await admin.get("/dashboard/devices")
            #expect(page.status == 200)
            #expect(page.text.contains("<a href=\"/dashboard/devices\" aria-current=\"page\">Devices</a>"))
            #expect(page.text.contains("id=\"device-iphone-1\" data-live"))
            let lockScreen = try #require(page.text.range(of: "data-region=\"lock-screen\""))
            #expect(page.text[lockScreen.upperBound...].contains("<dd>preparing</dd>"), "the activity on the Lock Screen")
            #expect(page.text.contains("data-events=\"/dashboard/events?devices=all&amp;since="))
            // The activity's page draws the phone that holds it beside its timeline, and follows that phone.
            let activityPage = try await admin.get(DashboardBrowser.activityPath("order-11"))
            #expect(activityPage.text.contains("<aside class=\"on-device\" data-live id=\"activity-phones\">"))
            #expect(activityPage.text.contains("id=\"phone-iphone-1\" data-live"))
            #expect(activityPage.text.contains("data-events=\"/dashboard/events?device=iphone-1&amp;since="))
            // Each page names itself to its stream, which spaces its changes by what it costs to draw.
            #expect(activityPage.text.contains("&amp;page=/dashboard/activity\""))
            #expect(try await admin.get("/dashboard").text.contains("data-events=\"/dashboard/events?since="))
            #expect(relay.server.api.dashboardDrawCosts.spacing("/dashboard/activity") > .zero)
            // A page refused is not drawn: its cost is not kept.
            #expect(try await admin.get("/dashboard/device").status == 400)
            #expect(relay.server.api.dashboardDrawCosts.spacing("/dashboard/device") == .zero)

            // A button without the session's form token changes nothing; with it, the person acts.
            let forged = try await admin.post("/dashboard/devices/act", ["device": "iphone-1", "action": "unlock"], formToken: .none)
            #expect(forged.status == 403)
            #expect(try relay.emulator.devices.device("iphone-1").isLocked)
            let unlocked = try await admin.post("/dashboard/devices/act", ["device": "iphone-1", "action": "unlock"])
            #expect(unlocked.status == 303)
            #expect(unlocked.location == "/dashboard/devices")
            #expect(try !relay.emulator.devices.device("iphone-1").isLocked)
            // The start's alert still expands the island; once its time has passed, the island is compact.
            #expect(try await admin.get("/dashboard/devices").text.contains("data-island=\"expanded\""))
            try await relay.advance(by: relay.emulator.devices.settings.alertPresentationDuration)
            #expect(try await admin.get("/dashboard/devices").text.contains("data-island=\"compact\""))
            let unknown = try await admin.post("/dashboard/devices/act", ["device": "ipad-9", "action": "lock"])
            #expect(unknown.status == 404)
            #expect(unknown.text.contains("no device with id ipad-9"))

            // A viewer sees the devices and has no buttons.
            let made = try await relay.call(
                .POST, "/v1/api-keys", .object([("name", .string("support")), ("scope", .string("viewer"))]), scope: .admin)
            let viewer = DashboardBrowser(relay)
            _ = try await viewer.signIn(key: try #require(made.json["secret"]?.stringValue))
            let watched = try await viewer.get("/dashboard/devices")
            #expect(watched.status == 200 && watched.text.contains("id=\"device-iphone-1\""))
            #expect(!watched.text.contains("/dashboard/devices/act"))
            let pressed = try await viewer.post("/dashboard/devices/act", ["device": "iphone-1", "action": "lock"])
            #expect(pressed.status == 403)
            #expect(try !relay.emulator.devices.device("iphone-1").isLocked)
        }
    }

    @Test func theOverviewListsKeysNearTheirPriority10Budget() async throws {
        try await withRelayHarness(configure: { configuration, _ in configuration.budget.priority10PerHour = 4 }) { relay in
            try await relay.startActivity("order-12", on: ["iphone-1"])
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            for (eta, listed) in [(20, false), (15, false), (10, true)] {
                #expect(try await relay.post("/v1/activities/order-12/update", .object([("contentState", content("on the way", eta))])).status == 200)
                try await relay.dispatch()
                let overview = try await browser.get("/dashboard")
                #expect(overview.text.contains("order-12") == listed, "after the update with eta \(eta)")
            }
            #expect(try await browser.get("/dashboard").text.contains("<td class=\"number\">3 of 4</td>"))
        }
    }

    @Test func withoutSimulatedDevicesThereIsNoDevicesPage() async throws {
        try await withRelayHarness(configure: { _, api in api.devices = nil }) { relay in
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            #expect(try await browser.get("/dashboard").text.contains("Overview"))
            #expect(!(try await browser.get("/dashboard").text.contains("/dashboard/devices")))
            #expect(try await browser.get("/dashboard/devices").status == 404)
        }
    }

    @Test func whatTheStoreHoldsIsShownAsTextNeverAsMarkup() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            let key = "<img-src=x-onerror=alert(1)>"
            let encoded = key.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
            var body = startBody(key: key)
            body.set("contentState", .object([("status", .string("<script>alert(2)</script>")), ("etaMinutes", .integer(5))]))
            #expect(try await relay.post("/v1/activities/\(encoded)/start", body).status == 201)
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            for path in ["/dashboard/activities", DashboardBrowser.activityPath(key)] {
                let page = try await browser.get(path)
                #expect(page.status == 200)
                #expect(page.text.contains("&lt;img-src=x-onerror=alert(1)&gt;"))
                #expect(!page.text.contains("<img-src"))
                #expect(!page.text.contains("<script>alert(2)"))
            }
        }
    }

    @Test func activitiesArePagedNewestFirstWithFiltersInTheAPIAndTheDashboard() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            for index in 1...5 {
                #expect(try await relay.post("/v1/activities/order-\(index)/start", startBody(key: "order-\(index)")).status == 201)
                relay.emulator.clock.advance(by: 1)
            }
            #expect(try await relay.post("/v1/activities/order-2/end", .object([])).status == 200)

            var keys: [String] = []
            var path = "/v1/activities?limit=2"
            while true {
                let page = try await relay.call(.GET, path)
                #expect(page.status == 200)
                keys += page.json["activities"]?.arrayElements?.compactMap { $0["key"]?.stringValue } ?? []
                guard let after = page.json["after"]?.stringValue else { break }
                path = "/v1/activities?limit=2&after=\(after)"
            }
            #expect(keys == ["order-5", "order-4", "order-3", "order-2", "order-1"])
            let ended = try await relay.call(.GET, "/v1/activities?state=ended", scope: .admin)
            #expect(ended.json["activities"]?.arrayElements?.map { $0["key"] } == [.string("order-2")])
            #expect(try await relay.call(.GET, "/v1/activities?keyContains=ORDER-4").json["activities"]?.arrayElements?.count == 1)

            let badState = try await relay.call(.GET, "/v1/activities?state=paused")
            #expect(badState.status == 400)
            #expect(badState.json["error"]?["field"] == .string("state"))
            let badCursor = try await relay.call(.GET, "/v1/activities?after=not-a-cursor")
            #expect(badCursor.status == 400)
            #expect(badCursor.json["error"]?["field"] == .string("after"))
            #expect(try await relay.call(.GET, "/v1/activities?limit=0").status == 400)
            #expect(try await relay.call(.GET, "/v1/activities?limit=").status == 400, "an empty limit is no number")
            let control = try await relay.call(.GET, "/v1/activities?keyContains=a%00b")
            #expect(control.status == 400)
            #expect(control.json["error"]?["field"] == .string("keyContains"))
            #expect(try await relay.call(.GET, "/v1/activities", scope: .client).status == 403)
            let viewer = try await relay.relay.createAPIKey(name: "support", scope: .viewer)
            #expect(try await relay.call(.GET, "/v1/activities", secret: viewer.secret).status == 200)
            #expect(try await relay.call(.POST, "/v1/activities/order-1/end", .object([]), secret: viewer.secret).status == 403)

            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let active = try await browser.get("/dashboard/activities?state=active")
            #expect(active.text.contains("order-5") && !active.text.contains(">order-2<"))
        }
    }
}

extension DashboardTests {
    @Test func aFailedPushIsRetriedOnceThroughTheAPIOrTheDashboard() async throws {
        try await withRelayHarness { relay in
            let failed = try await relay.failedUpdate("order-5", answered: .badExpirationDate)

            let listed = try await relay.call(.GET, "/v1/deliveries?status=failed&reason=BadExpirationDate")
            #expect(listed.json["deliveries"]?.arrayElements?.map { $0["id"] } == [.integer(failed.id)])
            #expect(try await relay.call(.GET, "/v1/deliveries?reason=").status == 400)
            #expect(try await relay.call(.POST, "/v1/deliveries/\(failed.id)/retry", scope: .client).status == 403)
            #expect(try await relay.call(.POST, "/v1/deliveries/abc/retry").status == 400)
            #expect(try await relay.call(.POST, "/v1/deliveries/999999/retry").status == 404)

            // In the dashboard the failure has a Retry button for the operator, none for a viewer.
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let page = try await browser.get("/dashboard/deliveries?status=failed&reason=&key=")
            #expect(page.status == 200)
            #expect(page.text.contains("BadExpirationDate") && page.text.contains(#"name="id" value="\#(failed.id)""#))
            let retried = try await browser.post("/dashboard/deliveries/retry", ["id": String(failed.id)])
            #expect(retried.status == 303)
            let again = try await browser.post("/dashboard/deliveries/retry", ["id": String(failed.id)])
            #expect(again.status == 409)
            #expect(again.text.contains("Push \(failed.id) was not retried: push"))
            let api = try await relay.call(.POST, "/v1/deliveries/\(failed.id)/retry")
            #expect(api.status == 409)
            #expect(api.json["error"]?["code"] == .string("not_retryable"))
            #expect(api.json["error"]?["field"] == .string("id"))

            try await relay.dispatch()
            let pushes = try await relay.store.deliveries(DeliveryQuery(key: "order-5"))
            #expect(pushes.filter { $0.requestID == failed.requestID }.map(\.status) == [.sent, .failed])
            #expect(try relay.activity(on: "iphone-1")?.content.state == content("late", 40))

            let viewer = try await relay.relay.createAPIKey(name: "support", scope: .viewer)
            let watching = DashboardBrowser(relay)
            _ = try await watching.signIn(key: viewer.secret)
            #expect(!(try await watching.get("/dashboard/deliveries?status=failed").text.contains("/dashboard/deliveries/retry")))
        }
    }
}

extension DashboardTests {
    /// A button that could only be refused is not offered; what is offered instead says why.
    @Test func noButtonIsOfferedThatCanOnlyFail() async throws {
        try await withRelayHarness { relay in
            let failed = try await relay.failedUpdate("order-6", answered: .unregistered)
            #expect(try await relay.call(.POST, "/v1/deliveries/\(failed.id)/retry").status == 409, "the server refuses it")

            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            for path in ["/dashboard/deliveries?status=failed", DashboardBrowser.activityPath("order-6")] {
                let page = try await browser.get(path)
                #expect(!page.text.contains(#"name="id" value="\#(failed.id)""#), "\(path) offers a retry that can only fail")
                #expect(page.text.contains("token gone: not retried"), "\(path)")
            }
            // The one admin key: no Revoke, and why; with a second, both may go.
            let admin = try #require(try await relay.relay.apiKeys().first { $0.scope == .admin })
            let keys = try await browser.get("/dashboard/api-keys")
            #expect(!keys.text.contains(#"name="id" value="\#(admin.id)""#))
            #expect(keys.text.contains("the last admin key: make another to revoke it"))
            _ = try await relay.relay.createAPIKey(name: "second operator", scope: .admin)
            #expect(try await browser.get("/dashboard/api-keys").text.contains(#"name="id" value="\#(admin.id)""#))
        }
    }

    @Test func theOperatorMakesAKeySeesItsSecretOnceAndRevokesIt() async throws {
        try await withRelayHarness { relay in
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let made = try await browser.post("/dashboard/api-keys", ["name": "support desk", "scope": "viewer", "bundleID": ""])
            #expect(made.status == 201)
            let secret = try #require(made.text.firstMatch(of: /id="new-secret">(lr_viewer_[0-9a-f]+)</)?.1).description
            let key = try #require(try await relay.relay.apiKeys().first { $0.name == "support desk" })
            #expect(key.scope == .viewer && key.bundleID == nil)
            // The list never shows a secret.
            #expect(!(try await browser.get("/dashboard/api-keys").text.contains(secret)))

            let refused = try await browser.post("/dashboard/api-keys", ["name": "x", "scope": "viewer", "bundleID": harnessApp])
            #expect(refused.status == 400)
            #expect(refused.text.contains("No key was made: bundleID: a viewer key reads every app"))
            #expect(try await browser.post("/dashboard/api-keys", ["name": "x", "scope": "root"]).status == 400)

            let support = DashboardBrowser(relay)
            #expect(try await support.signIn(key: secret).status == 303)
            #expect(try await support.get("/dashboard/api-keys").status == 200)
            #expect(try await support.post("/dashboard/api-keys", ["name": "mine", "scope": "admin"]).status == 403)

            #expect(try await browser.post("/dashboard/api-keys/revoke", ["id": key.id]).status == 303)
            #expect(try await support.get("/dashboard").status == 303)
            let adminID = try #require(try await relay.relay.apiKeys().first { $0.scope == .admin }?.id)
            let last = try await browser.post("/dashboard/api-keys/revoke", ["id": adminID])
            #expect(last.status == 409)
            #expect(last.text.contains("is the last live admin key"))
        }
    }

    @Test func channelsShowTheirUseOfApplesAllowanceAndAreDeletedByTheOperator() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            let started = try await relay.post(
                "/v1/activities/match-1/start", startBody(key: "match-1", extra: [("channel", .object([("storagePolicy", .integer(1))]))]))
            #expect(started.status == 201)
            let channelID = try #require(started.json["channelID"]?.stringValue)
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let page = try await browser.get("/dashboard/channels")
            #expect(page.text.contains(channelID) && page.text.contains("1 <small>of 10,000</small>"))
            #expect(try await browser.post("/dashboard/channels/delete", ["id": channelID]).status == 303)
            #expect(try await relay.store.channel(id: channelID)?.deletedAt != nil)
            let gone = try await browser.post("/dashboard/channels/delete", ["id": channelID])
            #expect(gone.status == 404)
            #expect(gone.text.contains("was not deleted: no live channel"))
        }
    }
}

/// A browser without JavaScript: keeps cookies, follows no redirect, posts forms with the form
/// token of the page it last loaded.
final class DashboardBrowser: @unchecked Sendable {
    struct Page {
        var status: Int
        var headers: HTTPHeaders
        var text: String
        var location: String? { headers["location"].first }
        var setCookies: [String] { headers["set-cookie"] }
        func header(_ name: String) -> String? { headers[name].first }
    }

    let relay: RelayHarness
    /// Shared by every test's browser, and never shut down, as `HTTPClient.shared`.
    private static let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))
    var cookies: [String: String] = [:]
    /// Sent with every request (what a proxy in front would add).
    var headers: [(String, String)] = []
    private var formToken: String?

    init(_ relay: RelayHarness) { self.relay = relay }

    static func activityPath(_ key: String) -> String {
        "/dashboard/activity?app=\(harnessApp)&key=" + key.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
    }

    func get(_ path: String) async throws -> Page { try await send(.GET, path, body: nil) }

    /// A streamed answer (server-sent events), its body to be read as it comes.
    func open(_ path: String) async throws -> HTTPClientResponse {
        var request = HTTPClientRequest(url: relay.baseURL + path)
        if !cookies.isEmpty { request.headers.add(name: "cookie", value: cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")) }
        return try await Self.client.execute(request, timeout: .seconds(60))
    }

    enum FormToken { case lastPage, none, given(String) }

    /// Posts `fields` with the form token of the last page loaded, none, or the one given.
    func post(_ path: String, _ fields: [String: String], formToken: FormToken = .lastPage) async throws -> Page {
        var fields = fields
        let token: String? =
            switch formToken {
            case .lastPage: self.formToken
            case .none: nil
            case .given(let token): token
            }
        if let token, fields["csrf"] == nil { fields["csrf"] = token }
        let body = fields.map { "\(Self.encoded($0.key))=\(Self.encoded($0.value))" }.joined(separator: "&")
        return try await send(.POST, path, body: body)
    }

    func signIn(key: String, next: String? = nil) async throws -> Page {
        _ = try await get("/dashboard/sign-in")
        var fields = ["key": key]
        if let next { fields["next"] = next }
        let answer = try await post("/dashboard/sign-in", fields)
        // As a browser does: the page signed in to, whose forms carry the session's token.
        if answer.status == 303, let location = answer.location { _ = try await get(location) }
        return answer
    }

    private func send(_ method: HTTPMethod, _ path: String, body: String?) async throws -> Page {
        var request = HTTPClientRequest(url: relay.baseURL + path)
        request.method = method
        if !cookies.isEmpty { request.headers.add(name: "cookie", value: cookies.map { "\($0.key)=\($0.value)" }.joined(separator: "; ")) }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await Self.client.execute(request, timeout: .seconds(10))
        let text = String(buffer: try await response.body.collect(upTo: 4 * 1024 * 1024))
        for cookie in response.headers["set-cookie"] {
            let pair = cookie.split(separator: ";")[0].split(separator: "=", maxSplits: 1)
            let value = pair.count > 1 ? String(pair[1]) : ""
            if value.isEmpty || cookie.contains("Max-Age=0") { cookies[String(pair[0])] = nil } else { cookies[String(pair[0])] = value }
        }
        if let range = text.range(of: #"name="csrf" value=""#), let end = text[range.upperBound...].firstIndex(of: "\"") {
            formToken = String(text[range.upperBound..<end])
        }
        return Page(status: Int(response.status.code), headers: response.headers, text: text)
    }

    private static func encoded(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-._~")))!
    }
}
