import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import WebPages

/// Every push, filtered.
extension DashboardPages {
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
            <tr><td class="number" data-label="push">\(delivery.id)</td>
            <td data-label="key:"><a href="\(activityPath(app: delivery.bundleID, key: delivery.key))">\(delivery.key)</a></td>
            <td data-label="event:">\(delivery.event.rawValue)</td>
            <td data-label="to:">\(target(delivery.target))</td><td><span class="badge \(delivery.status.rawValue)">\(delivery.status.rawValue)</span></td>
            <td class="number" data-label="attempts:">\(delivery.attempts)</td>
            <td data-label="APNs answer:">\(delivery.apnsStatus.map { String($0) } ?? "")\(delivery.apnsReason.map { HTML(" <span class=\"reason\">\($0)</span>") } ?? .empty)</td>
            <td data-label="accepted:">\(time(delivery.createdAt))</td><td>\(retryButton(delivery, viewer: viewer))</td></tr>
            """
        }
        let table: HTML =
            page.isEmpty
            ? "<p class=\"empty\">No push matches.</p>"
            : """
            <table class="deliveries cards"><thead><tr><th class="number">Push</th><th>Key</th><th>Event</th><th>To</th><th>Status</th>
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
}

/// One device as the registry knows it.
extension DashboardPages {
    static func device(_ id: String, pushToStart: [PushToStartTokenRecord], surfaces: [SurfaceTokenRecord], viewer: DashboardViewer) -> HTML {
        let starts = pushToStart.html { token in
            let state: HTML = token.deadReason.map { "<span class=\"badge failed\">dead</span> \($0)" } ?? "<span class=\"badge live\">live</span>"
            return """
                <tr><td>\(token.bundleID)</td><td data-label="type">\(token.attributesType)</td>
                <td data-label="token"><code>\(DeviceToken.shortened(token.token))</code></td><td data-label="environment">\(token.environment.rawValue)</td>
                <td data-label="user">\(token.userID ?? "")</td><td data-label="app version">\(token.appVersion ?? "")</td><td>\(state)</td>
                <td data-label="updated">\(time(token.updatedAt))</td></tr>
                """
        }
        let widgets = surfaces.html { token in
            let what: HTML =
                token.pushType == .widgets
                ? "\(token.widgets.map { "\($0.kind) (\($0.family))" }.joined(separator: ", "))"
                : "control <strong>\(token.kind)</strong>"
            return """
                <tr><td>\(token.bundleID)</td><td data-label="type">\(token.pushType.rawValue)</td><td>\(what)</td>
                <td data-label="token"><code>\(DeviceToken.shortened(token.token))</code></td><td data-label="environment">\(token.environment.rawValue)</td>
                <td data-label="user">\(token.userID ?? "")</td><td data-label="updated">\(time(token.updatedAt))</td></tr>
                """
        }
        let none: HTML = "<p class=\"empty\">None.</p>"
        let startTable: HTML =
            pushToStart.isEmpty
            ? none
            : "<table class=\"cards\"><thead><tr><th>App</th><th>Attributes type</th><th>Token</th><th>Environment</th><th>User</th><th>App version</th><th>State</th><th>Updated</th></tr></thead><tbody>\(starts)</tbody></table>"
        let surfaceTable: HTML =
            surfaces.isEmpty
            ? none
            : "<table class=\"cards\"><thead><tr><th>App</th><th>Type</th><th>Widgets or control</th><th>Token</th><th>Environment</th><th>User</th><th>Updated</th></tr></thead><tbody>\(widgets)</tbody></table>"
        return page(
            "Device \(id)", section: nil, viewer: viewer,
            """
            <h1>Device <code>\(id)</code></h1>
            <p class="muted">What the registry holds of it. Its update tokens are on each activity's page; every push to it is on <a href="/dashboard/deliveries">Deliveries</a>.</p>
            <div data-live id="device-tokens">
            <h2>Push-to-start tokens</h2>
            \(startTable)
            <h2>Widget and control tokens</h2>
            \(surfaceTable)
            </div>
            """)
    }
}
