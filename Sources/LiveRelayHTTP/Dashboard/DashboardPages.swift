import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import WebPages

/// What a page needs to know of who is looking at it.
struct DashboardViewer: Sendable {
    let key: APIKeyRecord
    let formToken: String
    /// The service's revision when the page began reading the store: its live updates start there.
    let revision: UInt64
    /// Whether the built-in emulator's devices are there to draw.
    let hasDevices: Bool
    /// The page's path, which its events stream names: its changes are spaced by what it costs to draw.
    let page: String

    /// Viewers read; only the operator changes things.
    var mayChange: Bool { key.scope == .admin }

    /// The events this page follows: the store's changes, and those of the `devices` it draws
    /// (`shows`: what they show now).
    func eventsPath(devices: [(String, String)] = [], shows: String? = nil) -> String {
        "/dashboard/events?"
            + QueryString.make(devices + [("since", shows.map { "\(revision).\($0)" } ?? "\(revision)"), ("page", page)])
    }
}

/// The dashboard's pages as markup, from what the store holds: no I/O here, so every page is
/// the same for the same records. Sections marked `data-live` are swapped in place when the
/// server says something changed; the rest (forms being typed into) stays.
enum DashboardPages {
    // MARK: Frame

    enum Section: String, CaseIterable {
        case overview = "Overview"
        case activities = "Activities"
        case deliveries = "Deliveries"
        case events = "Events"
        case webhooks = "Webhooks"
        case channels = "Channels"
        case keys = "API keys"
        case devices = "Devices"

        var path: String {
            switch self {
            case .overview: "/dashboard"
            case .activities: "/dashboard/activities"
            case .deliveries: "/dashboard/deliveries"
            case .events: "/dashboard/event-log"
            case .webhooks: "/dashboard/webhooks"
            case .channels: "/dashboard/channels"
            case .keys: "/dashboard/api-keys"
            case .devices: "/dashboard/devices"
            }
        }
    }

    /// A page in the dashboard's frame; its live sections follow `events` (by default, the store's changes).
    static func page(_ title: String, section: Section?, viewer: DashboardViewer?, events: String? = nil, _ content: HTML) -> HTML {
        let navigation = Section.allCases.filter { $0 != .devices || viewer?.hasDevices == true }.html { item in
            "<a href=\"\(item.path)\"\(item == section ? HTML(" aria-current=\"page\"") : .empty)>\(item.rawValue)</a>"
        }
        let who: HTML =
            if let viewer {
                """
                <div class="who"><span>\(viewer.key.name) <small>(\(viewer.key.scope.rawValue))</small></span>
                <form method="post" action="/dashboard/sign-out">\(formToken(viewer))<button class="quiet">Sign out</button></form></div>
                """
            } else { .empty }
        return """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>\(title) · LiveRelay</title>
            <link rel="icon" href="/dashboard/assets/icon.svg" type="image/svg+xml"><link rel="stylesheet" href="/dashboard/assets/dashboard.css"><script src="/dashboard/assets/dashboard.js" defer></script>
            </head><body\(viewer.map { (viewer: DashboardViewer) -> HTML in " data-events=\"\(events ?? viewer.eventsPath())\"" } ?? .empty)>
            <header class="bar"><a class="brand" href="/dashboard">LiveRelay</a>\(viewer == nil ? HTML.empty : HTML("<nav>\(navigation)</nav>"))\(who)</header>
            <main>\(content)</main>
            </body></html>
            """
    }

    static func formToken(_ viewer: DashboardViewer) -> HTML {
        "<input type=\"hidden\" name=\"csrf\" value=\"\(viewer.formToken)\">"
    }

    static func notice(_ message: String?, kind: String = "error") -> HTML {
        guard let message else { return .empty }
        return "<p class=\"notice \(kind)\" role=\"alert\">\(message)</p>"
    }

    // MARK: Sign in

    static func signIn(formToken: String, next: String, error: String?) -> HTML {
        page(
            "Sign in", section: nil, viewer: nil,
            """
            <section class="card narrow">
            <h1>Sign in</h1>
            <p>With an admin key, or a viewer key to watch without changing anything. <code>liverelay serve</code> prints its admin key when it first starts; <code>liverelay keys create --scope viewer</code> makes a viewer key.</p>
            \(notice(error))
            <form method="post" action="/dashboard/sign-in">
            <input type="hidden" name="csrf" value="\(formToken)"><input type="hidden" name="next" value="\(next)">
            <label>API key <input type="password" name="key" autocomplete="current-password" required autofocus></label>
            <button>Sign in</button>
            </form></section>
            """)
    }

    // MARK: Overview

    /// The results a push's answer can have, in the order the chart stacks them.
    static let pushResults = ["sent", "retry", "failed", "token_dead"]

    /// Pushes per minute as stacked bars, scaled to the busiest minute; CSS alone.
    static func pushChart(_ minutes: [(minute: Date, results: [String: Int])]) -> HTML {
        let busiest = max(1, minutes.map { $0.results.values.reduce(0, +) }.max() ?? 0)
        let bars = minutes.html { minute in
            let total = minute.results.values.reduce(0, +)
            let parts = pushResults.reversed().html { result in
                let count = minute.results[result] ?? 0
                guard count > 0 else { return .empty }
                // In steps of 5% (classes, not a style attribute, which the page's policy forbids).
                let step = max(1, (count * 20 + busiest - 1) / busiest) * 5
                return "<span class=\"part \(result) h\(step)\"></span>"
            }
            let label = minute.minute.iso8601
            return "<div class=\"minute\" title=\"\(label): \(total) pushes\">\(parts)</div>"
        }
        var totals: [String: Int] = [:]
        for minute in minutes { totals.merge(minute.results, uniquingKeysWith: +) }
        let legend = pushResults.html {
            "<span><i class=\"swatch \($0)\"></i>\($0.replacingOccurrences(of: "_", with: " ")) \(totals[$0] ?? 0)</span>"
        }
        return
            "<div class=\"chart\" role=\"img\" aria-label=\"pushes per minute\">\(bars)</div><p class=\"legend\">\(legend) <span class=\"muted\">(busiest minute: \(busiest))</span></p>"
    }

    static func overview(
        counts: StoreCounts, deliveries: [DeliveryStatus: Int], failures: [DeliveryRecord],
        pushesPerMinute: [(minute: Date, results: [String: Int])], nearBudget: [KeyNearBudget], viewer: DashboardViewer
    ) -> HTML {
        let budgetRows = nearBudget.html { near in
            """
            <tr><td><a href="\(activityPath(app: near.app, key: near.key))">\(near.key)</a></td><td>\(near.app)</td><td class="number">\(near.use.used) of \(near.use.limit)</td><td>\(time(near.at))</td></tr>
            """
        }
        let statuses = DeliveryStatus.countedByIndex.html { status in
            "<div class=\"stat\"><span class=\"badge \(status.rawValue)\">\(status.rawValue)</span><strong>\(deliveries[status] ?? 0)</strong></div>"
        }
        var reasons: [String: Int] = [:]
        for failure in failures { reasons[failure.apnsReason ?? "no reason", default: 0] += 1 }
        let reasonRows = reasons.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.html { reason, count in
            "<tr><td>\(reason)</td><td class=\"number\">\(count)</td></tr>"
        }
        return page(
            "Overview", section: .overview, viewer: viewer,
            """
            <h1>Overview</h1>
            <div data-live id="overview-counts">
            <section class="stats">
            <div class="stat"><span>Active keys</span><strong>\(counts.activeKeys)</strong></div>
            <div class="stat"><span>Live activity tokens</span><strong>\(counts.liveActivityTokens)</strong></div>
            <div class="stat"><span>Push-to-start tokens</span><strong>\(counts.pushToStartTokens)</strong></div>
            <div class="stat"><span>Channels</span><strong>\(counts.channels) <small>of 10,000</small></strong></div>
            </section>
            <h2>Pushes waiting and ended unsent <small>(those sent are in the chart below)</small></h2>
            <section class="stats">\(statuses)</section>
            <h2>Pushes per minute <small>(answered by APNs, the last \(pushesPerMinute.count) minutes, this instance)</small></h2>
            \(pushChart(pushesPerMinute))
            <h2>Failures by APNs reason <small>(the latest \(failures.count))</small></h2>
            \(reasons.isEmpty ? HTML("<p class=\"empty\">No push has failed.</p>") : HTML("<table><thead><tr><th>Reason</th><th class=\"number\">Pushes</th></tr></thead><tbody>\(reasonRows)</tbody></table>"))
            <h2>Keys near their priority-10 budget <small>(a device or channel at three quarters of its hourly budget or more at the key's last change, the last hour, this instance)</small></h2>
            \(nearBudget.isEmpty ? HTML("<p class=\"empty\">No key is near its budget.</p>") : HTML("<table id=\"near-budget\"><thead><tr><th>Key</th><th>App</th><th class=\"number\">Priority 10 in the hour</th><th>Last change</th></tr></thead><tbody>\(budgetRows)</tbody></table>"))
            </div>
            """)
    }

    // MARK: Errors

    static func error(status: Int, message: String, viewer: DashboardViewer?) -> HTML {
        page(
            "Error \(status)", section: nil, viewer: viewer,
            """
            <section class="card narrow"><h1>\(status)</h1>\(notice(message))<p><a href="/dashboard">Back to the overview</a></p></section>
            """)
    }

    // MARK: Pieces

    /// Where the key is shown, as its devices reported it (their update tokens, and for a
    /// channel-bound key their listening): beside its own state, which is the backend's (every
    /// device may have ended it while the key is active). Nil when not known: a channel-bound key
    /// that no device reported listening to may still be shown on some.
    static func devicesSummary(_ activity: ActivityRecord) -> String? {
        guard let devices = activity.devices else { return nil }
        let over = [(devices.ended, "ended"), (devices.dismissed, "dismissed by the person"), (devices.dead, "token dead")]
            .filter { $0.0 > 0 }.map { "\($0.0) \($0.1)" }.joined(separator: ", ")
        switch devices.reach {
        case .live: return "shown on \(devices.live) device\(devices.live == 1 ? "" : "s")" + (over.isEmpty ? "" : "; \(over)")
        case .endedOnEveryDevice: return "ended on every device: \(over)"
        case .noDevice: return activity.channelIDs.isEmpty ? "no device has reported it" : nil
        }
    }

    /// The app versions its live tokens' devices run, most devices first (`2.0 (7): 3 devices ·
    /// 1.0 (1): 1 device`); nil when none said: a push is checked against each one's contract.
    static func appVersions(_ tokens: [ActivityTokenRecord]) -> String? {
        let counts = Dictionary(tokens.filter { $0.state == .live }.compactMap(\.appVersion).map { ($0, 1) }, uniquingKeysWith: +)
        guard !counts.isEmpty else { return nil }
        return counts.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key > $1.key }
            .map { "\($0.key): \($0.value) device\($0.value == 1 ? "" : "s")" }.joined(separator: " · ")
    }

    static func stateBadge(_ activity: ActivityRecord) -> HTML {
        "<span class=\"badge \(activity.state.rawValue)\">\(activity.state.rawValue)</span>"
    }

    static func target(_ target: DeliveryTarget) -> HTML {
        switch target {
        case .activityToken(let device, _): deviceLink(device)
        case .pushToStartToken(let device, _): "\(deviceLink(device)) <span class=\"muted\">push-to-start</span>"
        case .channel(let id): "channel <code>\(id)</code>"
        case .surface(let type, let device, _): "\(deviceLink(device)) <span class=\"muted\">\(type == .widgets ? "widgets" : "control")</span>"
        }
    }

    /// A device id, leading to what the registry holds of it.
    static func deviceLink(_ id: String) -> HTML {
        "<a href=\"/dashboard/device?\(QueryString.make([("id", id)]))\">\(id)</a>"
    }

    static func time(_ date: Date) -> HTML {
        let iso = date.iso8601
        return "<time datetime=\"\(iso)\">\(iso.replacingOccurrences(of: "T", with: " ").replacingOccurrences(of: "Z", with: " UTC"))</time>"
    }

    static func json(_ value: JSONValue?) -> HTML {
        guard let value else { return "<p class=\"empty\">None.</p>" }
        return "<pre class=\"json\">\(prettyJSON(value))</pre>"
    }

    /// A content state's first fields on one line, for lists.
    static func summary(_ value: JSONValue?) -> HTML {
        guard let members = value?.objectMembers else { return .empty }
        let shown = members.prefix(3).map { "\($0.key): \($0.value.stringValue ?? $0.value.serializedString)" }.joined(separator: " · ")
        return "\(shown)\(members.count > 3 ? " …" : "")"
    }

    /// JSON indented by two spaces, members in their order.
    static func prettyJSON(_ value: JSONValue, indent: String = "") -> String {
        let inner = indent + "  "
        switch value {
        case .array(let elements) where !elements.isEmpty:
            return "[\n" + elements.map { inner + prettyJSON($0, indent: inner) }.joined(separator: ",\n") + "\n\(indent)]"
        case .object(let members) where !members.isEmpty:
            return "{\n"
                + members.map { inner + JSONValue.string($0.key).serializedString + ": " + prettyJSON($0.value, indent: inner) }
                .joined(separator: ",\n") + "\n\(indent)}"
        default:
            return value.serializedString
        }
    }
}
