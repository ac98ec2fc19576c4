import Foundation

/// `bench soak`'s figures as an SVG: four panels over the days, each line starting from zero, with
/// the retention windows marked, so that "flat after the window" is seen at a glance.
struct SoakPlot {
    let engine: String
    let scale: Double
    let historyDays: Int
    let endedDays: Int
    let days: [Day]

    struct Panel {
        var title: String
        var unit: String
        var series: [(name: String, color: String, values: [Double])]
    }

    var panels: [Panel] {
        [
            Panel(title: "Database size", unit: "MB", series: [("size", "#2563eb", days.map { Double($0.bytes) / 1_000_000 })]),
            Panel(
                title: "Rows", unit: "thousand",
                series: [
                    ("deliveries", "#2563eb", days.map { Double($0.rows["deliveries"] ?? 0) / 1000 }),
                    ("events", "#16a34a", days.map { Double($0.rows["events"] ?? 0) / 1000 }),
                    ("activity tokens", "#ea580c", days.map { Double($0.rows["activity_tokens"] ?? 0) / 1000 }),
                    ("activities", "#9333ea", days.map { Double($0.rows["activities"] ?? 0) / 1000 }),
                ]),
            Panel(title: "Single-key change, p99", unit: "ms", series: [("p99", "#dc2626", days.map(\.p99))]),
            Panel(title: "Resident memory", unit: "MB", series: [("RSS", "#0891b2", days.map { Double($0.residentMegabytes) })]),
        ]
    }

    var svg: String {
        let (width, panelHeight, left, top) = (900.0, 190.0, 70.0, 60.0)
        let plotWidth = width - left - 30
        let height = top + Double(panels.count) * (panelHeight + 40) + 10
        let count = max(days.count, 2)
        func x(_ index: Int) -> Double { left + plotWidth * Double(index) / Double(count - 1) }
        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(width))" height="\(Int(height))" font-family="sans-serif" font-size="12">
            <rect width="100%" height="100%" fill="white"/>
            <text x="\(left)" y="24" font-size="16" font-weight="bold">bench soak on \(engine): \(days.count) simulated days at scale \(scale)</text>
            <text x="\(left)" y="44" fill="#555">history kept \(historyDays) days, ended activities \(endedDays) days (dashed lines); every line should be flat after them</text>

            """
        for (number, panel) in panels.enumerated() {
            let y0 = top + Double(number) * (panelHeight + 40) + 20
            let maximum = max(panel.series.flatMap(\.values).max() ?? 1, 1e-9) * 1.1
            func y(_ value: Double) -> Double { y0 + panelHeight - panelHeight * value / maximum }
            out += "<text x=\"\(left)\" y=\"\(y0 - 6)\" font-weight=\"bold\">\(panel.title) (\(panel.unit))</text>\n"
            out += "<rect x=\"\(left)\" y=\"\(y0)\" width=\"\(plotWidth)\" height=\"\(panelHeight)\" fill=\"none\" stroke=\"#ccc\"/>\n"
            for fraction in [0.0, 0.5, 1.0] {
                let value = maximum * fraction / 1.1
                out += "<text x=\"\(left - 6)\" y=\"\(format(y(value) + 4))\" text-anchor=\"end\" fill=\"#555\">\(label(value))</text>\n"
            }
            for (window, name) in [(endedDays, "ended"), (historyDays, "history")] where window < days.count {
                let position = format(x(window - 1))
                out +=
                    "<line x1=\"\(position)\" y1=\"\(y0)\" x2=\"\(position)\" y2=\"\(y0 + panelHeight)\" stroke=\"#999\" stroke-dasharray=\"4 4\"/>\n"
                out += "<text x=\"\(position)\" y=\"\(y0 + panelHeight + 14)\" text-anchor=\"middle\" fill=\"#777\">\(name) \(window) d</text>\n"
            }
            for (index, series) in panel.series.enumerated() {
                let points = series.values.enumerated().map { "\(format(x($0.offset))),\(format(y($0.element)))" }.joined(separator: " ")
                out += "<polyline fill=\"none\" stroke=\"\(series.color)\" stroke-width=\"2\" points=\"\(points)\"/>\n"
                if panel.series.count > 1 {
                    out += "<text x=\"\(left + 10 + Double(index) * 130)\" y=\"\(y0 + 16)\" fill=\"\(series.color)\">\(series.name)</text>\n"
                }
            }
        }
        out += "<text x=\"\(left + plotWidth)\" y=\"\(Int(height) - 8)\" text-anchor=\"end\" fill=\"#555\">day \(days.count)</text>\n</svg>\n"
        return out
    }

    private func format(_ value: Double) -> String { String(format: "%.1f", value) }
    private func label(_ value: Double) -> String { value >= 100 ? String(format: "%.0f", value) : String(format: "%.1f", value) }
}
