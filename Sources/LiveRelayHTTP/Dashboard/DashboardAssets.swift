/// The dashboard's style sheet and script, inside the binary: no CDN, no build step. The pages
/// read fully without the script; it only keeps them current.
enum DashboardAssets {
    static let styleSheet = baseStyle + stride(from: 5, through: 100, by: 5).map { ".h\($0) { height: \($0)%; }" }.joined(separator: " ") + "\n"

    private static let baseStyle = """
        :root { --ink: #1d1d1f; --muted: #6e6e73; --line: #d2d2d7; --panel: #fff; --page: #f5f5f7; --accent: #0a66d8;
          --green: #1a7f37; --red: #c62828; --amber: #9a6700; --grey: #57606a; font-family: -apple-system, "Segoe UI", system-ui, sans-serif; }
        * { box-sizing: border-box; }
        body { margin: 0; background: var(--page); color: var(--ink); font-size: 15px; line-height: 1.45; }
        a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
        code, pre, textarea { font-family: ui-monospace, "SF Mono", Menlo, Consolas, monospace; font-size: 13px; }
        .bar { display: flex; align-items: center; gap: 24px; padding: 10px 24px; background: #1d1d1f; color: #f5f5f7; }
        .bar a { color: #f5f5f7; } .brand { font-weight: 700; letter-spacing: .02em; }
        .bar nav { display: flex; gap: 16px; flex: 1; } .bar nav a { opacity: .75; } .bar nav a[aria-current] { opacity: 1; font-weight: 600; }
        .who { display: flex; align-items: center; gap: 12px; margin-left: auto; } .who small { opacity: .7; } .who form { margin: 0; }
        main { max-width: 1180px; margin: 0 auto; padding: 20px 24px 48px; }
        h1 { font-size: 26px; margin: 8px 0 16px; } h2 { font-size: 17px; margin: 24px 0 10px; } h2 small { color: var(--muted); font-weight: 400; }
        .card { background: var(--panel); border: 1px solid var(--line); border-radius: 12px; padding: 16px 20px; }
        .card h2 { margin-top: 0; } [data-live] + section.card { margin-top: 16px; } .narrow { max-width: 440px; margin: 48px auto; }
        .columns { display: grid; grid-template-columns: 1fr 1fr; gap: 16px; }
        .stats { display: grid; grid-template-columns: repeat(auto-fill, minmax(170px, 1fr)); gap: 12px; }
        .stat { background: var(--panel); border: 1px solid var(--line); border-radius: 12px; padding: 12px 16px; display: flex; flex-direction: column; gap: 4px; }
        .stat span { color: var(--muted); font-size: 13px; } .stat .badge { align-self: flex-start; } .stat strong { font-size: 24px; } .stat small { font-size: 13px; color: var(--muted); font-weight: 400; }
        table { width: 100%; border-collapse: collapse; background: var(--panel); border: 1px solid var(--line); border-radius: 12px; overflow: hidden; }
        th, td { text-align: left; padding: 7px 12px; border-bottom: 1px solid #ececf0; vertical-align: top; }
        th { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); background: #fafafc; }
        tr:last-child td { border-bottom: 0; } .number { text-align: right; }
        td.content { color: var(--muted); max-width: 360px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
        .badge { display: inline-block; padding: 1px 8px; border-radius: 999px; font-size: 12px; font-weight: 600; background: #eaeef2; color: var(--grey); }
        .badge.active, .badge.live, .badge.sent, .badge.done { background: #dafbe1; color: var(--green); }
        .badge.failed, .badge.dead { background: #ffebe9; color: var(--red); }
        .badge.queued, .badge.sending, .badge.pending { background: #fff8c5; color: var(--amber); }
        .reason { color: var(--red); font-weight: 600; } .muted, .empty { color: var(--muted); }
        .facts { display: grid; grid-template-columns: max-content 1fr; gap: 4px 16px; margin: 0 0 16px; }
        .facts dt { color: var(--muted); } .facts dd { margin: 0; }
        pre.json { margin: 0; white-space: pre-wrap; word-break: break-word; }
        .crumbs { margin: 0; color: var(--muted); }
        .timeline { list-style: none; padding: 0; margin: 0; display: flex; flex-direction: column; gap: 12px; }
        .request-head { margin-bottom: 6px; }
        .timeline table { table-layout: fixed; } .timeline td { overflow-wrap: anywhere; }
        .timeline th:nth-child(1) { width: 15%; } .timeline th:nth-child(2) { width: 15%; } .timeline th:nth-child(3) { width: 8%; }
        .timeline th:nth-child(4) { width: 17%; } .timeline th:nth-child(5) { width: 19%; } .timeline th:nth-child(6) { width: 18%; }
        td time { white-space: nowrap; }
        form.filters { display: flex; flex-wrap: wrap; gap: 12px; align-items: end; margin-bottom: 16px; }
        label { display: flex; flex-direction: column; gap: 4px; font-size: 13px; color: var(--muted); }
        input, select, textarea { font: inherit; color: var(--ink); padding: 6px 8px; border: 1px solid var(--line); border-radius: 8px; background: #fff; }
        textarea { width: 100%; } .change label { margin-bottom: 10px; } .row { display: flex; gap: 12px; } .row label { flex: 1; }
        button { font: inherit; padding: 6px 14px; border-radius: 8px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; }
        button.quiet { background: transparent; border-color: #8e8e93; color: inherit; padding: 3px 10px; }
        button.danger { background: #fff; color: var(--red); border-color: var(--red); }
        form.inline { display: inline; margin: 0; }
        .narrow form { display: flex; flex-direction: column; gap: 12px; }
        .notice { padding: 8px 12px; border-radius: 8px; } .notice.error { background: #ffebe9; color: var(--red); }
        .pages { margin-top: 12px; }
        .chart { display: flex; align-items: flex-end; gap: 3px; height: 120px; padding: 8px 12px; background: var(--panel); border: 1px solid var(--line); border-radius: 12px; }
        .chart .minute { flex: 1; min-width: 0; height: 100%; display: flex; flex-direction: column; justify-content: flex-end; background: #f5f5f7; border-radius: 3px; }
        .part { display: block; width: 100%; } .part, .swatch { background: var(--grey); } .part.sent, .swatch.sent { background: #34a853; } .part.retry, .swatch.retry { background: #e3b341; }
        .part.failed, .swatch.failed { background: #d93025; } .part.token_dead, .swatch.token_dead { background: #7b1fa2; }
        .swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
        .legend { display: flex; gap: 16px; font-size: 13px; margin: 6px 0 0; }
        .secret { border-color: var(--green); margin-bottom: 16px; } .secret pre { font-size: 15px; user-select: all; }
        section { margin-bottom: 8px; }
        @media (max-width: 800px) { .columns { grid-template-columns: 1fr; } }
        """

    /// Listens to the server's events; on `changed`, fetches the page again and swaps each
    /// `data-live` section that has an id, leaving forms as they are.
    static let script = """
        "use strict";
        (function () {
          if (!window.EventSource) return;
          let fetching = false, again = false;
          async function refresh() {
            if (fetching) { again = true; return; }
            fetching = true;
            try {
              const response = await fetch(location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } });
              if (!response.ok) return;
              const page = new DOMParser().parseFromString(await response.text(), "text/html");
              for (const fresh of page.querySelectorAll("[data-live][id]")) {
                const current = document.getElementById(fresh.id);
                if (current && current.innerHTML !== fresh.innerHTML) current.innerHTML = fresh.innerHTML;
              }
              document.body.dataset.refreshed = String(Date.now());
            } finally {
              fetching = false;
              if (again) { again = false; refresh(); }
            }
          }
          if (!document.querySelector("[data-live]")) return;
          const events = new EventSource("/dashboard/events?since=" + encodeURIComponent(document.body.dataset.revision || ""));
          events.addEventListener("changed", refresh);
          events.addEventListener("open", () => { document.body.dataset.live = "on"; });
        })();
        """
}
