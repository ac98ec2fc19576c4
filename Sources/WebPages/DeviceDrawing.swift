import Foundation
import LiveActivityKit
import SimulatedDevices

/// One simulated device as the page draws it: what the person sees and what they may change.
/// Equal snapshots draw the same markup, so a page changes exactly when its snapshots do.
package struct DrawnDevice: Sendable, Hashable {
    package var id: String
    package var model: DeviceModel
    package var systemVersion: SystemVersion
    package var surroundings: Surroundings
    package var isOnline: Bool
    package var apps: [App]
    package var presentation: DevicePresentation
    /// The clock as the status bar shows it (to the minute).
    package var clock: String
    /// What the device logged last, newest first: why a push showed nothing is written there.
    package var recentLog: [DeviceLogEntry]
    package static let recentLogLength = 4

    package struct App: Sendable, Hashable {
        package var bundleID: String
        package var liveActivitiesEnabled: Bool
        /// Its widgets and controls (iOS 26, iOS 18), as WidgetKit last reloaded them.
        package var surfaces: AppSurfaces?
    }

    package init(_ device: SimulatedDevice, at now: Date) {
        id = device.id
        model = device.model
        systemVersion = device.systemVersion
        surroundings = device.surroundings
        isOnline = device.isOnline
        apps = device.apps.values.sorted { $0.bundleID < $1.bundleID }.map {
            App(bundleID: $0.bundleID, liveActivitiesEnabled: $0.liveActivitiesEnabled, surfaces: device.surfaces[$0.bundleID])
        }
        presentation = device.presentation(at: now)
        clock = Self.clock(at: now)
        recentLog = device.log.suffix(Self.recentLogLength).reversed()
    }

    /// `HH:mm` in UTC (the simulated devices have no time zone).
    static func clock(at date: Date) -> String {
        let minuteOfDay = (Int(date.timeIntervalSince1970.rounded(.down)) / 60) % (24 * 60)
        let (hours, minutes) = ((minuteOfDay + 24 * 60) % (24 * 60)).quotientAndRemainder(dividingBy: 60)
        return (hours < 10 ? "0" : "") + String(hours) + ":" + (minutes < 10 ? "0" : "") + String(minutes)
    }
}

extension DeviceFleet {
    /// The first `limit` devices by id (of `only`, when given), drawn as they are now (time
    /// applied), and how many there are.
    package func drawn(limit: Int, only: [String]? = nil) -> (devices: [DrawnDevice], total: Int) {
        let ids = only.map { $0.filter(contains) } ?? deviceIDs
        let devices = ids.prefix(limit).compactMap { id in try? withDevice(id) { device, now in (DrawnDevice(device, at: now), []) } }
        return (devices, ids.count)
    }
}

/// Where a device's buttons send the person's actions, and the hidden fields each form carries
/// (the form token).
package struct PersonControls: Sendable {
    package var action: String
    package var hiddenFields: [(name: String, value: String)]

    package init(action: String, hiddenFields: [(name: String, value: String)]) {
        (self.action, self.hiddenFields) = (action, hiddenFields)
    }
}

/// The simulated iPhones as markup: a phone (Lock Screen when locked; the Dynamic Island, or the
/// banner of a device without one, when unlocked), StandBy, and the paired Watch's Smart Stack,
/// each region filled by the attributes type's template or by a generic layout of its fields.
package enum DeviceDrawing {
    /// One device, its views side by side, and the person's buttons when `controls` is given.
    /// The section's id makes it a live section of the page.
    package static func device(_ device: DrawnDevice, templates: ActivityTemplates, controls: PersonControls?) -> HTML {
        let shown = device.presentation
        let modelName: String =
            switch device.model {
            case .iPhoneWithDynamicIsland: "iPhone with Dynamic Island"
            case .iPhone: "iPhone without Dynamic Island"
            case .iPad: "iPad"
            }
        let around = device.surroundings
        let facts =
            [modelName, "iOS \(device.systemVersion)", shown.isLocked ? "locked" : "unlocked", device.isOnline ? "online" : "offline"]
            + (shown.isLandscape ? ["landscape"] : []) + (around.isInCarPlay ? ["in CarPlay"] : []) + (around.hasPairedMac ? ["paired Mac"] : [])
            + device.apps.map { "\($0.bundleID): Live Activities \($0.liveActivitiesEnabled ? "on" : "off")" }
        return """
            <section class="device card" id="device-\(device.id)" data-live data-device="\(device.id)">
            <h2>\(device.id) <small>\(facts.joined(separator: " · "))</small></h2>
            <div class="device-views">\(phone(device, templates: templates))\(standBy(shown, templates: templates))\(watch(shown, templates: templates))\(carPlay(device, templates: templates))\(macMenuBar(device, templates: templates))\(homeScreenWidgets(device))\(controlCenter(device))</div>
            \(log(device))
            \(controls.map { buttons(device, $0) } ?? .empty)
            </section>
            """
    }

    /// The phone alone, as the person sees it now (beside an activity's timeline).
    package static func phoneAlone(_ device: DrawnDevice, templates: ActivityTemplates) -> HTML {
        "<div class=\"phone-alone\" id=\"phone-\(device.id)\" data-live><p class=\"muted\">\(device.id)</p>\(phone(device, templates: templates))</div>"
    }

    // MARK: The phone

    static func phone(_ device: DrawnDevice, templates: ActivityTemplates) -> HTML {
        let shown = device.presentation
        let kind = device.model.hasDynamicIsland ? "island" : "classic"
        // Where iOS puts them: locked, "No Service" on the left, where the clock goes when
        // unlocked; beside the island the right has room for a short word only.
        let (left, right) =
            shown.isLocked
            ? (device.isOnline ? "" : "No Service", device.isOnline ? "5G" : "")
            : (device.clock, device.isOnline ? "5G" : "No Svc")
        let status: HTML = "<div class=\"status\"><span>\(left)</span><span>\(right)</span></div>"
        let screen: HTML
        if shown.isLocked {
            let cards = shown.lockScreen.html { lockScreenCard($0, templates: templates, alert: alert(of: $0, in: shown)) }
            screen = """
                <div class="lock-clock"><span class="lock-icon" aria-hidden="true"></span><strong>\(device.clock)</strong></div>
                <div class="lock-list" data-region="lock-screen">\(shown.lockScreen.isEmpty ? HTML("<p class=\"nothing\">No Live Activities</p>") : cards)</div>
                """
        } else {
            let banner = shown.banner.flatMap { alert in shown.lockScreen.first { $0.activityID == alert.activityID }.map { (alert, $0) } }
            screen = """
                \(banner.map { "<div class=\"banner\" data-region=\"banner\">\(lockScreenCard($0.1, templates: templates, alert: $0.0.alert))</div>" } ?? .empty)
                <div class="home" aria-hidden="true">\((0..<12).html { _ in "<span></span>" })</div>
                """
        }
        let island: HTML =
            device.model.hasDynamicIsland
            ? dynamicIsland(
                shown.isLocked ? .empty : shown.dynamicIsland ?? .empty, limitedInWidth: shown.isDynamicIslandLimitedInWidth, templates: templates)
            : .empty
        let orientation = shown.isLandscape ? " landscape" : ""
        return """
            <figure class="phone \(kind)\(orientation)\(shown.isLocked ? " locked" : " unlocked")\(device.isOnline ? "" : " offline")">
            <div class="screen">\(island)\(status)\(screen)</div>
            <figcaption>\(shown.isLocked ? "Lock Screen" : device.model.hasDynamicIsland ? "Dynamic Island" : "Home Screen")</figcaption>
            </figure>
            """
    }

    /// The Dynamic Island; on the Lock Screen it stays empty, the activities being on the screen.
    /// In landscape on iOS 27 compact and minimal have less width (`isDynamicIslandLimitedInWidth`).
    static func dynamicIsland(_ island: DevicePresentation.DynamicIsland, limitedInWidth: Bool = false, templates: ActivityTemplates) -> HTML {
        let limited: HTML = limitedInWidth ? " limited" : ""
        switch island {
        case .empty:
            return "<div class=\"island-pill\" data-region=\"island\" data-island=\"empty\"></div>"
        case .compact(let activity):
            return """
                <div class="island-pill compact\(limited)\(classes(activity))" data-region="island" data-island="compact" data-activity="\(activity.activityID)">
                <span class="leading">\(region(.compactLeading, of: activity, templates: templates))</span><span class="camera"></span><span class="trailing">\(region(.compactTrailing, of: activity, templates: templates))</span>
                </div>
                """
        case .minimal(let attached, let detached):
            return """
                <div class="island-row\(limited)" data-region="island" data-island="minimal">
                <div class="island-pill minimal\(classes(attached))" data-activity="\(attached.activityID)"><span class="camera"></span><span class="trailing">\(region(.minimal, of: attached, templates: templates))</span></div>
                <div class="island-bubble\(classes(detached))" data-activity="\(detached.activityID)">\(region(.minimal, of: detached, templates: templates))</div>
                </div>
                """
        case .expanded(let activity, let alert):
            return """
                <div class="island-expanded\(classes(activity))" data-region="island" data-island="expanded" data-activity="\(activity.activityID)">
                <div class="expanded-top"><div class="leading">\(region(.expandedLeading, of: activity, templates: templates))</div><div class="center">\(region(.expandedCenter, of: activity, templates: templates))</div><div class="trailing">\(region(.expandedTrailing, of: activity, templates: templates))</div></div>
                <div class="bottom">\(region(.expandedBottom, of: activity, templates: templates))</div>
                <div class="alert">\(text(of: alert))</div>
                </div>
                """
        }
    }

    static func lockScreenCard(_ activity: PresentedActivity, templates: ActivityTemplates, alert: ShownAlert?) -> HTML {
        """
        <article class="activity\(classes(activity))\(alert == nil ? "" : " alerting")" data-activity="\(activity.activityID)">
        \(tag(activity))\(region(.lockScreen, of: activity, templates: templates))\(alert.map { "<p class=\"alert\">\(text(of: $0))</p>" } ?? .empty)
        </article>
        """
    }

    // MARK: Widgets and controls

    /// The apps' widgets as the Home Screen shows them (and the accessory families under the Lock
    /// Screen's clock): each with what its timeline provider read at its last push reload, and
    /// when that was. Drawn only when a widget is placed.
    static func homeScreenWidgets(_ device: DrawnDevice) -> HTML {
        let placed = device.apps.flatMap { app in (app.surfaces?.widgets ?? []).map { (app.bundleID, $0) } }
        guard !placed.isEmpty else { return .empty }
        let home = placed.filter { !$0.1.family.hasPrefix("accessory") }
        let lock = placed.filter { $0.1.family.hasPrefix("accessory") }
        let tiles = home.html { widgetTile($0.0, kind: $0.1.kind, family: $0.1.family, reloads: $0.1.reloads) }
        let accessories: HTML =
            lock.isEmpty
            ? .empty
            : "<p class=\"surface-note\">On the Lock Screen</p><div class=\"widget-row\">\(lock.html { widgetTile($0.0, kind: $0.1.kind, family: $0.1.family, reloads: $0.1.reloads) })</div>"
        return """
            <figure class="home-screen" data-region="widgets"><div class="screen"><div class="widget-grid">\(tiles)</div>\(accessories)</div><figcaption>Home Screen widgets</figcaption></figure>
            """
    }

    /// Control Center's controls of the apps, each with its last push reload.
    static func controlCenter(_ device: DrawnDevice) -> HTML {
        let controls = device.apps.flatMap { app in (app.surfaces?.controls ?? []).map { (app.bundleID, $0) } }
        guard !controls.isEmpty else { return .empty }
        let tiles = controls.html { widgetTile($0.0, kind: $0.1.kind, family: "control", reloads: $0.1.reloads) }
        return """
            <figure class="control-center" data-region="controls"><div class="screen"><div class="widget-grid">\(tiles)</div></div><figcaption>Control Center</figcaption></figure>
            """
    }

    static func widgetTile(_ bundleID: String, kind: String, family: String, reloads: SurfaceReloads) -> HTML {
        let value: HTML
        switch reloads.value {
        case nil: value = "<p class=\"widget-empty\">\(reloads.count == 0 ? "waiting for a reload" : "no data shared")</p>"
        case .object(let members)?:
            value = "<dl>\(members.prefix(4).html { "<dt>\($0.key)</dt><dd>\(shortText($0.value))</dd>" })</dl>"
        case let other?: value = "<p class=\"widget-value\">\(shortText(other))</p>"
        }
        let when = reloads.lastAt.map { "↻ \(DrawnDevice.clock(at: $0)) · \(reloads.count)×" } ?? "not reloaded yet"
        let title =
            reloads.lastAt.map { "last reloaded by a push at \(DrawnDevice.clock(at: $0)); \(reloads.count) in all" } ?? "no push has reloaded it"
        return """
            <div class="widget \(family)" data-kind="\(kind)" data-family="\(family)" data-reloads="\(reloads.count)"><header><span class="app-icon">\(String(shortName(bundleID).prefix(1)))</span><strong>\(kind)</strong></header>\(value)<footer title="\(title)">\(when)</footer></div>
            """
    }

    /// A value short enough for a tile: text as it is, anything else as its JSON.
    private static func shortText(_ value: JSONValue) -> String {
        let text = value.stringValue ?? value.serializedString
        return text.count > 40 ? String(text.prefix(39)) + "…" : text
    }

    // MARK: StandBy, the Watch, CarPlay and the Mac

    /// StandBy (landscape, charging): the most relevant activity's Lock Screen presentation at twice
    /// its size (spec §14.1), another app's minimal presentation above it (seed 000).
    static func standBy(_ shown: DevicePresentation, templates: ActivityTemplates) -> HTML {
        guard let standBy = shown.standBy else { return .empty }
        return """
            <figure class="standby" data-region="standby" data-scale="\(String(standBy.scale))">
            <div class="screen">\(standBy.other.map { "<div class=\"island-bubble\(classes($0))\">\(region(.minimal, of: $0, templates: templates))</div>" } ?? .empty)\(standBy.main.map { lockScreenCard($0, templates: templates, alert: nil) } ?? HTML("<p class=\"nothing\">No Live Activities</p>"))</div>
            <figcaption>StandBy (200%)</figcaption>
            </figure>
            """
    }

    /// The Watch's Smart Stack: the most relevant activity in the `small` family when its widget has
    /// one, otherwise its compact leading and trailing; and an alert.
    static func watch(_ shown: DevicePresentation, templates: ActivityTemplates) -> HTML {
        guard let watch = shown.watch else { return .empty }
        let card: HTML =
            watch.smartStack.map { activity in
                if let small = smallFamily(activity, in: "stack-card", templates: templates) { return small }
                return """
                    <div class="stack-card\(classes(activity))" data-activity="\(activity.activityID)">\(tag(activity))<span class="leading">\(region(.compactLeading, of: activity, templates: templates))</span><span class="trailing">\(region(.compactTrailing, of: activity, templates: templates))</span></div>
                    """
            } ?? "<p class=\"nothing\">Smart Stack</p>"
        let alert: HTML = watch.alert.map { "<div class=\"alert\">\(text(of: $0.alert))</div>" } ?? .empty
        return """
            <figure class="watch" data-region="watch"><div class="screen">\(alert)\(card)</div><figcaption>Watch Smart Stack</figcaption></figure>
            """
    }

    /// The CarPlay Dashboard (iOS 26): the most relevant ongoing activity in the `small` family
    /// when its widget has one, otherwise its Lock Screen view; whatever buttons it draws do
    /// nothing in a car (`inert`). Before iOS 26 the car shows no Live Activity.
    static func carPlay(_ device: DrawnDevice, templates: ActivityTemplates) -> HTML {
        guard device.surroundings.isInCarPlay, device.model != .iPad else { return .empty }
        let content: HTML
        if let carPlay = device.presentation.carPlay {
            content =
                carPlay.activity.map { activity in
                    if let small = smallFamily(activity, in: "carplay-card", inert: true, templates: templates) { return small }
                    return
                        "<div class=\"carplay-card\" data-family=\"lockScreen\" inert>\(lockScreenCard(activity, templates: templates, alert: nil))</div>"
                } ?? "<p class=\"nothing\">No Live Activities</p>"
        } else {
            content = "<p class=\"nothing\">CarPlay shows Live Activities from iOS \(ActivityKitFeature.carPlay.introduced.description)</p>"
        }
        return """
            <figure class="carplay" data-region="carplay"><div class="screen"><div class="carplay-map" aria-hidden="true"></div>\(content)</div><figcaption>CarPlay Dashboard</figcaption></figure>
            """
    }

    /// The activity in the `small` family, as a card of `kind` (the Watch's Smart Stack, CarPlay),
    /// when its type's template has one; `inert` where its buttons do nothing.
    static func smallFamily(_ activity: PresentedActivity, in kind: String, inert: Bool = false, templates: ActivityTemplates) -> HTML? {
        templates.render(.small, of: activity).map { small in
            "<div class=\"\(kind) small\(classes(activity))\" data-activity=\"\(activity.activityID)\" data-family=\"small\"\(inert ? " inert" : "")>\(tag(activity))\(small)</div>"
        }
    }

    /// A paired Mac's menu bar (macOS 26, the iPhone on iOS 18+): an item for each ongoing
    /// activity (its minimal presentation), the most relevant one open in its Lock Screen view.
    static func macMenuBar(_ device: DrawnDevice, templates: ActivityTemplates) -> HTML {
        guard device.surroundings.hasPairedMac, device.model != .iPad else { return .empty }
        let content: HTML
        if let bar = device.presentation.macMenuBar {
            let items = bar.activities.html { activity in
                "<span class=\"menu-item\(activity.activityID == bar.opened?.activityID ? " open" : "")\(classes(activity))\" data-activity=\"\(activity.activityID)\">\(region(.minimal, of: activity, templates: templates))</span>"
            }
            let opened: HTML =
                bar.opened.map { "<div class=\"menu-popover\">\(lockScreenCard($0, templates: templates, alert: nil))</div>" } ?? .empty
            content =
                "<div class=\"menu-bar\"><span class=\"menu-apple\" aria-hidden=\"true\"></span>\(items)<span class=\"menu-clock\">\(device.clock)</span></div>\(opened)"
        } else {
            content =
                "<div class=\"menu-bar\"><span class=\"menu-apple\" aria-hidden=\"true\"></span><span class=\"menu-clock\">\(device.clock)</span></div><p class=\"nothing\">A Mac shows the Live Activities of an iPhone on iOS \(ActivityKitFeature.macMenuBar.introduced.description) or later</p>"
        }
        return """
            <figure class="mac" data-region="mac-menu-bar"><div class="screen">\(content)</div><figcaption>Mac menu bar</figcaption></figure>
            """
    }

    /// The device log's last lines: the drops APNs never reports (a stale start, a budget spent)
    /// are written there, in ActivityKit's words.
    static func log(_ device: DrawnDevice) -> HTML {
        guard !device.recentLog.isEmpty else { return .empty }
        let lines = device.recentLog.html { entry in
            "<li><time>\(DrawnDevice.clock(at: entry.at))</time> \(entry.bundleID.map { "\(shortName($0)): " } ?? "")\(entry.message)</li>"
        }
        return "<div class=\"device-log\" data-region=\"log\"><h3>What the iPhone logged last</h3><ol>\(lines)</ol></div>"
    }

    // MARK: The person's buttons

    static func buttons(_ device: DrawnDevice, _ controls: PersonControls) -> HTML {
        func button(_ label: String, _ fields: [(String, String)], quiet: Bool = true) -> HTML {
            let hidden = (controls.hiddenFields + [("device", device.id)] + fields).html {
                "<input type=\"hidden\" name=\"\($0.0)\" value=\"\($0.1)\">"
            }
            return
                "<form method=\"post\" action=\"\(controls.action)\" class=\"inline\">\(hidden)<button\(quiet ? HTML(" class=\"quiet\"") : .empty)>\(label)</button></form>"
        }
        let shown = device.presentation
        // Activities of one app and type are told apart by their first attribute, else their start.
        func label(_ activity: PresentedActivity) -> String { "Dismiss \(shortName(activity.bundleID)) \(activity.attributesType)" }
        let dismiss = shown.lockScreen.html { activity in
            var text = label(activity)
            if shown.lockScreen.filter({ label($0) == text }).count > 1 {
                let first = scalars(activity.attributes).first.map { $0.value.stringValue ?? $0.value.serializedString }
                text += " (\(first ?? activity.startDate.iso8601))"
            }
            return button(text, [("action", "dismiss"), ("activity", activity.activityID)])
        }
        let settings = device.apps.html { app in
            button(
                "Live Activities \(app.liveActivitiesEnabled ? "off" : "on") for \(shortName(app.bundleID))",
                [("action", "live-activities"), ("app", app.bundleID), ("enabled", app.liveActivitiesEnabled ? "false" : "true")])
        }
        let clock = [("+1 min", 60), ("+15 min", 900), ("+1 h", 3600), ("+4 h", 14_400), ("+8 h", 28_800)].html { label, seconds in
            button(label, [("action", "advance-clock"), ("seconds", String(seconds))])
        }
        let around = device.surroundings
        let surroundings: HTML =
            device.model == .iPad
            ? .empty
            : """
            \(button(around.isLandscape ? "Turn to portrait" : "Turn to landscape", [("action", "landscape"), ("on", around.isLandscape ? "false" : "true")]))\(button(around.isInCarPlay ? "Leave the car" : "Get into a CarPlay car", [("action", "carplay"), ("on", around.isInCarPlay ? "false" : "true")]))\(button(around.hasPairedMac ? "Unpair the Mac" : "Pair a Mac", [("action", "mac"), ("on", around.hasPairedMac ? "false" : "true")]))
            """
        return """
            <div class="person" aria-label="What the person does">
            \(button(shown.isLocked ? "Unlock" : "Lock", [("action", shown.isLocked ? "unlock" : "lock")], quiet: false))\(button(device.isOnline ? "Go offline" : "Go online", [("action", device.isOnline ? "offline" : "online")]))\(settings)\(dismiss)
            \(button("Update to iOS \(device.systemVersion.next)", [("action", "update-os")]))\(surroundings)
            <span class="clock-buttons"><span class="muted">Advance the clock</span> \(clock)</span>
            </div>
            """
    }

    // MARK: Regions

    /// A region from the type's template, or the generic layout of the activity's fields.
    static func region(_ region: TemplateRegion, of activity: PresentedActivity, templates: ActivityTemplates) -> HTML {
        if let drawn = templates.render(region, of: activity) { return drawn }
        let app = shortName(activity.bundleID)
        let first = scalars(activity.content).first.map { text($0.value, limit: 12) } ?? ""
        switch region {
        case .lockScreen, .expandedBottom:
            let fields = (activity.content.objectMembers ?? []).html { "<dt>\($0.key)</dt><dd>\(text($0.value, limit: 80))</dd>" }
            let heading: HTML =
                region == .lockScreen
                ? "<header><span class=\"app-icon\">\(String(app.prefix(1)))</span><strong>\(app)</strong> <small>\(activity.attributesType)</small></header>"
                : .empty
            return "<div class=\"generic\">\(heading)<dl>\(fields)</dl></div>"
        case .compactLeading, .minimal: return "<span class=\"app-icon\">\(String(app.prefix(1)))</span>"
        case .compactTrailing, .expandedTrailing: return "<span class=\"value\">\(first)</span>"
        case .small: return "<span class=\"app-icon\">\(String(app.prefix(1)))</span> <span class=\"value\">\(first)</span>"
        case .expandedLeading: return "<span class=\"app-icon\">\(String(app.prefix(1)))</span> \(app)"
        case .expandedCenter: return "<span class=\"muted\">\(activity.attributesType)</span>"
        }
    }

    private static func classes(_ activity: PresentedActivity) -> String {
        (activity.isStale ? " stale" : "") + (activity.state == .ended ? " ended" : "")
    }

    /// What the widget cannot say itself: that its content is out of date, or over.
    private static func tag(_ activity: PresentedActivity) -> HTML {
        activity.state == .ended ? "<span class=\"tag ended\">Ended</span>" : activity.isStale ? "<span class=\"tag stale\">Stale</span>" : .empty
    }

    /// An alert as every view shows it: its title, then its body.
    private static func text(of alert: ShownAlert) -> HTML { "<strong>\(alert.title)</strong> \(alert.body)" }

    private static func alert(of activity: PresentedActivity, in shown: DevicePresentation) -> ShownAlert? {
        if case .expanded(let expanded, let alert) = shown.dynamicIsland, expanded.activityID == activity.activityID { return alert }
        if let banner = shown.banner, banner.activityID == activity.activityID { return banner.alert }
        return nil
    }

    /// `com.example.liverelay.demo` → `Demo`.
    static func shortName(_ bundleID: String) -> String {
        let last = bundleID.split(separator: ".").last.map(String.init) ?? bundleID
        return last.prefix(1).uppercased() + last.dropFirst()
    }

    private static func scalars(_ value: JSONValue) -> JSONValue.Members {
        (value.objectMembers ?? []).filter { member in
            switch member.value {
            case .string, .number, .bool: true
            default: false
            }
        }
    }

    private static func text(_ value: JSONValue, limit: Int) -> String {
        let whole: String =
            switch value {
            case .string(let text): text
            case .number(let literal): literal
            case .bool(let flag): flag ? "yes" : "no"
            case .null: "–"
            case .array, .object: value.serializedString
            }
        return whole.count > limit ? whole.prefix(limit - 1) + "…" : whole
    }
}
