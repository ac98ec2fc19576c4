/// The samples of a text in Prometheus' exposition format, read as a scraper reads them: by name
/// and labels, whatever their order (a label's value may hold braces, as a route does). For the
/// tests and the benchmarks, which read what `/metrics` said.
package struct PrometheusSamples: Sendable {
    package struct Sample: Sendable, Hashable {
        package var name: String
        package var labels: [String: String]
        package var value: Double
    }

    package let samples: [Sample]

    package init(_ text: String) {
        samples = text.split(separator: "\n").compactMap { line -> Sample? in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else {
                return nil
            }
            let series = line[..<space]
            guard let open = series.firstIndex(of: "{") else { return Sample(name: String(series), labels: [:], value: value) }
            return Sample(name: String(series[..<open]), labels: Self.labels(series[series.index(after: open)...].dropLast()), value: value)
        }
    }

    /// `a="x",b="y"`, with `\"` and `\\` escaped in values.
    private static func labels(_ text: Substring) -> [String: String] {
        var labels: [String: String] = [:]
        var rest = text[...]
        while let equals = rest.firstIndex(of: "=") {
            let name = rest[..<equals].trimmingPrefix(",")
            var value = ""
            var index = rest.index(equals, offsetBy: 2)
            while index < rest.endIndex, rest[index] != "\"" {
                if rest[index] == "\\" { index = rest.index(after: index) }
                value.append(rest[index])
                index = rest.index(after: index)
            }
            labels[String(name)] = value
            rest = index < rest.endIndex ? rest[rest.index(after: index)...] : ""
        }
        return labels
    }

    /// The value of the series `name` whose labels include `labels`, summed over the rest (nil
    /// when there is none).
    package func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        let matching = samples.filter { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }
        return matching.isEmpty ? nil : matching.reduce(0) { $0 + $1.value }
    }
}
