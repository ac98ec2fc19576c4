import Foundation
import LiveActivityKit
import SimulatedDevices
import Testing
import WebPages

/// A fleet on a clock that moves only when told, with one app that can start activities.
struct DrawingFixture {
    static let app = "com.example.deliveries"
    static let otherApp = "com.example.scores"
    static let t0 = Date(timeIntervalSince1970: 1_800_000_000)
    let clock = VirtualClock(wallClock: { DrawingFixture.t0 })
    let fleet: DeviceFleet

    init(_ model: DeviceModel = .iPhoneWithDynamicIsland, watch: Bool = false, systemVersion: SystemVersion = .newDevice) throws {
        fleet = DeviceFleet(clock: clock)
        try fleet.addDevice(id: "phone", model: model, hasPairedWatch: watch, systemVersion: systemVersion)
        let delivery = ActivityAttributesType(
            name: "DeliveryAttributes", attributes: SwiftStruct("DeliveryAttributes", [.init("orderNumber", .string)]),
            contentState: SwiftStruct("ContentState", [.init("status", .string), .init("etaMinutes", .int)]))
        let match = ActivityAttributesType(
            name: "MatchAttributes", attributes: SwiftStruct("MatchAttributes", [.init("orderNumber", .string)]),
            contentState: SwiftStruct("ContentState", [.init("home", .int)]))
        try fleet.install(SimulatedApp(bundleID: Self.app, attributeTypes: [delivery]), on: "phone")
        try fleet.install(SimulatedApp(bundleID: Self.otherApp, attributeTypes: [match]), on: "phone")
    }

    @discardableResult
    func start(
        _ app: String = DrawingFixture.app, type: String = "DeliveryAttributes", order: String = "42", state: JSONValue,
        staleIn: TimeInterval? = nil, relevance: Double = 0, alert: ShownAlert? = nil
    ) throws -> String {
        try fleet.withDevice("phone") { device, now in
            let started = try device.request(
                bundleID: app, attributesType: type, attributes: .object([("orderNumber", .string(order))]),
                content: ActivityContentState(state: state, staleDate: staleIn.map { now + $0 }, relevanceScore: relevance), alert: alert, at: now)
            return (started.activityID, started.events)
        }
    }

    func drawn(_ templates: ActivityTemplates = .init(), controls: PersonControls? = nil) throws -> String {
        let device = try #require(fleet.drawn(limit: 10).devices.first)
        return DeviceDrawing.device(device, templates: templates, controls: controls).description
    }

    func act(_ action: PersonAction) throws { try fleet.perform(action, on: "phone") }
}

func status(_ text: String, eta: Int = 10) -> JSONValue { .object([("status", .string(text)), ("etaMinutes", .integer(eta))]) }

/// The simulated iPhones drawn (seed 000's presentations): what each screen holds, in which
/// order, how stale and ended look, and that nothing an activity carries becomes markup.
@Suite struct DeviceDrawingTests {
    @Test func aLockedPhoneShowsItsActivitiesOnTheLockScreenInTheOrderIOSUses() throws {
        let f = try DrawingFixture()
        let low = try f.start(order: "1", state: status("low"), relevance: 1)
        let high = try f.start(order: "2", state: status("high"), relevance: 50)
        let page = try f.drawn()
        #expect(page.contains("data-island=\"empty\""), "on the Lock Screen the island stays empty")
        let lockScreen = try #require(page.range(of: "data-region=\"lock-screen\""))
        let highAt = try #require(page.range(of: "data-activity=\"\(high)\"", range: lockScreen.upperBound..<page.endIndex))
        let lowAt = try #require(page.range(of: "data-activity=\"\(low)\"", range: lockScreen.upperBound..<page.endIndex))
        #expect(highAt.lowerBound < lowAt.lowerBound, "the more relevant first")
        #expect(page.contains("<dt>status</dt><dd>high</dd>"), "without a template, the fields are listed")
        #expect(page.contains("<strong>08:00</strong>"), "the Lock Screen's clock, in UTC")
    }

    @Test func unlockedTheIslandIsCompactForOneAppMinimalForTwoAndExpandedForAnAlert() throws {
        let f = try DrawingFixture()
        try f.act(.unlock)
        #expect(try f.drawn().contains("data-island=\"empty\""))
        let delivery = try f.start(state: status("preparing", eta: 25))
        var page = try f.drawn()
        #expect(page.contains("data-island=\"compact\" data-activity=\"\(delivery)\""))
        #expect(page.contains("<span class=\"value\">preparing</span>"), "the generic trailing: the first field")
        #expect(!page.contains("data-region=\"lock-screen\""))
        f.clock.advance(by: 1)
        let match = try f.start(DrawingFixture.otherApp, type: "MatchAttributes", state: .object([("home", .integer(1))]))
        page = try f.drawn()
        #expect(page.contains("data-island=\"minimal\""))
        #expect(page.contains("class=\"island-bubble\" data-activity=\"\(match)\""), "the second app detached")

        f.clock.advance(by: 1)
        try f.fleet.withDevice("phone") { device, now in
            (
                (),
                device.update(
                    activityID: delivery, content: ActivityContentState(state: status("on the way", eta: 5)),
                    alert: ShownAlert(title: "Order 42", body: "On its way", sound: nil, at: now), at: now)
            )
        }
        page = try f.drawn()
        #expect(page.contains("data-island=\"expanded\" data-activity=\"\(delivery)\""))
        #expect(page.contains("<strong>Order 42</strong> On its way"))
        // The alert's time passes: back to minimal.
        f.clock.advance(by: f.fleet.settings.alertPresentationDuration)
        #expect(try f.drawn().contains("data-island=\"minimal\""))
    }

    @Test func aPhoneWithoutAnIslandShowsTheAlertAsABannerAndTheWatchItsSmartStack() throws {
        let f = try DrawingFixture(.iPhone, watch: true)
        try f.act(.unlock)
        let id = try f.start(state: status("preparing"), alert: ShownAlert(title: "Order 42", body: "Preparing", sound: nil, at: DrawingFixture.t0))
        let page = try f.drawn()
        #expect(!page.contains("data-region=\"island\""))
        #expect(page.contains("<div class=\"banner\" data-region=\"banner\"><article class=\"activity alerting\" data-activity=\"\(id)\""))
        #expect(page.contains("data-region=\"watch\""))
        #expect(page.contains("<div class=\"stack-card\" data-activity=\"\(id)\""))
        #expect(page.contains("data-region=\"standby\""))
    }

    @Test func standByFillsTheScreenWithTheMostRelevantActivityAndShowsAnotherAppsMinimalAbove() throws {
        let f = try DrawingFixture()
        let delivery = try f.start(state: status("preparing"), relevance: 50)
        let match = try f.start(DrawingFixture.otherApp, type: "MatchAttributes", state: .object([("home", .integer(2))]))
        let page = try f.drawn()
        let standBy = String(try #require(page.range(of: "data-region=\"standby\"").map { page[$0.upperBound...] }))
        let main = try #require(standBy.range(of: "<article class=\"activity\" data-activity=\"\(delivery)\""))
        let minimal = try #require(standBy.range(of: "<div class=\"island-bubble\"><span class=\"app-icon\">S</span></div>"))
        #expect(minimal.lowerBound < main.lowerBound, "the other app's minimal above")
        #expect(!standBy.contains("data-activity=\"\(match)\""), "only one Lock Screen presentation fills StandBy")
    }

    /// A widget with the `small` family (its template has `small`): the Watch's Smart Stack and
    /// CarPlay draw it; without it, the Watch its compact regions and CarPlay its Lock Screen view.
    /// In a car, whatever buttons the widget draws do nothing (`inert`).
    @Test func carPlayAndTheWatchDrawTheSmallFamilyWhenTheWidgetHasOne() throws {
        let f = try DrawingFixture(watch: true, systemVersion: SystemVersion(26))
        try f.act(.setCarPlay(true))
        let id = try f.start(state: status("on the way", eta: 5))
        var page = try f.drawn()
        let carPlay = String(try #require(page.range(of: "data-region=\"carplay\"").map { page[$0.upperBound...] }))
        #expect(carPlay.contains("<div class=\"carplay-card\" data-family=\"lockScreen\" inert><article class=\"activity\" data-activity=\"\(id)\""))
        #expect(page.contains("<div class=\"stack-card\" data-activity=\"\(id)\""), "the Watch without small: compact regions")
        var templates = ActivityTemplates()
        try templates.add(#"<b class="tpl-small">{{state.etaMinutes}} min</b><button>Call</button>"#, for: .small, of: "DeliveryAttributes")
        page = try f.drawn(templates)
        #expect(
            page.contains(
                "<div class=\"carplay-card small\" data-activity=\"\(id)\" data-family=\"small\" inert><b class=\"tpl-small\">5 min</b><button>Call</button></div>"
            ))
        #expect(page.contains("<div class=\"stack-card small\" data-activity=\"\(id)\" data-family=\"small\"><b class=\"tpl-small\">5 min</b>"))
        try f.act(.setCarPlay(false))
        #expect(try !f.drawn().contains("data-region=\"carplay\""))
    }

    @Test func aPairedMacShowsTheActivitiesInItsMenuBarAndTheMostRelevantOpen() throws {
        let f = try DrawingFixture(systemVersion: SystemVersion(18))
        try f.act(.setPairedMac(true))
        let delivery = try f.start(state: status("preparing"), relevance: 50)
        let match = try f.start(DrawingFixture.otherApp, type: "MatchAttributes", state: .object([("home", .integer(2))]))
        let page = try f.drawn()
        let mac = String(try #require(page.range(of: "data-region=\"mac-menu-bar\"").map { page[$0.upperBound...] }))
        #expect(mac.contains("<span class=\"menu-item open\" data-activity=\"\(delivery)\">"))
        #expect(mac.contains("<span class=\"menu-item\" data-activity=\"\(match)\">"))
        #expect(mac.contains("<div class=\"menu-popover\"><article class=\"activity\" data-activity=\"\(delivery)\""))
        // An iPhone before iOS 18 shows nothing on the Mac, and the page says why.
        let old = try DrawingFixture(systemVersion: SystemVersion(17, 6))
        try old.act(.setPairedMac(true))
        _ = try old.start(state: status("preparing"))
        #expect(try old.drawn().contains("A Mac shows the Live Activities of an iPhone on iOS 18.0 or later"))
    }

    @Test func inLandscapeIOS27DrawsTheIslandAtLimitedWidthAndEarlierNone() throws {
        for (version, limited) in [(SystemVersion(27), true), (SystemVersion(26), false)] {
            let f = try DrawingFixture(systemVersion: version)
            try f.act(.unlock)
            try f.act(.setLandscape(true))
            let id = try f.start(state: status("preparing"))
            let page = try f.drawn()
            #expect(page.contains("<figure class=\"phone island landscape unlocked\">"))
            #expect(
                page.contains("<div class=\"island-pill compact limited\" data-region=\"island\" data-island=\"compact\" data-activity=\"\(id)\"")
                    == limited)
            #expect(page.contains("data-island=\"empty\"") == !limited)
        }
    }

    @Test func standByDrawsTheLockScreenViewAtTwiceItsSize() throws {
        let f = try DrawingFixture()
        _ = try f.start(state: status("preparing"))
        #expect(try f.drawn().contains("<figure class=\"standby\" data-region=\"standby\" data-scale=\"2.0\">"))
        #expect(PageStyle.sheet.contains(".standby .activity { flex: none; zoom: 2;"))
    }

    /// The device log's last lines, newest first and escaped: why a push showed nothing.
    @Test func theLastLinesOfTheDeviceLogAreDrawnNewestFirst() throws {
        let f = try DrawingFixture()
        let token = try #require(try f.fleet.device("phone").apps[DrawingFixture.app]?.pushToStartTokens["DeliveryAttributes"])
        for event in ["first", "second", "third", "fourth", "<b>fifth</b>"] {
            let payload = JSONValue.object([("aps", .object([("event", .string(event))]))])
            _ = f.fleet.deliver(to: token) { DevicePush(token: token, payload: payload, receivedAt: f.clock.now) }
        }
        let page = try f.drawn()
        let log = String(try #require(page.range(of: "data-region=\"log\"").map { page[$0.upperBound...] }))
        #expect(
            log.contains(
                "<li><time>08:00</time> Deliveries: dropped a start push: a push-to-start token takes only event start, got &lt;b&gt;fifth&lt;/b&gt;</li><li><time>08:00</time> Deliveries: dropped a start push: a push-to-start token takes only event start, got fourth</li>"
            ), "\(log)")
        #expect(!log.contains("got first") && log.contains("got second"), "the last \(DrawnDevice.recentLogLength) only")
    }

    @Test func staleAndEndedActivitiesLookStaleAndEnded() throws {
        let f = try DrawingFixture()
        let id = try f.start(state: status("preparing"), staleIn: 60)
        #expect(try f.drawn().contains("<article class=\"activity\" data-activity=\"\(id)\""))
        f.clock.advance(by: 61)
        var page = try f.drawn()
        #expect(page.contains("<article class=\"activity stale\" data-activity=\"\(id)\""))
        #expect(page.contains("<span class=\"tag stale\">Stale</span>"))
        try f.fleet.withDevice("phone") { device, now in
            ((), device.end(activityID: id, content: ActivityContentState(state: status("delivered", eta: 0)), dismissalPolicy: .default, at: now))
        }
        page = try f.drawn()
        #expect(page.contains("<article class=\"activity ended\" data-activity=\"\(id)\""))
        #expect(page.contains("<span class=\"tag ended\">Ended</span>"))
        #expect(page.contains("<dd>delivered</dd>"))
    }

    @Test func whatAnActivityCarriesIsEscapedWithOrWithoutATemplate() throws {
        let f = try DrawingFixture()
        try f.start(order: "<img src=x onerror=alert(1)>", state: status("<script>alert(1)</script>"))
        let generic = try f.drawn()
        #expect(!generic.contains("<script>") && generic.contains("&lt;script&gt;alert(1)&lt;/script&gt;"))
        var templates = ActivityTemplates()
        try templates.add("<b title=\"{{attributes.orderNumber}}\">{{state.status}}</b>", for: .lockScreen, of: "DeliveryAttributes")
        let drawn = try f.drawn(templates)
        #expect(drawn.contains("<b title=\"&lt;img src=x onerror=alert(1)&gt;\">&lt;script&gt;alert(1)&lt;/script&gt;</b>"))
        #expect(!drawn.contains("<img"))
    }

    /// Two activities of one app and type get buttons a person can tell apart; a phone without
    /// service says so where the island leaves room.
    @Test func theButtonsTellActivitiesApartAndNoServiceIsNotHiddenByTheIsland() throws {
        let f = try DrawingFixture()
        try f.start(order: "41", state: status("preparing"))
        try f.start(order: "42", state: status("on the way"))
        let page = try f.drawn(controls: PersonControls(action: "/act", hiddenFields: []))
        #expect(page.contains(">Dismiss Deliveries DeliveryAttributes (41)</button>"))
        #expect(page.contains(">Dismiss Deliveries DeliveryAttributes (42)</button>"))
        try f.act(.goOffline)
        #expect(try f.drawn().contains("<div class=\"status\"><span>No Service</span><span></span></div>"), "locked: on the left")
        try f.act(.unlock)
        #expect(try f.drawn().contains("<span>No Svc</span></div>"), "unlocked: beside the island, short")
    }

    @Test func theButtonsCarryTheFormTokenAndNameWhatThePersonDoes() throws {
        let f = try DrawingFixture()
        let id = try f.start(state: status("preparing"))
        let page = try f.drawn(controls: PersonControls(action: "/act", hiddenFields: [("csrf", "token-1")]))
        #expect(
            page.components(separatedBy: "<input type=\"hidden\" name=\"csrf\" value=\"token-1\">").count - 1
                == page.components(separatedBy: "<form method=\"post\" action=\"/act\"").count - 1)
        for action in ["unlock", "offline", "live-activities", "dismiss", "advance-clock"] {
            #expect(page.contains("name=\"action\" value=\"\(action)\""), "\(action)")
        }
        #expect(page.contains("name=\"activity\" value=\"\(id)\""))
        #expect(!(try f.drawn()).contains("<form"), "no buttons without controls")
    }
}

/// The person's actions, from a drawn button's form to the device.
@Suite struct PersonActionTests {
    func form(_ fields: [(String, String)]) throws -> FormFields {
        try FormFields(
            encoded: fields.map { "\($0.0)=\($0.1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }.joined(separator: "&"))
    }

    @Test func eachButtonDoesWhatThePersonWould() throws {
        let f = try DrawingFixture()
        let gallery = DeviceGallery(fleet: f.fleet)
        let id = try f.start(state: status("preparing"))
        _ = try gallery.perform(try form([("device", "phone"), ("action", "unlock")]))
        #expect(try !f.fleet.device("phone").isLocked)
        _ = try gallery.perform(try form([("device", "phone"), ("action", "offline")]))
        #expect(try !f.fleet.device("phone").isOnline)
        _ = try gallery.perform(try form([("device", "phone"), ("action", "advance-clock"), ("seconds", "3600")]))
        #expect(f.clock.now == DrawingFixture.t0 + 3600)
        _ = try gallery.perform(try form([("device", "phone"), ("action", "dismiss"), ("activity", id)]))
        #expect(try f.fleet.device("phone").activity(id) == nil)
        let second = try f.start(state: status("again"))
        _ = try gallery.perform(try form([("device", "phone"), ("action", "live-activities"), ("app", DrawingFixture.app), ("enabled", "false")]))
        #expect(try f.fleet.device("phone").activity(second)?.lifecycle.isOngoing != true, "turning Live Activities off ends the app's")
        #expect(try f.fleet.device("phone").apps[DrawingFixture.app]?.liveActivitiesEnabled == false)
        for (action, on) in [("landscape", "true"), ("carplay", "true"), ("mac", "true"), ("carplay", "false")] {
            _ = try gallery.perform(try form([("device", "phone"), ("action", action), ("on", on)]))
        }
        #expect(try f.fleet.device("phone").surroundings == Surroundings(isLandscape: true, isInCarPlay: false, hasPairedMac: true))
    }

    @Test func aFormThatNamesNoValidActionIsRefusedNamingTheField() throws {
        let cases: [([(String, String)], String)] = [
            ([("action", "lock")], "device"),
            ([("device", "phone"), ("action", "shake")], "action"),
            ([("device", "phone"), ("action", "dismiss")], "activity"),
            ([("device", "phone"), ("action", "advance-clock"), ("seconds", "-5")], "seconds"),
            ([("device", "phone"), ("action", "advance-clock"), ("seconds", "90000")], "seconds"),
            ([("device", "phone"), ("action", "live-activities"), ("app", "a.b"), ("enabled", "maybe")], "enabled"),
            ([("device", "phone"), ("action", "carplay"), ("on", "yes")], "on"),
            ([("device", "phone"), ("action", "mac")], "on"),
        ]
        for (fields, field) in cases {
            #expect(throws: (any Error).self) { try form(fields).personAction() }
            do {
                _ = try form(fields).personAction()
            } catch {
                #expect("\(error)".contains(field), "\(fields): \(error)")
            }
        }
    }

    @Test func whatThePageShowsChangesWhenAPushLandsOrTimePassesAndOnlyThen() throws {
        let f = try DrawingFixture()
        let gallery = DeviceGallery(fleet: f.fleet)
        let before = gallery.shows(only: nil)
        #expect(gallery.shows(only: nil) == before)
        let id = try f.start(state: status("preparing"), staleIn: 120)
        let started = gallery.shows(only: nil)
        #expect(started != before)
        f.clock.advance(by: 10)
        #expect(gallery.shows(only: ["phone"]) == gallery.shows(only: nil))
        f.clock.advance(by: 120)
        #expect(gallery.shows(only: nil) != started, "stale now")
        #expect(try f.drawn().contains("<article class=\"activity stale\" data-activity=\"\(id)\""))
    }
}
