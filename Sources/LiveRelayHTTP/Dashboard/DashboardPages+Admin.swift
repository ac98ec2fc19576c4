import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import WebPages

/// What an admin manages: channels, API keys, and the simulated devices.
extension DashboardPages {
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
                <tr><td><code>\(channel.channelID)</code></td><td data-label="app:">\(channel.bundleID)</td>
                <td data-label="environment:">\(channel.environment.rawValue)</td><td data-label="key:">\(key)</td>
                <td data-label="storage:">\(channel.storagePolicy == 1 ? "most recent message" : "no storage")</td>
                <td data-label="created:">\(time(channel.createdAt))</td><td>\(state)</td><td>\(delete)</td></tr>
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
            \(channels.isEmpty ? HTML("<p class=\"empty\">No channel yet.</p>") : HTML("<table class=\"cards\"><thead><tr><th>Channel</th><th>App</th><th>Environment</th><th>Key</th><th>Storage</th><th>Created</th><th>State</th><th></th></tr></thead><tbody>\(rows)</tbody></table>"))
            </div>
            """)
    }

    // MARK: API keys

    /// A key just made: its secret is shown on this page once, and kept nowhere.
    struct MadeKey: Sendable {
        let record: APIKeyRecord
        let secret: String
    }

    static func apiKeys(
        _ keys: [APIKeyRecord], apps: [AppRecord], viewer: DashboardViewer, made: MadeKey? = nil, notice message: String? = nil
    ) -> HTML {
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
                <tr><td>\(key.name)</td><td data-label="id:"><code>\(key.id)</code>\(key.id == viewer.key.id ? HTML(" <small class=\"muted\">(yours)</small>") : .empty)</td>
                <td data-label="scope:">\(key.scope.rawValue)</td><td data-label="app:">\(key.bundleID ?? "every app")</td><td data-label="made:">\(time(key.createdAt))</td><td>\(state)</td><td>\(revoke)</td></tr>
                """
        }
        let shown: HTML =
            made.map { made in
                """
                <section class="card secret" role="status"><h2>\(made.record.name): its secret, shown once</h2>
                <p>Copy it now: only its hash is kept.</p><pre class="json" id="new-secret">\(made.secret)</pre></section>
                """
            } ?? .empty
        let scopes = [APIKeyScope.server, .client, .viewer, .metrics, .admin].html { "<option value=\"\($0.rawValue)\">\($0.rawValue)</option>" }
        let appOptions = "<option value=\"\">every app</option>" + apps.html { "<option value=\"\($0.bundleID)\">\($0.bundleID)</option>" }
        // A client key is public once an app ships it: what it may report, per app.
        let reports = apps.html { app in
            let open = PushEnvironment.allCases.filter(app.ungrantedReports.contains).map(\.rawValue)
            return """
                <tr><td>\(app.bundleID)</td><td data-label="without a grant:">\(open.isEmpty ? "none" : open.joined(separator: ", "))</td>
                <td data-label="grant or start needed:">\(PushEnvironment.allCases.filter { !app.ungrantedReports.contains($0) }.map(\.rawValue).joined(separator: ", "))</td></tr>
                """
        }
        let create: HTML =
            viewer.mayChange
            ? """
            <section class="card"><h2>Make a key</h2>
            <form method="post" action="/dashboard/api-keys" class="filters">\(formToken(viewer))
            <label>Name <input name="name" required maxlength="200"></label>
            <label>Scope <select name="scope">\(scopes)</select></label>
            <label>App <select name="bundleID">\(appOptions)</select></label>
            <button>Make key</button></form>
            <p class="muted">A client key is for one app; an admin, viewer or metrics key is for every app; a server key for either. A metrics key reads only <code>/metrics</code>, for Prometheus.</p></section>
            """ : .empty
        return page(
            "API keys", section: .keys, viewer: viewer,
            """
            <h1>API keys</h1>
            \(notice(message))\(shown)
            <div data-live id="key-list"><table class="cards"><thead><tr><th>Name</th><th>Key</th><th>Scope</th><th>App</th><th>Made</th><th>State</th><th></th></tr></thead>
            <tbody>\(rows)</tbody></table></div>
            <section class="card" id="grants"><h2>What a client key may report</h2>
            <p class="muted">Every app ships its client key. A device's update token or channel listener under a key is taken when the key's start was sent to it, or with the backend's grant for the key (<code>POST /v1/grants</code>); in the environments below without one too (<code>PUT /v1/apps/{bundleID}</code> sets them).</p>
            <table class="cards"><thead><tr><th>App</th><th>Without a grant</th><th>Grant or start needed</th></tr></thead><tbody>\(reports)</tbody></table></section>
            \(create)
            """)
    }

    // MARK: Devices

    /// The built-in emulator's iPhones as their owners see them now, with the person's buttons for an admin.
    static func devices(_ drawn: HTML, viewer: DashboardViewer, events: String) -> HTML {
        page(
            "Devices", section: .devices, viewer: viewer, events: events,
            """
            <h1>Devices</h1>
            <p class="muted devices-note">The built-in emulator's simulated iPhones, as the person holding each sees it now: the Lock Screen when locked, the Dynamic Island (or a banner) when not, StandBy, the Watch when one is paired, CarPlay in a car and a paired Mac's menu bar, each as the iPhone's iOS allows. A template per attributes type fills each region (<code>serve --templates</code>); without one, the fields are listed.\(viewer.mayChange ? HTML(" The buttons do what the person would.") : .empty)</p>
            \(drawn)
            """)
    }
}
