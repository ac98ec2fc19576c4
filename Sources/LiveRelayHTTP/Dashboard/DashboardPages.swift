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

    /// Viewers read; only the operator changes things.
    var mayChange: Bool { key.scope == .admin }
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
        case channels = "Channels"
        case keys = "API keys"
        case devices = "Devices"

        var path: String {
            switch self {
            case .overview: "/dashboard"
            case .activities: "/dashboard/activities"
            case .deliveries: "/dashboard/deliveries"
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
            </head><body\(viewer.map { (viewer: DashboardViewer) -> HTML in " data-events=\"\(events ?? "/dashboard/events?since=\(viewer.revision)")\"" } ?? .empty)>
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
        let statuses = DeliveryStatus.allCases.html { status in
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
            <h2>Deliveries</h2>
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

    // MARK: Activities

    static func activities(
        _ page: [ActivityRecord], next: String?, filter: ActivityQuery, apps: [String], types: [String], viewer: DashboardViewer
    ) -> HTML {
        func option(_ value: String, _ label: String, selected: Bool) -> HTML {
            "<option value=\"\(value)\"\(selected ? HTML(" selected") : .empty)>\(label)</option>"
        }
        let appOptions = option("", "every app", selected: filter.bundleID == nil) + apps.html { option($0, $0, selected: filter.bundleID == $0) }
        let stateOptions =
            option("", "any state", selected: filter.state == nil)
            + [ActivityKeyState.active, .ended].html { option($0.rawValue, $0.rawValue, selected: filter.state == $0) }
        let typeOptions =
            option("", "any type", selected: filter.attributesType == nil)
            + types.html { option($0, $0, selected: filter.attributesType == $0) }
        let rows = page.html { activity in
            """
            <tr><td><a href="\(activityPath(app: activity.bundleID, key: activity.key))">\(activity.key)</a></td>
            <td>\(activity.bundleID)</td><td>\(activity.attributesType)</td><td>\(stateBadge(activity))\(activity.devices.flatMap { $0.reach == .live ? nil : devicesSummary(activity) }.map { HTML(" <span class=\"muted\">\($0)</span>") } ?? .empty)</td>
            <td>\(time(activity.startedAt))</td><td class="content">\(summary(activity.contentState))</td></tr>
            """
        }
        let table: HTML =
            page.isEmpty
            ? "<p class=\"empty\">No activity matches.</p>"
            : """
            <table class="activities"><thead><tr><th>Key</th><th>App</th><th>Type</th><th>State</th><th>Started</th><th>Content</th></tr></thead>
            <tbody>\(rows)</tbody></table>
            """
        let more: HTML =
            next.map { "<p class=\"pages\"><a rel=\"next\" href=\"/dashboard/activities?\(filter.parameters(after: $0))\">Next page</a></p>" }
            ?? .empty
        return Self.page(
            "Activities", section: .activities, viewer: viewer,
            """
            <h1>Activities</h1>
            <form class="filters" method="get" action="/dashboard/activities">
            <label>Key contains <input type="search" name="keyContains" value="\(filter.keyContains ?? "")"></label>
            <label>State <select name="state">\(stateOptions)</select></label>
            <label>Type <select name="attributesType">\(typeOptions)</select></label>
            <label>App <select name="app">\(appOptions)</select></label>
            <button>Filter</button>
            </form>
            <div data-live id="activity-list">\(table)\(more)</div>
            """)
    }

    static func activityPath(app: String, key: String) -> String {
        "/dashboard/activity?" + QueryString.make([("app", app), ("key", key)])
    }

    // MARK: One activity

    /// What the update form showed when it was refused, to show it again with the reason.
    struct RefusedChange: Sendable {
        var event: String
        var contentState: String
        var alertTitle: String
        var alertBody: String
        var message: String
    }

    /// One activity; `phones`, the simulated devices that show it (empty: none does), drawn beside
    /// its timeline; nil without simulated devices.
    static func activity(
        _ description: ActivityDescription, deliveries: [DeliveryRecord], phones: HTML? = nil, viewer: DashboardViewer,
        refused: RefusedChange? = nil, events: String? = nil
    ) -> HTML {
        let activity = description.activity
        let tokens = description.tokens.html { token in
            let last: HTML =
                if let status = token.lastStatus {
                    "\(status)\(token.lastReason.map { HTML(" <span class=\"reason\">\($0)</span>") } ?? .empty) \(token.lastDeliveryAt.map(time) ?? .empty)"
                } else { "<span class=\"muted\">none yet</span>" }
            return """
                <tr><td>\(token.deviceID)</td><td>\(token.environment.rawValue)</td>
                <td><span class="badge \(token.state.rawValue)">\(token.state.rawValue)</span>\(token.stateReason.map { HTML(" <span class=\"muted\">\($0)</span>") } ?? .empty)</td>
                <td><code>\(DeviceToken.shortened(token.token))</code></td><td>\(last)</td></tr>
                """
        }
        let facts: HTML = """
            <dl class="facts">
            <dt>App</dt><dd>\(activity.bundleID)</dd><dt>Attributes type</dt><dd>\(activity.attributesType)</dd>
            <dt>Started</dt><dd>\(time(activity.startedAt))</dd>
            \(activity.endedAt.map { HTML("<dt>Ended</dt><dd>\(time($0)) (\(activity.endReason?.rawValue ?? "ended"))</dd>") } ?? .empty)
            \(devicesSummary(activity).map { HTML("<dt>Devices</dt><dd>\($0)</dd>") } ?? .empty)
            \(activity.staleDate.map { HTML("<dt>Stale after</dt><dd>\(time($0))</dd>") } ?? .empty)
            \(activity.relevanceScore.map { HTML("<dt>Relevance</dt><dd>\(String($0))</dd>") } ?? .empty)
            \(activity.channelIDs.sorted { $0.key.rawValue < $1.key.rawValue }.html { HTML("<dt>Channel (\($0.key.rawValue))</dt><dd><code>\($0.value)</code></dd>") })
            </dl>
            """
        return page(
            activity.key, section: .activities, viewer: viewer, events: events,
            """
            <p class="crumbs"><a href="/dashboard/activities">Activities</a> / \(activity.bundleID)</p>
            <div data-live id="activity-head"><h1>\(activity.key) \(stateBadge(activity))</h1>\(facts)</div>
            <div class="columns" data-live id="activity-content">
            <section class="card"><h2>Content state</h2>\(json(activity.contentState))</section>
            <section class="card"><h2>Attributes</h2>\(json(activity.attributes))</section>
            </div>
            <div class="\(phones == nil ? "activity-body" : "activity-body with-phones")"><div>
            <section data-live id="activity-tokens"><h2>Tokens</h2>
            \(description.tokens.isEmpty ? HTML("<p class=\"empty\">No activity token yet: the key's pushes go to its channel, or no device has reported one.</p>") : HTML("<table><thead><tr><th>Device</th><th>Environment</th><th>State</th><th>Token</th><th>Last APNs answer</th></tr></thead><tbody>\(tokens)</tbody></table>"))
            </section>
            \(changeForms(activity, viewer: viewer, refused: refused))
            <section data-live id="activity-timeline"><h2>Timeline</h2>\(timeline(deliveries, viewer: viewer))</section>
            <section data-live id="activity-schedules"><h2>Schedules</h2>\(schedules(description.schedules, viewer: viewer))</section>
            </div>\(phones.map { drawn in
                let none: HTML = "<p class=\"empty\">No device shows it now.</p>"
                return "<aside class=\"on-device\" data-live id=\"activity-phones\"><h2>On the device <small><a href=\"/dashboard/devices\">all devices</a></small></h2>\(drawn.description.isEmpty ? none : drawn)</aside>"
            } ?? .empty)</div>
            """)
    }

    /// The forms that update or end an active key, holding its current content: live, so that
    /// an update from elsewhere replaces what Update would send (unless the person is editing it;
    /// `LivePage`), and they go when the key ends. A refused change keeps what was sent.
    private static func changeForms(_ activity: ActivityRecord, viewer: DashboardViewer, refused: RefusedChange?) -> HTML {
        guard viewer.mayChange, activity.state == .active else { return "<div data-live id=\"activity-change\"></div>" }
        let content = refused?.contentState ?? activity.contentState.map { prettyJSON($0) } ?? "{}"
        let hidden: HTML =
            "\(formToken(viewer))<input type=\"hidden\" name=\"app\" value=\"\(activity.bundleID)\"><input type=\"hidden\" name=\"key\" value=\"\(activity.key)\">"
        return """
            <div \(refused == nil ? HTML("data-live ") : .empty)id="activity-change"><section class="card"><h2>Update or end</h2>
            \(notice(refused?.message))
            <form method="post" action="/dashboard/activity/change" class="change">\(hidden)
            <label>Content state (JSON) <textarea name="contentState" rows="6" spellcheck="false">\(content)</textarea></label>
            <div class="row"><label>Alert title <input name="alertTitle" value="\(refused?.alertTitle ?? "")"></label>
            <label>Alert body <input name="alertBody" value="\(refused?.alertBody ?? "")"></label></div>
            <div class="row"><button name="event" value="update">Update</button><button name="event" value="end" class="danger">End</button></div>
            </form></section></div>
            """
    }

    /// Every push of the key, newest request first: when it was accepted, with which priority and
    /// why, and each delivery's way through the outbox and APNs' answer.
    static func timeline(_ deliveries: [DeliveryRecord], viewer: DashboardViewer) -> HTML {
        guard !deliveries.isEmpty else { return "<p class=\"empty\">No push yet.</p>" }
        var order: [String] = []
        var requests: [String: [DeliveryRecord]] = [:]
        for delivery in deliveries {
            if requests[delivery.requestID] == nil { order.append(delivery.requestID) }
            requests[delivery.requestID, default: []].append(delivery)
        }
        let items = order.html { requestID in
            let pushes = requests[requestID]!.sorted { $0.id < $1.id }
            let first = pushes[0]
            let rows = pushes.html { delivery in
                """
                <tr><td>\(target(delivery.target))</td><td><span class="badge \(delivery.status.rawValue)">\(delivery.status.rawValue)</span>\(delivery.priorityReason == first.priorityReason ? HTML.empty : HTML(" <span class=\"muted\">\(delivery.priorityReason)</span>"))</td>
                <td class="number">\(delivery.attempts)</td>
                <td>\(delivery.apnsStatus.map { String($0) } ?? "")\(delivery.apnsReason.map { HTML(" <span class=\"reason\">\($0)</span>") } ?? .empty)</td>
                <td><code>\(delivery.apnsID ?? "")</code></td><td>\(delivery.finishedAt.map(time) ?? .empty)</td>
                <td>\(retriedLater(delivery, in: deliveries) ? HTML.empty : retryButton(delivery, viewer: viewer))</td></tr>
                """
            }
            return """
                <li class="request"><div class="request-head"><strong>\(first.event.rawValue)</strong> accepted \(time(first.createdAt))
                · priority \(first.priority.rawValue) <span class="muted">(\(first.priorityReason))</span> · timestamp \(first.timestamp)
                · <code>\(requestID)</code></div>
                <table><thead><tr><th>To</th><th>Status</th><th class="number">Attempts</th><th>APNs answer</th><th>apns-id</th><th>Finished</th><th></th></tr></thead>
                <tbody>\(rows)</tbody></table></li>
                """
        }
        return "<ol class=\"timeline\">\(items)</ol>"
    }

    /// Whether a later push to the same target is on its way or arrived: the server would refuse to
    /// send this one again.
    private static func retriedLater(_ delivery: DeliveryRecord, in deliveries: [DeliveryRecord]) -> Bool {
        deliveries.contains { DeliveryRetry.isNewer($0, than: delivery) }
    }

    /// Sends a failed push again, for the operator; the server says whether it may. A push whose
    /// failure killed its token is not offered: the retry could only be refused.
    static func retryButton(_ delivery: DeliveryRecord, viewer: DashboardViewer) -> HTML {
        guard viewer.mayChange, delivery.status == .failed else { return .empty }
        if DeliveryOutcomeRules.killedToken(status: delivery.apnsStatus, reason: delivery.apnsReason) {
            return "<span class=\"muted\">token gone: not retried</span>"
        }
        return """
            <form method="post" action="/dashboard/deliveries/retry" class="inline">\(formToken(viewer))
            <input type="hidden" name="id" value="\(delivery.id)"><button class="quiet">Retry</button></form>
            """
    }

    // MARK: Deliveries

    static func deliveries(_ page: [DeliveryRecord], filter: DeliveryQuery, next: Int64?, viewer: DashboardViewer, notice message: String? = nil)
        -> HTML
    {
        func option(_ value: String, _ label: String, selected: Bool) -> HTML {
            "<option value=\"\(value)\"\(selected ? HTML(" selected") : .empty)>\(label)</option>"
        }
        let statusOptions =
            option("", "any status", selected: filter.status == nil)
            + DeliveryStatus.allCases.html { option($0.rawValue, $0.rawValue, selected: filter.status == $0) }
        let rows = page.html { delivery in
            """
            <tr><td class="number">\(delivery.id)</td>
            <td><a href="\(activityPath(app: delivery.bundleID, key: delivery.key))">\(delivery.key)</a></td><td>\(delivery.event.rawValue)</td>
            <td>\(target(delivery.target))</td><td><span class="badge \(delivery.status.rawValue)">\(delivery.status.rawValue)</span></td>
            <td class="number">\(delivery.attempts)</td>
            <td>\(delivery.apnsStatus.map { String($0) } ?? "")\(delivery.apnsReason.map { HTML(" <span class=\"reason\">\($0)</span>") } ?? .empty)</td>
            <td>\(time(delivery.createdAt))</td><td>\(retryButton(delivery, viewer: viewer))</td></tr>
            """
        }
        let table: HTML =
            page.isEmpty
            ? "<p class=\"empty\">No push matches.</p>"
            : """
            <table class="deliveries"><thead><tr><th class="number">Push</th><th>Key</th><th>Event</th><th>To</th><th>Status</th>
            <th class="number">Attempts</th><th>APNs answer</th><th>Accepted</th><th></th></tr></thead><tbody>\(rows)</tbody></table>
            """
        let more: HTML =
            next.map { "<p class=\"pages\"><a rel=\"next\" href=\"/dashboard/deliveries?\(filter.parameters(before: $0))\">Older</a></p>" } ?? .empty
        return Self.page(
            "Deliveries", section: .deliveries, viewer: viewer,
            """
            <h1>Deliveries</h1>
            \(notice(message))
            <form class="filters" method="get" action="/dashboard/deliveries">
            <label>Status <select name="status">\(statusOptions)</select></label>
            <label>APNs reason <input name="reason" value="\(filter.reason ?? "")" placeholder="BadDeviceToken"></label>
            <label>Key <input name="key" value="\(filter.key ?? "")"></label>
            <button>Filter</button>
            </form>
            <div data-live id="delivery-list">\(table)\(more)</div>
            """)
    }

    // MARK: Channels

    /// Apple allows an app this many channels per environment.
    static let channelAllowance = 10_000

    static func channels(_ channels: [ChannelRecord], viewer: DashboardViewer, notice message: String? = nil) -> HTML {
        let live = channels.filter { $0.deletedAt == nil }
        var usage: [String: Int] = [:]
        for channel in live { usage["\(channel.bundleID) (\(channel.environment.rawValue))", default: 0] += 1 }
        let used = usage.sorted { $0.key < $1.key }.html { name, count in
            "<div class=\"stat\"><span>\(name)</span><strong>\(count) <small>of 10,000</small></strong></div>"
        }
        let rows = channels.sorted { ($0.deletedAt == nil ? 0 : 1, $1.createdAt) < ($1.deletedAt == nil ? 0 : 1, $0.createdAt) }.html { channel in
            let delete: HTML =
                viewer.mayChange && channel.deletedAt == nil
                ? """
                <form method="post" action="/dashboard/channels/delete" class="inline">\(formToken(viewer))
                <input type="hidden" name="id" value="\(channel.channelID)"><button class="quiet">Delete</button></form>
                """ : .empty
            let state: HTML =
                if let deleted = channel.deletedAt { "<span class=\"badge\">deleted</span> \(time(deleted))" } else if let after = channel.deleteAfter
                { "<span class=\"badge pending\">until</span> \(time(after))" } else { "<span class=\"badge live\">live</span>" }
            let key: HTML = channel.key.map { "<a href=\"\(activityPath(app: channel.bundleID, key: $0))\">\($0)</a>" } ?? .empty
            return """
                <tr><td><code>\(channel.channelID)</code></td><td>\(channel.bundleID)</td><td>\(channel.environment.rawValue)</td><td>\(key)</td>
                <td>\(channel.storagePolicy == 1 ? "most recent message" : "no storage")</td><td>\(time(channel.createdAt))</td><td>\(state)</td><td>\(delete)</td></tr>
                """
        }
        return page(
            "Channels", section: .channels, viewer: viewer,
            """
            <h1>Channels</h1>
            \(notice(message))
            <div data-live id="channel-list">
            <section class="stats">\(usage.isEmpty ? HTML("<div class=\"stat\"><span>Live channels</span><strong>0 <small>of 10,000</small></strong></div>") : used)</section>
            <h2>Every channel <small>(a key started with a channel gets one per environment; it is deleted once the key has ended and its storage window passed)</small></h2>
            \(channels.isEmpty ? HTML("<p class=\"empty\">No channel yet.</p>") : HTML("<table><thead><tr><th>Channel</th><th>App</th><th>Environment</th><th>Key</th><th>Storage</th><th>Created</th><th>State</th><th></th></tr></thead><tbody>\(rows)</tbody></table>"))
            </div>
            """)
    }

    // MARK: API keys

    /// A key just made: its secret is shown on this page once, and kept nowhere.
    struct MadeKey: Sendable {
        let record: APIKeyRecord
        let secret: String
    }

    static func apiKeys(_ keys: [APIKeyRecord], apps: [String], viewer: DashboardViewer, made: MadeKey? = nil, notice message: String? = nil) -> HTML
    {
        // The last live admin key cannot be revoked (nothing could make a key then): not offered.
        let liveAdmins = keys.filter { $0.scope == .admin && $0.revokedAt == nil }
        let rows = keys.sorted { ($0.revokedAt == nil ? 0 : 1, $0.createdAt) < ($1.revokedAt == nil ? 0 : 1, $1.createdAt) }.html { key in
            let revoke: HTML =
                !viewer.mayChange || key.revokedAt != nil
                ? .empty
                : liveAdmins.count == 1 && liveAdmins[0].id == key.id
                    ? "<span class=\"muted\">the last admin key: make another to revoke it</span>"
                    : """
                    <form method="post" action="/dashboard/api-keys/revoke" class="inline">\(formToken(viewer))
                    <input type="hidden" name="id" value="\(key.id)"><button class="quiet danger">Revoke</button></form>
                    """
            let state: HTML = key.revokedAt.map { "<span class=\"badge\">revoked</span> \(time($0))" } ?? "<span class=\"badge live\">live</span>"
            return """
                <tr><td><code>\(key.id)</code>\(key.id == viewer.key.id ? HTML(" <small class=\"muted\">(yours)</small>") : .empty)</td><td>\(key.name)</td>
                <td>\(key.scope.rawValue)</td><td>\(key.bundleID ?? "every app")</td><td>\(time(key.createdAt))</td><td>\(state)</td><td>\(revoke)</td></tr>
                """
        }
        let shown: HTML =
            made.map { made in
                """
                <section class="card secret" role="status"><h2>\(made.record.name): its secret, shown once</h2>
                <p>Copy it now: only its hash is kept.</p><pre class="json" id="new-secret">\(made.secret)</pre></section>
                """
            } ?? .empty
        let scopes = [APIKeyScope.server, .client, .viewer, .admin].html { "<option value=\"\($0.rawValue)\">\($0.rawValue)</option>" }
        let appOptions = "<option value=\"\">every app</option>" + apps.html { "<option value=\"\($0)\">\($0)</option>" }
        let create: HTML =
            viewer.mayChange
            ? """
            <section class="card"><h2>Make a key</h2>
            <form method="post" action="/dashboard/api-keys" class="filters">\(formToken(viewer))
            <label>Name <input name="name" required maxlength="200"></label>
            <label>Scope <select name="scope">\(scopes)</select></label>
            <label>App <select name="bundleID">\(appOptions)</select></label>
            <button>Make key</button></form>
            <p class="muted">A client key is for one app; an admin or viewer key is for every app; a server key for either.</p></section>
            """ : .empty
        return page(
            "API keys", section: .keys, viewer: viewer,
            """
            <h1>API keys</h1>
            \(notice(message))\(shown)
            <div data-live id="key-list"><table><thead><tr><th>Key</th><th>Name</th><th>Scope</th><th>App</th><th>Made</th><th>State</th><th></th></tr></thead>
            <tbody>\(rows)</tbody></table></div>
            \(create)
            """)
    }

    private static func schedules(_ schedules: [ScheduleRecord], viewer: DashboardViewer) -> HTML {
        guard !schedules.isEmpty else { return "<p class=\"empty\">Nothing scheduled.</p>" }
        let rows = schedules.html { schedule in
            let cancel: HTML =
                viewer.mayChange && schedule.state == .pending
                ? """
                <form method="post" action="/dashboard/schedule/cancel">\(formToken(viewer))<input type="hidden" name="id" value="\(schedule.id)">
                <button class="quiet">Cancel</button></form>
                """ : .empty
            return """
                <tr><td><code>\(schedule.id)</code></td><td>\(schedule.action.rawValue)</td><td>\(time(schedule.dueAt))</td>
                <td><span class="badge \(schedule.state.rawValue)">\(schedule.state.rawValue)</span></td><td>\(cancel)</td></tr>
                """
        }
        return "<table><thead><tr><th>Schedule</th><th>Action</th><th>Due</th><th>State</th><th></th></tr></thead><tbody>\(rows)</tbody></table>"
    }

    // MARK: Devices

    /// The built-in emulator's iPhones as their owners see them now, with the person's buttons for an admin.
    static func devices(_ drawn: HTML, viewer: DashboardViewer, events: String) -> HTML {
        page(
            "Devices", section: .devices, viewer: viewer, events: events,
            """
            <h1>Devices</h1>
            <p class="muted devices-note">The built-in emulator's simulated iPhones, as the person holding each sees it now: the Lock Screen when locked, the Dynamic Island (or a banner) when not, StandBy, and the Watch when one is paired. A template per attributes type fills each region (<code>serve --templates</code>); without one, the fields are listed.\(viewer.mayChange ? HTML(" The buttons do what the person would.") : .empty)</p>
            \(drawn)
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

    /// Where the key is shown, as its devices reported it: beside its own state, which is the
    /// backend's (every device may have ended it while the key is active). Nil when not known: a
    /// channel-bound key's devices listen to the channel and report no token.
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

    static func stateBadge(_ activity: ActivityRecord) -> HTML {
        "<span class=\"badge \(activity.state.rawValue)\">\(activity.state.rawValue)</span>"
    }

    static func target(_ target: DeliveryTarget) -> HTML {
        switch target {
        case .activityToken(let device, _): "\(device)"
        case .pushToStartToken(let device, _): "\(device) <span class=\"muted\">push-to-start</span>"
        case .channel(let id): "channel <code>\(id)</code>"
        }
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
