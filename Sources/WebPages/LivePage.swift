import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import ServiceLifecycle
import Synchronization

/// Pages that stay current without reloading: the page names its events stream and what it shows
/// (`<body data-events="…">`); the stream says `changed` when that is no longer what the server
/// would draw; the script then fetches the page again and swaps each `data-live` section that has
/// an id, but for one the person is editing (a field focused or changed). Without JavaScript the
/// pages read the same.
package enum LivePage {
    /// A stream ends after this and the browser opens another, so none outlives its need.
    package static let streamLifetime = Duration.seconds(600)
    static let tick = Duration.milliseconds(250)
    /// Quiet ticks before a heartbeat: 5 s.
    static let heartbeatTicks = 20

    /// What the page last showed: the last event's id when the browser reconnects, else `?since=`.
    package static func shown(_ request: Request) -> String? {
        request.headers[.lastEventID] ?? request.uri.queryParameters["since"].map(String.init)
    }

    /// A page that takes long to draw is offered less often: its next `changed` waits for this many
    /// times what it took to draw last, so that an open tab keeps the server drawing it a tenth of
    /// the time at most (the overview beside a million tokens: about 145 ms, a refresh every 1.5 s).
    package static let drawCostFactor = 9

    /// Server-sent events: `changed`, its id what `current()` says now, whenever that differs from
    /// what the page shows (checked four times a second, a change held back until `spacing()` has
    /// passed since the last), and also every `forcedEvery` when set. A heartbeat comment goes out
    /// every 5 s of quiet; at each, and before each `changed`, the stream ends once `stillAllowed`
    /// says no (a session signed out, its key revoked).
    package static func events(
        shown: String?, forcedEvery: Duration? = nil, spacing: @escaping @Sendable () -> Duration = { .zero },
        stillAllowed: @escaping @Sendable () async -> Bool = { true }, current: @escaping @Sendable () -> String
    ) -> Response {
        let headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-store"]
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                var stream = LiveStream(shown: shown ?? current(), forcedEvery: forcedEvery)
                try await writer.write(ByteBuffer(string: "retry: 2000\n: listening\n\n"))
                let end = ContinuousClock.now + streamLifetime
                streaming: while ContinuousClock.now < end, !Task.isCancelled, !Task.isShuttingDownGracefully {
                    switch stream.next(current: current(), spacing: spacing()) {
                    case .changed(let now):
                        guard await stillAllowed() else { break streaming }
                        try await writer.write(ByteBuffer(string: "id: \(now)\nevent: changed\ndata: \(now)\n\n"))
                    case .heartbeat:
                        guard await stillAllowed() else { break streaming }
                        try await writer.write(ByteBuffer(string: ": still here\n\n"))
                    case .nothing: break
                    }
                    try await Task.sleep(for: tick)
                    stream.ticked()
                }
                try await writer.finish(nil)
            })
    }

    /// The script every live page loads.
    package static let script = """
        "use strict";
        (function () {
          if (!window.EventSource || !document.body.dataset.events) return;
          if (!document.querySelector("[data-live]")) return;
          let fetching = false, again = false;
          function beingEdited(section) {
            const focused = document.activeElement;
            if (focused && section.contains(focused) && focused.matches("input, textarea, select")) return true;
            for (const field of section.querySelectorAll("input, textarea")) if (field.value !== field.defaultValue) return true;
            return false;
          }
          async function refresh() {
            if (fetching) { again = true; return; }
            fetching = true;
            try {
              const response = await fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } });
              if (!response.ok) return;
              const page = new DOMParser().parseFromString(await response.text(), "text/html");
              for (const fresh of page.querySelectorAll("[data-live][id]")) {
                const current = document.getElementById(fresh.id);
                if (current && current.innerHTML !== fresh.innerHTML && !beingEdited(current)) current.innerHTML = fresh.innerHTML;
              }
              document.body.dataset.refreshed = String(Date.now());
            } finally {
              fetching = false;
              if (again) { again = false; refresh(); }
            }
          }
          const events = new EventSource(document.body.dataset.events);
          events.addEventListener("changed", refresh);
          events.addEventListener("open", () => { document.body.dataset.live = "on"; });
        })();
        """

    /// What every page says about itself: no framing, scripts and styles of this origin only, never cached.
    package static func html(_ page: HTML, status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status,
            headers: [
                .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                .contentSecurityPolicy: Self.contentSecurityPolicy,
                HTTPField.Name("X-Content-Type-Options")!: "nosniff", HTTPField.Name("Referrer-Policy")!: "same-origin",
            ],
            body: ResponseBody(byteBuffer: ByteBuffer(string: page.description)))
    }

    /// This origin only; `style` attributes (a device template's) are allowed, and cannot fetch
    /// from elsewhere.
    static let contentSecurityPolicy =
        "default-src 'self'; style-src-attr 'unsafe-inline'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"

    package static func asset(_ text: String, type: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: type, .cacheControl: "no-cache", HTTPField.Name("X-Content-Type-Options")!: "nosniff"],
            body: ResponseBody(byteBuffer: ByteBuffer(string: text)))
    }

    /// The pages' icon (a Live Activity's rounded card with a progress bar), served as
    /// `/favicon.ico` too, where browsers look first.
    package static let icon = """
        <svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32"><rect x="1" y="6" width="30" height="20" rx="6" fill="#1d1d1f"/>\
        <rect x="6" y="18" width="20" height="3" rx="1.5" fill="#3a3a3c"/><rect x="6" y="18" width="13" height="3" rx="1.5" fill="#34c759"/>\
        <circle cx="9" cy="12" r="2.5" fill="#f2f2f7"/></svg>
        """

    package static func redirect(_ path: String) -> Response {
        Response(status: .seeOther, headers: [.location: path, .cacheControl: "no-store"])
    }
}

extension HTTPField.Name {
    /// Where a reconnecting `EventSource` says which event it saw last.
    package static let lastEventID = Self("Last-Event-ID")!
}

/// What a live page's stream writes at each tick, decided here without waiting, so that its
/// rules are tested tick by tick: a change once it may go, a heartbeat after 5 s of quiet.
package struct LiveStream: Sendable {
    package enum Say: Sendable, Hashable {
        case changed(String)
        case heartbeat
        case nothing
    }

    /// What the page shows, as the stream last said it.
    package private(set) var seen: String
    private let forcedTicks: Int?
    private var quietTicks = 0
    /// Ticks since the last `changed`: none was said yet, so the first may go at once.
    private var ticksSinceChanged = Int.max

    package init(shown: String, forcedEvery: Duration? = nil) {
        seen = shown
        forcedTicks = forcedEvery.map { Int($0 / LivePage.tick) }
    }

    /// What to write now that the page's state is `current`, when a change may follow the last
    /// one only after `spacing`.
    package mutating func next(current: String, spacing: Duration) -> Say {
        let changed = current != seen || forcedTicks.map { quietTicks >= $0 } == true
        let spacingTicks = Int((spacing / LivePage.tick).rounded(.up))
        if changed, ticksSinceChanged >= spacingTicks {
            seen = current
            quietTicks = 0
            ticksSinceChanged = 0
            return .changed(current)
        }
        guard quietTicks >= LivePage.heartbeatTicks else { return .nothing }
        quietTicks = 0
        return .heartbeat
    }

    /// A tick passed.
    package mutating func ticked() {
        quietTicks += 1
        if ticksSinceChanged < Int.max { ticksSinceChanged += 1 }
    }
}

/// What each live page took to draw the last time, by its path: its stream spaces its changes by
/// `LivePage.drawCostFactor` times that. Only pages drawn successfully are kept, a few dozen paths.
package final class DrawCosts: Sendable {
    private let costs = Mutex<[String: Duration]>([:])
    private static let pagesKept = 64

    package init() {}

    package func record(_ page: String, took: Duration) {
        costs.withLock { costs in
            guard costs[page] != nil || costs.count < Self.pagesKept else { return }
            costs[page] = took
        }
    }

    /// How long after a change of `page` its next may be said.
    package func spacing(_ page: String?) -> Duration {
        guard let page, let cost = costs.withLock({ $0[page] }) else { return .zero }
        return Self.spacing(afterDrawing: cost)
    }

    package static func spacing(afterDrawing cost: Duration) -> Duration { cost * LivePage.drawCostFactor }
}
