/// The style sheet of the dashboard and of the emulator's devices page, inside the binary: no CDN,
/// no build step.
package enum PageStyle {
    package static let sheet =
        baseStyle + stride(from: 5, through: 100, by: 5).map { ".h\($0) { height: \($0)%; }" }.joined(separator: " ") + "\n"
        + devices

    private static let baseStyle = """
        :root { --ink: #1d1d1f; --muted: #6e6e73; --line: #d2d2d7; --panel: #fff; --page: #f5f5f7; --accent: #0a66d8;
          --green: #1a7f37; --red: #c62828; --amber: #9a6700; --grey: #57606a; font-family: -apple-system, "Segoe UI", system-ui, sans-serif; }
        * { box-sizing: border-box; }
        body { margin: 0; background: var(--page); color: var(--ink); font-size: 15px; line-height: 1.45; }
        a { color: var(--accent); text-decoration: none; } a:hover { text-decoration: underline; }
        code, pre, textarea { font-family: ui-monospace, "SF Mono", Menlo, Consolas, monospace; font-size: 13px; }
        .bar { display: flex; flex-wrap: wrap; align-items: center; gap: 8px 24px; padding: 10px 24px; background: #1d1d1f; color: #f5f5f7; }
        .bar a { color: #f5f5f7; } .brand { font-weight: 700; letter-spacing: .02em; }
        .bar nav { display: flex; flex-wrap: wrap; gap: 6px 16px; flex: 1; } .bar nav a { opacity: .75; } .bar nav a[aria-current] { opacity: 1; font-weight: 600; }
        .who { display: flex; align-items: center; gap: 12px; margin-left: auto; } .who small { opacity: .7; } .who form { margin: 0; }
        main { max-width: 1180px; margin: 0 auto; padding: 20px 24px 48px; }
        h1 { font-size: 26px; margin: 8px 0 16px; } h2 { font-size: 17px; margin: 24px 0 10px; } h2 small { color: var(--muted); font-weight: 400; }
        .card { background: var(--panel); border: 1px solid var(--line); border-radius: 12px; padding: 16px 20px; }
        .card h2 { margin-top: 0; } [data-live] + section.card, #activity-change > .card { margin-top: 16px; } .narrow { max-width: 440px; margin: 48px auto; }
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
        .timeline th:nth-child(1) { width: 14%; } .timeline th:nth-child(2) { width: 12%; } .timeline th:nth-child(3) { width: 11%; }
        .timeline th:nth-child(4) { width: 16%; } .timeline th:nth-child(5) { width: 18%; } .timeline th:nth-child(6) { width: 17%; }
        .event-list { list-style: none; padding: 0; margin: 0; display: flex; flex-direction: column; gap: 8px; overflow-wrap: anywhere; }
        .webhook .row { margin-bottom: 16px; }
        td time { white-space: nowrap; } .timeline td time { white-space: normal; }
        form.filters { display: flex; flex-wrap: wrap; gap: 12px; align-items: end; margin-bottom: 16px; }
        label { display: flex; flex-direction: column; gap: 4px; font-size: 13px; color: var(--muted); }
        input, select, textarea { font: inherit; color: var(--ink); padding: 6px 8px; border: 1px solid var(--line); border-radius: 8px; background: #fff; }
        textarea { width: 100%; } .change label { margin-bottom: 10px; } .row { display: flex; gap: 12px; } .row label { flex: 1; }
        button { font: inherit; white-space: nowrap; padding: 6px 14px; border-radius: 8px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; }
        button.quiet { background: transparent; border-color: #8e8e93; color: inherit; padding: 3px 10px; }
        button.danger { background: #fff; color: var(--red); border-color: var(--red); }
        form.inline { display: inline; margin: 0; }
        .narrow form { display: flex; flex-direction: column; gap: 12px; }
        .notice { padding: 8px 12px; border-radius: 8px; } .notice.error { background: #ffebe9; color: var(--red); }
        .pages { margin-top: 12px; }
        .chart { display: flex; align-items: flex-end; gap: 3px; height: 120px; padding: 8px 12px; background: var(--panel); border: 1px solid var(--line); border-radius: 12px; }
        .chart .minute { flex: 1; min-width: 0; height: 100%; overflow: hidden; display: flex; flex-direction: column; justify-content: flex-end; background: #f5f5f7; border-radius: 3px; }
        .part { display: block; width: 100%; } .part, .swatch { background: var(--grey); } .part.sent, .swatch.sent { background: #34a853; } .part.retry, .swatch.retry { background: #e3b341; }
        .part.failed, .swatch.failed { background: #d93025; } .part.token_dead, .swatch.token_dead { background: #7b1fa2; }
        .swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; }
        .legend { display: flex; gap: 16px; font-size: 13px; margin: 6px 0 0; }
        .secret { border-color: var(--green); margin-bottom: 16px; } .secret pre { font-size: 15px; user-select: all; }
        section { margin-bottom: 8px; }
        @media (max-width: 800px) { .columns { grid-template-columns: 1fr; } }
        code, .facts dd, .stat, .stat strong, .card h2 { overflow-wrap: anywhere; } .facts dd, .columns > * { min-width: 0; }
        /* A phone: the navigation takes a row of its own under the brand and Sign out; a table
           wider than the screen scrolls in its own box; rows of fields wrap. */
        @media (max-width: 640px) {
          .bar { padding: 10px 12px; gap: 8px 12px; } .bar nav { order: 3; flex-basis: 100%; } .who span { display: none; }
          main { padding: 12px 12px 32px; } h1 { font-size: 22px; overflow-wrap: anywhere; }
          table { display: block; overflow-x: auto; } .badge { white-space: nowrap; }
          td.content { max-width: 200px; }
          /* A list of cards, not a table to scroll: each key with its fields labelled under it. */
          table.cards { display: block; } table.cards thead { display: none; } table.cards tbody, table.cards tr { display: block; }
          table.cards tr { padding: 8px 12px; border-bottom: 1px solid var(--line); } table.cards tr:last-child { border-bottom: 0; }
          table.cards td { display: block; border: 0; padding: 1px 0; max-width: none; white-space: normal; overflow-wrap: anywhere; }
          table.cards td[data-label]::before { content: attr(data-label) " "; color: var(--muted); font-size: 12px; }
          table.cards td:first-child { font-weight: 600; } table.cards td.number { text-align: left; }
          .row { flex-wrap: wrap; } form.filters > * { flex: 1 1 140px; } input, select, textarea { max-width: 100%; }
          .request-head { overflow-wrap: anywhere; }
          .device-views { gap: 16px; justify-content: center; }
        }
        """

    /// The simulated iPhones: a phone, StandBy and a Watch, drawn with boxes.
    private static let devices = """
        .device-views { display: flex; flex-wrap: wrap; gap: 28px; align-items: flex-start; margin: 8px 0 14px; }
        figure { margin: 0; } figcaption { text-align: center; color: var(--muted); font-size: 12px; margin-top: 6px; }
        .phone .screen { position: relative; width: 272px; height: 560px; border-radius: 44px; border: 10px solid #1d1d1f; overflow: hidden;
          background: linear-gradient(160deg, #27446e 0%, #5d3f79 55%, #b0596d 100%); color: #fff; padding: 44px 12px 12px; display: flex; flex-direction: column; gap: 10px; }
        .phone.unlocked .screen { background: linear-gradient(160deg, #0d5b63 0%, #1f7a8c 50%, #5fa8b6 100%); }
        .phone.classic .screen { border-radius: 28px; border-width: 12px 10px 40px; }
        .phone.offline .screen { filter: saturate(.55); }
        .status { position: absolute; top: 12px; left: 20px; right: 20px; display: flex; justify-content: space-between; font-size: 12px; font-weight: 600; }
        .phone.island .status { left: 18px; right: 18px; top: 16px; font-size: 11px; }
        .lock-clock { display: flex; flex-direction: column; align-items: center; margin: 12px 0 8px; }
        .lock-clock strong { font-size: 58px; font-weight: 600; letter-spacing: -.02em; line-height: 1; }
        .lock-icon { width: 12px; height: 9px; border-radius: 2px; background: #fff; margin-bottom: 8px; position: relative; }
        .lock-icon::before { content: ""; position: absolute; left: 2px; top: -6px; width: 8px; height: 8px; border: 2px solid #fff; border-bottom: 0; border-radius: 5px 5px 0 0; box-sizing: border-box; }
        .lock-list { display: flex; flex-direction: column; gap: 8px; overflow: hidden; }
        .nothing { text-align: center; opacity: .7; font-size: 13px; margin: 8px 0; }
        .screen .activity { position: relative; background: rgba(22, 22, 26, .82); border-radius: 18px; padding: 10px 12px; font-size: 13px; line-height: 1.35; }
        .screen .activity.alerting { box-shadow: 0 0 0 2px #fff; }
        .screen .activity .alert { margin: 6px 0 0; padding-top: 6px; border-top: 1px solid rgba(255, 255, 255, .2); }
        .screen .stale { opacity: .78; } .screen .ended { opacity: .55; }
        .tag { display: inline-block; margin-bottom: 4px; font-size: 10px; font-weight: 700; text-transform: uppercase; letter-spacing: .05em;
          padding: 1px 6px; border-radius: 999px; background: #e3b341; color: #1d1d1f; }
        .tag.ended { background: #c7c7cc; }
        .generic header { display: flex; align-items: center; gap: 6px; margin-bottom: 4px; } .generic small { opacity: .7; }
        .generic dl { display: grid; grid-template-columns: max-content 1fr; gap: 1px 10px; margin: 0; }
        .generic dt { opacity: .65; } .generic dd { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
        .app-icon { display: inline-flex; align-items: center; justify-content: center; width: 20px; height: 20px; border-radius: 6px;
          background: #34a853; color: #fff; font-size: 12px; font-weight: 700; }
        .island-pill { position: absolute; top: 10px; left: 50%; transform: translateX(-50%); height: 30px; min-width: 96px; border-radius: 999px;
          background: #000; display: flex; align-items: center; justify-content: space-between; gap: 8px; padding: 0 8px; z-index: 2; font-size: 12px; font-weight: 600; }
        .island-pill.compact { min-width: 140px; } .island-pill .camera { width: 10px; height: 10px; border-radius: 50%; background: #1c1c2a; flex: none; }
        .island-pill.compact .camera { margin: 0 auto; } .island-pill .leading, .island-pill .trailing { display: flex; align-items: center; white-space: nowrap; }
        .island-row { position: absolute; top: 10px; left: 50%; transform: translateX(-50%); display: flex; gap: 6px; z-index: 2; }
        .island-row .island-pill { position: static; transform: none; min-width: 120px; }
        .island-bubble { width: 30px; height: 30px; border-radius: 50%; background: #000; display: flex; align-items: center; justify-content: center; font-size: 11px; font-weight: 700; overflow: hidden; }
        .island-expanded { position: absolute; top: 8px; left: 8px; right: 8px; z-index: 2; background: #000; border-radius: 36px; padding: 14px 18px 16px; font-size: 13px; }
        .expanded-top { display: grid; grid-template-columns: 1fr auto 1fr; gap: 8px; align-items: start; }
        .expanded-top .trailing { text-align: right; white-space: nowrap; } .expanded-top .center { text-align: center; opacity: .8; overflow: hidden; } .island-expanded .bottom { margin-top: 8px; }
        .island-expanded .alert { margin-top: 8px; padding-top: 6px; border-top: 1px solid rgba(255, 255, 255, .2); }
        .banner { margin-top: 4px; } .banner .activity { background: rgba(246, 246, 248, .95); color: #1d1d1f; }
        .home { display: grid; grid-template-columns: repeat(4, 1fr); gap: 18px 14px; padding: 16px 10px; opacity: .45; margin-top: auto; margin-bottom: 40px; }
        .home span { aspect-ratio: 1; border-radius: 12px; background: rgba(255, 255, 255, .55); }
        .standby .screen { width: 560px; max-width: calc(100vw - 64px); height: 272px; border-radius: 30px; border: 10px solid #1d1d1f; background: #000; color: #fff;
          padding: 12px; display: flex; flex-direction: column; gap: 8px; overflow: hidden; position: relative; box-sizing: border-box; }
        .standby .island-bubble { position: absolute; top: 8px; left: 50%; transform: translateX(-50%); background: #1c1c1e; }
        /* The Lock Screen view at 200% (iOS 27's StandBy). */
        .standby .activity { flex: none; zoom: 2; background: #1c1c1e; margin-top: 18px; }
        .phone.landscape .screen { width: 560px; max-width: calc(100vw - 64px); height: 272px; padding: 40px 16px 12px; }
        .phone.landscape .lock-clock { margin: 0 0 4px; } .phone.landscape .lock-clock strong { font-size: 34px; }
        .phone.landscape .lock-list { display: grid; grid-template-columns: 1fr 1fr; }
        .phone.landscape .home { grid-template-columns: repeat(8, 1fr); gap: 14px; padding: 10px 8px; margin-bottom: 8px; }
        .island-pill.limited { min-width: 0; max-width: 112px; } .island-pill.limited .leading, .island-pill.limited .trailing { overflow: hidden; text-overflow: ellipsis; max-width: 40px; }
        .island-row.limited .island-pill { min-width: 0; max-width: 80px; }
        .carplay .screen { width: 400px; max-width: calc(100vw - 64px); height: 190px; border-radius: 18px; border: 8px solid #1d1d1f; background: #101014; color: #fff;
          display: grid; grid-template-columns: 1fr 1.2fr; gap: 10px; padding: 10px; box-sizing: border-box; overflow: hidden; }
        .carplay-map { border-radius: 12px; background: repeating-linear-gradient(35deg, #23262d 0 18px, #2b2f37 18px 20px), #23262d; }
        .carplay-card { min-width: 0; overflow: hidden; } .carplay-card.small { background: #1c1c1e; border-radius: 14px; padding: 10px; }
        .carplay-card .activity { font-size: 12px; background: #1c1c1e; }
        .mac .screen { width: 400px; max-width: calc(100vw - 64px); height: 210px; border-radius: 10px; border: 6px solid #2b2b2e; position: relative; overflow: hidden;
          background: linear-gradient(170deg, #7fa7d1 0%, #b9cde3 60%, #e4d3c8 100%); color: #1d1d1f; box-sizing: border-box; }
        .menu-bar { display: flex; justify-content: flex-end; align-items: center; gap: 8px; height: 26px; padding: 0 10px; background: rgba(255, 255, 255, .72); font-size: 12px; font-weight: 600; }
        .menu-apple { margin-right: auto; width: 10px; height: 12px; background: #1d1d1f; border-radius: 4px 4px 5px 5px; }
        .menu-item { display: inline-flex; padding: 2px; border-radius: 6px; } .menu-item.open { background: rgba(0, 0, 0, .16); }
        .menu-item .app-icon { width: 16px; height: 16px; font-size: 10px; border-radius: 5px; }
        .menu-popover { position: absolute; top: 32px; right: 10px; width: 260px; max-width: calc(100% - 20px); }
        .menu-popover .activity { background: rgba(28, 28, 32, .94); color: #fff; }
        .mac .nothing, .carplay .nothing { align-self: center; padding: 8px; }
        .device-log { font-size: 12px; color: var(--muted); margin: 0 0 12px; } .device-log h3 { font-size: 12px; margin: 0 0 4px; }
        .device-log ol { list-style: none; padding: 0; margin: 0; display: grid; gap: 2px; } .device-log li { overflow-wrap: anywhere; }
        .device-log time { font-variant-numeric: tabular-nums; margin-right: 6px; color: var(--ink); }
        /* StandBy's 200% does not fit a phone's page: drawn smaller there. */
        @media (max-width: 640px) {
          .standby .screen { height: 200px; } .standby .activity { zoom: 1.3; }
          .carplay .screen { grid-template-columns: 72px 1fr; }
        }
        .home-screen .screen, .control-center .screen { width: 272px; max-width: calc(100vw - 64px); border-radius: 30px; border: 10px solid #1d1d1f;
          background: linear-gradient(160deg, #0d5b63 0%, #1f7a8c 50%, #5fa8b6 100%); color: #fff; padding: 14px; box-sizing: border-box; }
        .control-center .screen { background: #2c2c30; }
        .widget-grid { display: grid; grid-template-columns: repeat(4, 1fr); gap: 10px; }
        .widget-row { display: flex; flex-wrap: wrap; gap: 8px; } .surface-note { font-size: 11px; opacity: .8; margin: 10px 0 4px; }
        .widget { background: rgba(22, 22, 26, .78); border-radius: 16px; padding: 8px 10px; font-size: 12px; line-height: 1.3; min-width: 0; overflow: hidden;
          display: flex; flex-direction: column; gap: 3px; grid-column: span 2; aspect-ratio: 1; }
        .widget.systemMedium { grid-column: span 4; aspect-ratio: 2.1; } .widget.systemLarge, .widget.systemExtraLarge { grid-column: span 4; aspect-ratio: 1; }
        .widget.control { aspect-ratio: auto; border-radius: 14px; background: rgba(255, 255, 255, .14); }
        .widget-row .widget { aspect-ratio: auto; flex: 1 1 110px; border-radius: 12px; background: rgba(22, 22, 26, .55); }
        .widget header { display: flex; align-items: center; gap: 6px; } .widget header strong { overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
        .widget dl { display: grid; grid-template-columns: max-content 1fr; gap: 0 6px; margin: 0; } .widget dt { opacity: .65; }
        .widget dd { margin: 0; font-weight: 600; overflow-wrap: anywhere; } .widget-value { margin: 0; font-weight: 600; overflow-wrap: anywhere; }
        .widget-empty { margin: 0; opacity: .7; } .widget footer { margin-top: auto; font-size: 10px; opacity: .75; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; }
        .widget.systemSmall { font-size: 11px; } .widget.systemSmall dl { grid-template-columns: 1fr; } .widget.systemSmall dt { font-size: 10px; }
        .widget.control header strong { white-space: normal; }
        .watch .screen { width: 150px; height: 180px; border-radius: 38px; border: 9px solid #1d1d1f; background: #000; color: #fff;
          padding: 16px 10px; display: flex; flex-direction: column; justify-content: center; gap: 6px; font-size: 12px; overflow: hidden; }
        .stack-card { position: relative; background: #1c1c1e; border-radius: 14px; padding: 18px 8px 8px; display: flex; justify-content: space-between; align-items: center; gap: 4px; }
        .stack-card .tag { position: absolute; top: 4px; right: 6px; } .stack-card.small { display: block; }
        .watch .alert { background: #2c2c2e; border-radius: 10px; padding: 6px 8px; }
        .person { display: flex; flex-wrap: wrap; gap: 8px; align-items: center; } .person form { max-width: 100%; }
        .person button { white-space: normal; overflow-wrap: anywhere; max-width: 100%; text-align: left; } .clock-buttons { display: inline-flex; flex-wrap: wrap; gap: 6px; align-items: center; }
        .devices-note { margin-top: 0; }
        .activity-body.with-phones { display: grid; grid-template-columns: minmax(0, 1fr) auto; gap: 24px; align-items: start; }
        .on-device { position: sticky; top: 12px; } .phone-alone > p { margin: 0 0 6px; font-size: 13px; }
        @media (max-width: 900px) { .activity-body.with-phones { grid-template-columns: minmax(0, 1fr); } }
        .tpl-row { display: flex; justify-content: space-between; align-items: center; gap: 8px; } .tpl-row > :last-child { white-space: nowrap; }
        .tpl-big { font-size: 19px; font-weight: 700; } .tpl-small { font-size: 12px; opacity: .75; }
        """
}
