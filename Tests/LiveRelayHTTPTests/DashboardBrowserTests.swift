import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Synchronization
import Testing
import WebPages

/// The dashboard in a real browser (headless Chromium through chromedriver): what a person sees
/// and does. Screenshots go to `.build/dashboard-screenshots/` for a person to look at.
/// One browser at a time: three Chromiums beside the rest of the suite on two cores outlast the
/// tests' deadlines.
@Suite(.serialized, .timeLimit(.minutes(5)))
struct DashboardBrowserTests {
    static let screenshots = FileManager.default.currentDirectoryPath + "/.build/dashboard-screenshots"

    /// Types `key` into the sign-in page the browser is on, and sends it.
    static func signIn(_ browser: Browser, key: String) async throws {
        try await browser.waitFor("input[name=key]").type(key)
        try await browser.waitFor("form button").click()
    }

    /// A test cancelled at its deadline leaves no browser behind: Chromium once outlived such a
    /// test (ten processes whose parent was gone), since only a request ended its session.
    @Test(.enabled(if: Browser.isAvailable || TestRequirement.isCI, Comment(rawValue: Browser.skipNote)))
    func aBrowserCancelledMidTestLeavesNoProcessBehind() async throws {
        let group = Mutex<pid_t?>(nil)
        let test = Task {
            try await Browser.with { browser in
                try await browser.open("about:blank")
                group.withLock { $0 = browser.processGroup }
                try await Task.sleep(for: .seconds(600))
            }
        }
        try await withDeadline(.seconds(60)) {
            try await eventually(every: .milliseconds(50)) { group.withLock { $0 } != nil }
        }
        let processes = try #require(group.withLock { $0 })
        #expect(ChildProcess.processes(inGroup: processes).count > 1, "chromedriver and Chromium run")
        test.cancel()
        _ = await test.result
        try await withDeadline(.seconds(10)) {
            try await eventually(every: .milliseconds(50)) { ChildProcess.processes(inGroup: processes).isEmpty }
        }
    }

    @Test(.enabled(if: Browser.isAvailable || TestRequirement.isCI, Comment(rawValue: Browser.skipNote)))
    func aPersonSignsInAndWatchesAnActivityStartUpdateAndFailLive() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            try await Browser.with { browser in
                // A wrong key is refused on the sign-in page the dashboard sent the person to.
                try await browser.open(relay.baseURL + "/dashboard/activities")
                try await Self.signIn(browser, key: "lr_admin_not-a-key")
                try await eventually { try await browser.text(".notice").contains("the API key is unknown or revoked") }

                // The admin key signs in, and the person lands where they were going.
                try await Self.signIn(browser, key: try #require(relay.keys[.admin]))
                try await eventually { try await browser.text("h1") == "Activities" }
                #expect(try await browser.text("main").contains("No activity matches."))

                // An activity started through the API is in the list, with its content.
                #expect(try await relay.post("/v1/activities/order-42/start", startBody(key: "order-42")).status == 201)
                try await relay.dispatch()
                try await relay.waitForToken("order-42", device: "iphone-1")
                try await browser.open(relay.baseURL + "/dashboard/activities")
                try await browser.waitFor("a[href*='key=order-42']").click()
                try await eventually { try await browser.text("h1").hasPrefix("order-42") }
                #expect(try await browser.text("#activity-content").contains("\"preparing\""))
                #expect(try await browser.text("#activity-tokens").contains("iphone-1"))
                #expect(try await browser.text("#activity-timeline").contains("start accepted"))
                try await eventually { try await browser.run("return document.body.dataset.live || ''") == .string("on") }
                try await browser.screenshot(to: Self.screenshots + "/activity-started.png")

                // An update through the API shows without reloading, within 2 seconds of being sent.
                try await browser.run("window.notReloaded = true")
                let update = try await relay.post("/v1/activities/order-42/update", .object([("contentState", content("on the way", 10))]))
                #expect(update.status == 200)
                try await relay.dispatch()
                let sent = ContinuousClock.now
                try await eventually { try await browser.text("#activity-content").contains("\"on the way\"") }
                let shownAfter = ContinuousClock.now - sent
                #expect(shownAfter < .seconds(2), "the update showed after \(shownAfter)")
                #expect(try await browser.run("return window.notReloaded === true") == .bool(true))
                #expect(try await browser.text("#activity-timeline").contains("update accepted"))
                // The form now holds that content: Update would not send the old one again.
                try await eventually {
                    try await browser.run("return document.querySelector('textarea[name=contentState]').value").stringValue?.contains("on the way")
                        == true
                }

                // APNs refuses the next push: the timeline shows the failure and its reason, live.
                _ = relay.emulator.faults.add(EmulatorFault(EmulatorFault.respond(.badExpirationDate)))
                let textarea = try await browser.waitFor("textarea[name=contentState]")
                try await textarea.clear()
                try await textarea.type(#"{"status": "delivered", "etaMinutes": 0}"#)
                try await browser.waitFor("button[value=update]").click()
                try await relay.eventually {
                    try await relay.store.deliveries(DeliveryQuery(key: "order-42")).contains { $0.status == .queued }
                }
                try await relay.dispatch()
                try await eventually { try await browser.text("#activity-timeline").contains("BadExpirationDate") }
                // The tokens' section is swapped apart from the timeline's: once seen in a parallel run
                // before it had come.
                try await eventually { try await browser.text("#activity-tokens").contains("400 BadExpirationDate") }
                try await browser.screenshot(to: Self.screenshots + "/activity-failed.png")

                // The person retries it from the timeline: the same push goes again, and arrives.
                try await browser.waitFor("#activity-timeline form[action='/dashboard/deliveries/retry'] button").click()
                try await relay.eventually {
                    try await relay.store.deliveries(DeliveryQuery(key: "order-42")).contains { $0.status == .queued }
                }
                try await relay.dispatch()
                try await eventually { try await browser.text("#activity-timeline").contains("retry of push") }
                try await eventually { try await browser.text("#activity-tokens").contains("200") }
                #expect(try relay.activity(on: "iphone-1")?.content.state == content("delivered", 0))
                try await browser.run("document.getElementById('activity-timeline').scrollIntoView()")
                try await browser.screenshot(to: Self.screenshots + "/activity-timeline.png")

                try await browser.open(relay.baseURL + "/dashboard")
                try await eventually { try await browser.text("h1") == "Overview" }
                #expect(try await browser.text("#overview-counts").contains("BadExpirationDate"))
                try await browser.screenshot(to: Self.screenshots + "/overview.png")
                for (page, heading) in [("deliveries", "Deliveries"), ("channels", "Channels"), ("api-keys", "API keys")] {
                    try await browser.open(relay.baseURL + "/dashboard/" + page)
                    try await eventually { try await browser.text("h1") == heading }
                    try await browser.screenshot(to: Self.screenshots + "/\(page).png")
                }
            }
        }
    }

    /// Every page at a phone's width (390 px) and a laptop's: nothing scrolls sideways, not even a
    /// table within its box, the whole
    /// navigation and Sign out can be reached, and a screenshot of each is kept.
    @Test(.enabled(if: Browser.isAvailable || TestRequirement.isCI, Comment(rawValue: Browser.skipNote)))
    func everyPageFitsAPhoneAndALaptop() async throws {
        try await withRelayHarness(configure: { configuration, _ in configuration.webhooks.addresses = .loopback }, deadline: .seconds(150)) {
            relay in
            _ = try await relay.failedUpdate("order-1234567890-with-a-long-key", answered: .badExpirationDate)
            _ = try await relay.relay.createAPIKey(name: "support desk with a long name", scope: .viewer)
            // A channel-bound activity, whose device reports that it listens.
            relay.emulator.registry.setBroadcastEnabled(for: nil)
            _ = try await relay.post(
                "/v1/activities/match-7/start", startBody(key: "match-7", extra: [("channel", json(#"{"storagePolicy": 1}"#))]))
            try await relay.dispatch()
            try await eventually { try await relay.store.channelListeners(app: harnessApp, key: "match-7").count == 1 }
            // A webhook endpoint nothing listens on: its deliveries fail, and say why.
            let endpoint = try await relay.post(
                "/v1/webhooks",
                json(#"{"url": "http://127.0.0.1:9/a/rather/long/path/for/the/backends/webhook/receiver", "description": "the backend"}"#))
            #expect(endpoint.status == 201)
            _ = try await relay.post("/v1/webhooks/\(try #require(endpoint.json["id"]?.stringValue))/test", .object([]))
            try await relay.postWebhooks()
            // The drawn iPhone with every surface: in a car and paired with a Mac.
            try relay.emulator.devices.perform(.setCarPlay(true), on: "iphone-1")
            try relay.emulator.devices.perform(.setPairedMac(true), on: "iphone-1")
            // Its app's widgets (three families) and a control, the widgets reloaded once by a
            // push with what the app shared; the control not yet.
            try relay.emulator.devices.withDevice("iphone-1") { device, now in
                try device.setSharedData(
                    bundleID: harnessApp, kind: "order", value: .object([("status", .string("on the way")), ("eta", .integer(10))]))
                var events: [DeviceEvent] = []
                for family in ["systemSmall", "systemMedium", "accessoryRectangular"] {
                    events += try device.placeWidget(bundleID: harnessApp, kind: "order", family: family, at: now)
                }
                return ((), events + (try device.addControl(bundleID: harnessApp, kind: "front door", at: now)))
            }
            let widgetToken = try #require(try relay.emulator.devices.device("iphone-1").surfaces[harnessApp]?.widgetToken)
            #expect(
                relay.emulator.devices.deliver(to: widgetToken) {
                    DevicePush(token: widgetToken, payload: try! JSONValue(parsing: ReloadPushType.body), receivedAt: relay.emulator.clock.now)
                })
            let pages = [
                ("overview", "/dashboard"), ("activities", "/dashboard/activities"),
                ("activity", DashboardBrowser.activityPath("order-1234567890-with-a-long-key")),
                ("channel-activity", DashboardBrowser.activityPath("match-7")), ("deliveries", "/dashboard/deliveries"),
                ("channels", "/dashboard/channels"), ("api-keys", "/dashboard/api-keys"), ("devices", "/dashboard/devices"),
                ("events", "/dashboard/event-log"), ("webhooks", "/dashboard/webhooks"), ("device", "/dashboard/device?id=iphone-1"),
            ]
            for (width, height, prefix) in [(390, 844, "phone-"), (1280, 900, "")] {
                try await Browser.with(width: width, height: height) { browser in
                    try await browser.open(relay.baseURL + "/dashboard")
                    try await Self.signIn(browser, key: try #require(relay.keys[.admin]))
                    try await eventually { try await browser.text("h1") == "Overview" }
                    for (name, path) in pages {
                        try await browser.open(relay.baseURL + path)
                        try await eventually { try await browser.run("return document.readyState") == .string("complete") }
                        let fit = try await browser.run(
                            """
                            const out = [...document.querySelectorAll('.bar a, .bar button')]
                                .filter(e => e.getBoundingClientRect().right > \(width) + 1 || e.getBoundingClientRect().left < 0)
                                .map(e => e.textContent);
                            const clipped = e => { for (let p = e.parentElement; p; p = p.parentElement) {
                                if (['auto', 'scroll', 'hidden'].includes(getComputedStyle(p).overflowX)) return true; } return false; };
                            const wide = [...document.querySelectorAll('main *')]
                                .filter(e => e.getBoundingClientRect().right > \(width) + 1 && !clipped(e)
                                    && !(e.parentElement && e.parentElement.getBoundingClientRect().right > \(width) + 1 && !clipped(e.parentElement)))
                                .slice(0, 3).map(e => e.tagName + (e.id ? '#' + e.id : '') + '.' + e.className + ' ' + e.textContent.slice(0, 40));
                            const scrolled = [...document.querySelectorAll('main table')]
                                .filter(t => t.scrollWidth > t.clientWidth + 1).map(t => (t.id || t.className || 'table'));
                            return [document.documentElement.scrollWidth, out.join(', '), wide.join(' | '), scrolled.join(', ')];
                            """)
                        // A phone widens its layout to the page's content: the page must fit the device.
                        let scrollWidth = fit[0]?.doubleValue ?? 0
                        #expect(
                            scrollWidth <= Double(width),
                            "\(name) at \(width) px scrolls sideways: \(scrollWidth) px wide, from \(fit[2]?.stringValue ?? "")")
                        #expect(fit[1] == .string(""), "\(name) at \(width) px: out of reach: \(fit[1]?.stringValue ?? "")")
                        // Nor does a table scroll within itself, its last columns cut off.
                        #expect(fit[3] == .string(""), "\(name) at \(width) px: a table scrolls sideways: \(fit[3]?.stringValue ?? "")")
                        if name == "devices" {
                            #expect(try await browser.text("#device-iphone-1 [data-region=widgets]").contains("on the way"))
                            #expect(
                                try await browser.run("return document.querySelectorAll('#device-iphone-1 .widget[data-reloads=\"1\"]').length")
                                    == .number("3"))
                            #expect(try await browser.text("#device-iphone-1 [data-region=controls]").contains("not reloaded yet"))
                        }
                        try await browser.screenshot(to: Self.screenshots + "/\(prefix)\(name).png", fullPage: true)
                    }
                }
            }
        }
    }

    @Test(.enabled(if: Browser.isAvailable || TestRequirement.isCI, Comment(rawValue: Browser.skipNote)))
    func aPersonWatchesTheDrawnIPhoneFollowEveryPushAndPressesItsButtons() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            try await Browser.with { browser in
                try await browser.open(relay.baseURL + "/dashboard/devices")
                try await Self.signIn(browser, key: try #require(relay.keys[.admin]))
                try await eventually { try await browser.text("h1") == "Devices" }
                let lockScreen = "#device-iphone-1 [data-region=lock-screen]"
                #expect(try await browser.text(lockScreen).contains("No Live Activities"))
                try await eventually { try await browser.run("return document.body.dataset.live || ''") == .string("on") }
                try await browser.run("window.notReloaded = true")

                // Started through the API: on the Lock Screen within 2 seconds, without reloading.
                #expect(try await relay.post("/v1/activities/order-42/start", startBody(key: "order-42")).status == 201)
                try await relay.dispatch()
                var sent = ContinuousClock.now
                try await eventually { try await browser.text(lockScreen).contains("preparing") }
                #expect(ContinuousClock.now - sent < .seconds(2), "the start showed after \(ContinuousClock.now - sent)")
                try await relay.waitForToken("order-42", device: "iphone-1")

                // Updated: the new content within 2 seconds.
                #expect(try await relay.post("/v1/activities/order-42/update", .object([("contentState", content("on the way", 10))])).status == 200)
                try await relay.dispatch()
                sent = ContinuousClock.now
                try await eventually { try await browser.text(lockScreen).contains("on the way") }
                #expect(ContinuousClock.now - sent < .seconds(2), "the update showed after \(ContinuousClock.now - sent)")
                #expect(try await browser.run("return window.notReloaded === true") == .bool(true))
                try await browser.screenshot(to: Self.screenshots + "/devices-lock-screen.png")

                // The person unlocks: the Dynamic Island holds the activity.
                try await browser.waitFor("#device-iphone-1 form input[value=unlock] ~ button").click()
                try await eventually {
                    try await browser.run("return document.querySelector('[data-island=compact], [data-island=expanded]') !== null") == .bool(true)
                }
                #expect(try !relay.emulator.devices.device("iphone-1").isLocked)
                try await browser.screenshot(to: Self.screenshots + "/devices-dynamic-island.png")

                // Into a car, a Mac paired, the phone turned: CarPlay and the menu bar show the
                // activity; on iOS 26 a landscape island shows none (iOS 27 will).
                for (action, after) in [("carplay", "Leave the car"), ("mac", "Unpair the Mac"), ("landscape", "Turn to portrait")] {
                    let button = "#device-iphone-1 form input[value=\(action)] ~ button"
                    try await browser.waitFor(button).click()
                    try await eventually { try await browser.text(button) == after }
                }
                try await eventually {
                    try await browser.run(
                        "return document.querySelector('#device-iphone-1 [data-region=carplay] article.activity') !== null && document.querySelector('#device-iphone-1 [data-region=mac-menu-bar] .menu-popover') !== null"
                    ) == .bool(true)
                }
                #expect(
                    try await browser.run("return document.querySelector('#device-iphone-1 figure.phone.landscape [data-island=empty]') !== null")
                        == .bool(true))
                try await browser.screenshot(to: Self.screenshots + "/devices-surfaces.png", fullPage: true)
                try await browser.waitFor("#device-iphone-1 form input[value=landscape] ~ button").click()
                try await eventually { try await browser.text("#device-iphone-1 form input[value=landscape] ~ button") == "Turn to landscape" }

                // Eight hours later the activity has ended (spec §8.3) and looks it.
                try await browser.waitFor("#device-iphone-1 form input[value='28800'] ~ button").click()
                try await eventually {
                    try await browser.run("return document.querySelector('#device-iphone-1 article.activity.ended .tag.ended') !== null")
                        == .bool(true)
                }
                #expect(try relay.activity(on: "iphone-1")?.state == .ended)
                try await browser.screenshot(to: Self.screenshots + "/devices-ended.png")

                // The person installs the next iOS: the device says which it runs, and the button the one after.
                let facts = "#device-iphone-1 h2 small"
                #expect(try await browser.text(facts).contains("iOS 26.0"))
                try await browser.waitFor("#device-iphone-1 form input[value=update-os] ~ button").click()
                try await eventually { try await browser.text(facts).contains("iOS 27.0") }
                #expect(try await browser.text("#device-iphone-1 form input[value=update-os] ~ button") == "Update to iOS 27.1")
                #expect(try relay.emulator.devices.device("iphone-1").systemVersion == SystemVersion(27))
                try await browser.screenshot(to: Self.screenshots + "/devices-ios-updated.png")
            }
        }
    }

    /// The failures APNs answers 200 to, drawn: the iPhone shows nothing, or shows it late, and
    /// its log says why in ActivityKit's words (spec §14.2). A start whose stale date has passed
    /// (sent past the server, which refuses it), a start past the push-to-start budget (2 an hour
    /// here), and an update with an alert at priority 5, which alerts all the same.
    @Test(.enabled(if: Browser.isAvailable || TestRequirement.isCI, Comment(rawValue: Browser.skipNote)))
    func whatAnIPhoneDropsSilentlyIsDrawnWithWhatItLogged() async throws {
        try await withRelayHarness(emulator: { $0.devices.pushToStartBudgetPerHour = 2 }) { relay in
            try await relay.addRegisteredDevice("iphone-1")
            let token = try #require(try relay.emulator.devices.device("iphone-1").apps[harnessApp]?.pushToStartTokens["DeliveryAttributes"])
            let now = relay.emulator.clock.now
            let stale = try JSONValue(
                parsing:
                    #"{"aps":{"event":"start","timestamp":\#(Int(now.timeIntervalSince1970)),"stale-date":\#(Int(now.timeIntervalSince1970) - 600),"attributes-type":"DeliveryAttributes","attributes":{"activityKey":"late","orderNumber":1},"content-state":{"status":"preparing","etaMinutes":30},"alert":{"title":"Order 1","body":"Preparing"}}}"#
            )
            #expect(relay.emulator.devices.deliver(to: token) { DevicePush(token: token, payload: stale, receivedAt: now) })
            try await Browser.with { browser in
                try await browser.open(relay.baseURL + "/dashboard/devices")
                try await Self.signIn(browser, key: try #require(relay.keys[.admin]))
                let log = "#device-iphone-1 [data-region=log]"
                try await eventually { try await browser.text(log).contains("never shown on the Lock Screen") }
                #expect(try await browser.text("#device-iphone-1 [data-region=lock-screen]").contains("No Live Activities"))
                try await browser.screenshot(to: Self.screenshots + "/devices-stale-start.png", fullPage: true)

                for key in ["order-2", "order-3"] {
                    #expect(try await relay.post("/v1/activities/\(key)/start", startBody(key: key)).status == 201)
                    try await relay.dispatch()
                }
                try await eventually { try await browser.text(log).contains("push-to-start budget was exhausted (budget=-1)") }
                #expect(try relay.emulator.devices.device("iphone-1").activities.count == 2, "the stale start and order-2")
                try await browser.screenshot(to: Self.screenshots + "/devices-push-to-start-budget.png", fullPage: true)

                try await relay.waitForToken("order-2", device: "iphone-1")
                let alert = json(#"{"title": "Order 42", "body": "Almost there"}"#)
                let update = try await relay.post(
                    "/v1/activities/order-2/update",
                    .object([("contentState", content("almost there", 2)), ("alert", alert), ("priority", .integer(5))]))
                #expect(update.status == 200)
                try await relay.dispatch()
                try await eventually { try await browser.text(log).contains("priority 5: delivered opportunistically") }
                relay.emulator.clock.advance(by: relay.emulator.configuration.devices.opportunisticDelay)
                relay.emulator.devices.advanceAll()
                try await eventually {
                    try await browser.text("#device-iphone-1 [data-region=lock-screen] article.alerting").contains("Almost there")
                }
                try await browser.screenshot(to: Self.screenshots + "/devices-priority-5-alert.png", fullPage: true)
            }
        }
    }

    /// An iPhone on iOS 27 with a Watch, in a car, turned: the Dynamic Island shows the activity
    /// at limited width, and the Watch and CarPlay draw the widget's `small` family.
    @Test(.enabled(if: Browser.isAvailable || TestRequirement.isCI, Comment(rawValue: Browser.skipNote)))
    func anIPhoneOnIOS27IsDrawnOnEverySurface() async throws {
        try await withRelayHarness(configure: { _, api in
            var templates = ActivityTemplates()
            try? templates.add(
                #"<div class="tpl-row"><span class="app-icon">T</span><span class="tpl-big">{{state.etaMinutes}} min</span></div>"#, for: .small,
                of: "DeliveryAttributes")
            if let fleet = api.devices?.fleet { api.devices = DeviceGallery(fleet: fleet, templates: templates) }
        }) { relay in
            try relay.emulator.devices.addDevice(id: "iphone-27", hasPairedWatch: true, systemVersion: SystemVersion(27))
            try await relay.addRegisteredDevice("iphone-27")
            #expect(try await relay.post("/v1/activities/order-27/start", startBody(key: "order-27")).status == 201)
            try await relay.dispatch()
            try await eventually { try relay.activity(on: "iphone-27") != nil }
            for action in [PersonAction.unlock, .setLandscape(true), .setCarPlay(true), .setPairedMac(true)] {
                try relay.emulator.devices.perform(action, on: "iphone-27")
            }
            // The start's alert has had its time: the island is compact.
            relay.emulator.clock.advance(by: relay.emulator.configuration.devices.alertPresentationDuration)
            relay.emulator.devices.advanceAll()
            try await Browser.with { browser in
                try await browser.open(relay.baseURL + "/dashboard/devices")
                try await Self.signIn(browser, key: try #require(relay.keys[.admin]))
                let device = "#device-iphone-27"
                try await eventually {
                    try await browser.run("return document.querySelector('\(device) figure.phone.landscape .island-pill.compact.limited') !== null")
                        == .bool(true)
                }
                #expect(try await browser.text("\(device) [data-region=watch] [data-family=small]").contains("30 min"))
                #expect(try await browser.text("\(device) [data-region=carplay] [data-family=small]").contains("30 min"))
                #expect(try await browser.run("return document.querySelector('\(device) [data-region=carplay] [inert]') !== null") == .bool(true))
                try await browser.screenshot(to: Self.screenshots + "/devices-ios27.png", fullPage: true)
            }
        }
    }
}
