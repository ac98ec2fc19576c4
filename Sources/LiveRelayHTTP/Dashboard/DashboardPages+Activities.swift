import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import WebPages

/// The activities, one activity and the timeline of its pushes.
extension DashboardPages {
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
            <td data-label="App">\(activity.bundleID)</td><td data-label="Type">\(activity.attributesType)</td><td data-label="State">\(stateBadge(activity))\(activity.devices.flatMap { $0.reach == .live ? nil : devicesSummary(activity) }.map { HTML(" <span class=\"muted\">\($0)</span>") } ?? .empty)</td>
            <td data-label="Started">\(time(activity.startedAt))</td><td class="content" data-label="Content">\(summary(activity.contentState))</td></tr>
            """
        }
        let table: HTML =
            page.isEmpty
            ? "<p class=\"empty\">No activity matches.</p>"
            : """
            <table class="activities cards"><thead><tr><th>Key</th><th>App</th><th>Type</th><th>State</th><th>Started</th><th>Content</th></tr></thead>
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
        _ description: ActivityDescription, deliveries: [DeliveryRecord], log: [EventRecord] = [], phones: HTML? = nil,
        viewer: DashboardViewer, refused: RefusedChange? = nil, events: String? = nil
    ) -> HTML {
        let activity = description.activity
        // A start APNs accepted that a device never confirmed: the iPhone may have dropped it.
        let unconfirmed = log.filter { $0.type == .activityStartUnconfirmed }.compactMap(\.deviceID)
        let flag: HTML =
            unconfirmed.isEmpty
            ? .empty
            : "<p class=\"notice error\">Start not confirmed on \(unconfirmed.joined(separator: ", ")): APNs accepted it, and the device reported no activity. The iPhone may have dropped it without a word (a push-to-start token an iOS update killed, its own budget).</p>"
        let tokens = description.tokens.html { token in
            let last: HTML =
                if let status = token.lastStatus {
                    "\(status)\(token.lastReason.map { HTML(" <span class=\"reason\">\($0)</span>") } ?? .empty) \(token.lastDeliveryAt.map(time) ?? .empty)"
                } else { "<span class=\"muted\">none yet</span>" }
            return """
                <tr><td>\(token.deviceID)</td><td data-label="environment:">\(token.environment.rawValue)</td>
                <td><span class="badge \(token.state.rawValue)">\(token.state.rawValue)</span>\(token.stateReason.map { HTML(" <span class=\"muted\">\($0)</span>") } ?? .empty)</td>
                <td data-label="token:"><code>\(DeviceToken.shortened(token.token))</code></td><td data-label="last APNs answer:">\(last)</td>
                <td data-label="app version:">\(token.appVersion.map { HTML("\($0)") } ?? "<span class=\"muted\">not said</span>")</td>
                <td>\(token.reportedBy.map { HTML("\($0)") } ?? "<span class=\"muted\">not said</span>")</td></tr>
                """
        }
        let listeners = description.listeners.html { listener in
            """
            <tr><td>\(listener.deviceID)</td><td data-label="environment:">\(listener.environment.rawValue)</td>
            <td><span class="badge \(listener.state.rawValue)">\(listener.state == .live ? "listening" : listener.state.rawValue)</span>\(listener.stateReason.map { HTML(" <span class=\"muted\">\($0)</span>") } ?? .empty)</td>
            <td data-label="channel:"><code>\(listener.channelID)</code></td><td data-label="since:">\(time(listener.registeredAt))</td>
            <td data-label="reported by:">\(listener.reportedBy.map { HTML("\($0)") } ?? "<span class=\"muted\">not said</span>")</td></tr>
            """
        }
        let facts: HTML = """
            <dl class="facts">
            <dt>App</dt><dd>\(activity.bundleID)</dd><dt>Attributes type</dt><dd>\(activity.attributesType)</dd>
            <dt>Started</dt><dd>\(time(activity.startedAt))</dd>
            \(activity.endedAt.map { HTML("<dt>Ended</dt><dd>\(time($0)) (\(activity.endReason?.rawValue ?? "ended"))</dd>") } ?? .empty)
            \(devicesSummary(activity).map { HTML("<dt>Devices</dt><dd>\($0)</dd>") } ?? .empty)
            \(appVersions(description.tokens).map { HTML("<dt>App versions</dt><dd>\($0)</dd>") } ?? .empty)
            \(activity.staleDate.map { HTML("<dt>Stale after</dt><dd>\(time($0))</dd>") } ?? .empty)
            \(activity.relevanceScore.map { HTML("<dt>Relevance</dt><dd>\(String($0))</dd>") } ?? .empty)
            \(activity.channelIDs.sorted { $0.key.rawValue < $1.key.rawValue }.html { HTML("<dt>Channel (\($0.key.rawValue))</dt><dd><code>\($0.value)</code></dd>") })
            </dl>
            """
        return page(
            activity.key, section: .activities, viewer: viewer, events: events,
            """
            <p class="crumbs"><a href="/dashboard/activities">Activities</a> / \(activity.bundleID)</p>
            <div data-live id="activity-head"><h1>\(activity.key) \(stateBadge(activity))</h1>\(flag)\(facts)</div>
            <div class="columns" data-live id="activity-content">
            <section class="card"><h2>Content state</h2>\(json(activity.contentState))</section>
            <section class="card"><h2>Attributes</h2>\(json(activity.attributes))</section>
            </div>
            <div class="\(phones == nil ? "activity-body" : "activity-body with-phones")"><div>
            <section data-live id="activity-tokens"><h2>Tokens</h2>
            \(description.tokens.isEmpty ? HTML("<p class=\"empty\">No activity token: the key's pushes go to its channel, or no device has reported one yet.</p>") : HTML("<table class=\"cards\"><thead><tr><th>Device</th><th>Environment</th><th>State</th><th>Token</th><th>Last APNs answer</th><th>App version</th><th>Reported by</th></tr></thead><tbody>\(tokens)</tbody></table>"))
            \(description.listeners.isEmpty ? HTML.empty : HTML("<h3>Listening on its channel</h3><table class=\"cards\"><thead><tr><th>Device</th><th>Environment</th><th>State</th><th>Channel</th><th>Since</th><th>Reported by</th></tr></thead><tbody>\(listeners)</tbody></table>"))
            </section>
            \(changeForms(activity, viewer: viewer, refused: refused))
            <section data-live id="activity-timeline"><h2>Timeline</h2>\(timeline(deliveries, viewer: viewer))</section>
            <section data-live id="activity-events"><h2>Events</h2>\(eventList(log))</section>
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

    /// What the backend hears of the key (`GET /v1/events`), oldest first: a list, which wraps
    /// on a phone where a table of free-form data would not.
    static func eventList(_ log: [EventRecord]) -> HTML {
        guard !log.isEmpty else { return "<p class=\"empty\">No event yet.</p>" }
        let items = log.html { event in
            let data = (event.data.objectMembers ?? []).filter { $0.value != .null }.map {
                "\($0.key): \($0.value.stringValue ?? $0.value.serializedString)"
            }
            return """
                <li><code>\(event.type.rawValue)</code> · \(event.deviceID ?? "every device") · \(time(event.occurredAt))
                <div class="muted">\(data.joined(separator: ", "))</div></li>
                """
        }
        return "<ul class=\"event-list\">\(items)</ul>"
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
                <tr><td data-label="to">\(target(delivery.target))</td><td><span class="badge \(delivery.status.rawValue)">\(delivery.status.rawValue)</span>\(delivery.priorityReason == first.priorityReason ? HTML.empty : HTML(" <span class=\"muted\">\(delivery.priorityReason)</span>"))</td>
                <td class="number" data-label="attempts:">\(delivery.attempts)</td>
                <td data-label="APNs answer:">\(delivery.apnsStatus.map { String($0) } ?? "")\(delivery.apnsReason.map { HTML(" <span class=\"reason\">\($0)</span>") } ?? .empty)</td>
                <td data-label="apns-id:"><code>\(delivery.apnsID ?? "")</code></td><td data-label="finished:">\(delivery.finishedAt.map(time) ?? .empty)</td>
                <td>\(retriedLater(delivery, in: deliveries) ? HTML.empty : retryButton(delivery, viewer: viewer))</td></tr>
                """
            }
            return """
                <li class="request"><div class="request-head"><strong>\(first.event.rawValue)</strong> accepted \(time(first.createdAt))
                · priority \(first.priority.rawValue) <span class="muted">(\(first.priorityReason))</span> · timestamp \(first.timestamp)
                · <code>\(requestID)</code></div>
                <table class="cards"><thead><tr><th>To</th><th>Status</th><th class="number">Attempts</th><th>APNs answer</th><th>apns-id</th><th>Finished</th><th></th></tr></thead>
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

    /// A key's schedules, each with Cancel while it is pending.
    static func schedules(_ schedules: [ScheduleRecord], viewer: DashboardViewer) -> HTML {
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
}
