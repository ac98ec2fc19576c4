import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import WebPages

/// What the backends hear: the event log, and the webhook endpoints with their latest deliveries.
extension DashboardPages {
    // MARK: The event log

    static func eventLog(_ log: [EventRecord], filter: EventQuery, viewer: DashboardViewer) -> HTML {
        let typeOptions =
            "<option value=\"\"\(filter.types == nil ? HTML(" selected") : .empty)>any type</option>"
            + EventType.allCases.html { type in
                "<option value=\"\(type.rawValue)\"\(filter.types == [type] ? HTML(" selected") : .empty)>\(type.rawValue)</option>"
            }
        // A list, not a table: the data is free-form, and a list wraps on a phone.
        let items = log.html { event in
            let data = (event.data.objectMembers ?? []).filter { $0.value != .null }.map {
                "\($0.key): \($0.value.stringValue ?? $0.value.serializedString)"
            }
            let key: HTML =
                event.key.isEmpty ? .empty : " · <a href=\"\(activityPath(app: event.bundleID, key: event.key))\">\(event.key)</a>"
            let device: HTML = event.deviceID.map { " · \($0)" } ?? .empty
            return """
                <li><code>\(event.type.rawValue)</code>\(key)\(device) · \(time(event.occurredAt))
                <div class="muted">\(data.joined(separator: ", "))</div></li>
                """
        }
        let table: HTML =
            log.isEmpty ? "<p class=\"empty\">No event matches.</p>" : "<section class=\"card\"><ul class=\"event-list\">\(items)</ul></section>"
        return page(
            "Events", section: .events, viewer: viewer,
            """
            <h1>Events</h1>
            <p class="muted">What happened that backends hear, newest first: the same log as <code>GET /v1/events</code>, and what webhooks post.</p>
            <form class="filters" method="get" action="/dashboard/event-log">
            <label>Type <select name="type">\(typeOptions)</select></label>
            <label>Key <input name="key" value="\(filter.key ?? "")"></label>
            <button>Filter</button>
            </form>
            <div data-live id="event-log">\(table)</div>
            """)
    }

    // MARK: Webhooks

    static func webhooks(_ endpoints: [(WebhookEndpointRecord, [WebhookDeliveryRecord])], viewer: DashboardViewer, notice message: String? = nil)
        -> HTML
    {
        let cards = endpoints.html { endpoint, deliveries in webhookCard(endpoint, deliveries, viewer: viewer) }
        let list: HTML =
            endpoints.isEmpty
            ? """
            <p class="empty">No endpoint yet. A backend makes one with <code>POST /v1/webhooks</code> and a server key; its events are then posted to it, signed.</p>
            """
            : cards
        return page(
            "Webhooks", section: .webhooks, viewer: viewer,
            """
            <h1>Webhooks</h1>
            \(notice(message))
            <div data-live id="webhook-list">\(list)</div>
            """)
    }

    private static func webhookCard(_ endpoint: WebhookEndpointRecord, _ deliveries: [WebhookDeliveryRecord], viewer: DashboardViewer) -> HTML {
        let state: HTML =
            endpoint.enabled
            ? (endpoint.failingSince.map { "<span class=\"badge pending\">failing since \(time($0))</span>" }
                ?? "<span class=\"badge active\">enabled</span>")
            : "<span class=\"badge failed\">disabled</span> <span class=\"muted\">\(endpoint.disabledReason ?? "")</span>"
        let types = endpoint.eventTypes.map { $0.map(\.rawValue).sorted().joined(separator: ", ") } ?? "every type"
        var actions: HTML = .empty
        if viewer.mayChange {
            func button(_ action: String, _ label: String, danger: Bool = false) -> HTML {
                """
                <form method="post" action="/dashboard/webhooks/act" class="inline">\(formToken(viewer))
                <input type="hidden" name="id" value="\(endpoint.id)"><button name="action" value="\(action)"\(danger ? HTML(" class=\"danger\"") : .empty)>\(label)</button></form>
                """
            }
            actions =
                "<div class=\"row\">"
                + (endpoint.enabled ? button("test", "Send a test") + button("disable", "Disable", danger: true) : button("enable", "Enable"))
                + "</div>"
        }
        let items = deliveries.html { delivery in
            let attempt = delivery.lastAttempt
            let answer: HTML =
                attempt.map { attempt in
                    let status = attempt.error ?? attempt.status.map { "HTTP \($0)" } ?? ""
                    let excerpt = attempt.excerpt.map { HTML(": \($0)") } ?? .empty
                    return "\(status) in \(attempt.latencyMilliseconds) ms\(excerpt)"
                } ?? "not tried yet"
            let redeliver: HTML =
                viewer.mayChange && delivery.status != .pending
                ? """
                 <form method="post" action="/dashboard/webhooks/act" class="inline">\(formToken(viewer))
                <input type="hidden" name="id" value="\(endpoint.id)"><input type="hidden" name="eventID" value="\(delivery.eventID)">
                <button name="action" value="redeliver" class="quiet">Redeliver</button></form>
                """ : .empty
            let key: HTML = delivery.key.isEmpty ? .empty : " · \(delivery.key)"
            let attempts = delivery.attempts == 1 ? "1 attempt" : "\(delivery.attempts) attempts"
            return """
                <li><span class="badge \(delivery.status.rawValue)">\(delivery.status.rawValue)</span> <code>\(delivery.eventType.rawValue)</code>\(key)
                · \(attempts) · \(attempt.map { time($0.at) } ?? time(delivery.dueAt))\(redeliver)
                <div class="muted">\(answer)</div></li>
                """
        }
        let table: HTML = deliveries.isEmpty ? "<p class=\"empty\">Nothing posted yet.</p>" : "<ul class=\"event-list\">\(items)</ul>"
        return """
            <section class="card webhook">
            <h2><code>\(endpoint.url)</code></h2>
            <p>\(state) · \(endpoint.bundleID) · \(types)\(endpoint.description.map { HTML(" · \($0)") } ?? .empty)</p>
            \(actions)
            \(table)
            </section>
            """
    }
}
