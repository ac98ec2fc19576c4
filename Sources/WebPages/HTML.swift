/// Markup whose interpolated text is escaped: a `String` put into an `HTML` literal cannot open a
/// tag or leave an attribute's quotes; only another `HTML` goes in as markup.
package struct HTML: Sendable, Hashable, ExpressibleByStringInterpolation, CustomStringConvertible {
    package private(set) var markup: String

    package init(stringLiteral value: String) { markup = value }
    package init(stringInterpolation: StringInterpolation) { markup = stringInterpolation.markup }
    /// Markup made elsewhere under the same rule (a template that escapes every value it inserts).
    init(markup: String) { self.markup = markup }

    package var description: String { markup }

    package static let empty = HTML(markup: "")

    /// The pieces one after another.
    package init(_ pieces: some Sequence<HTML>) { markup = pieces.map(\.markup).joined() }

    package static func escaped(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(character)
            }
        }
        return escaped
    }

    package struct StringInterpolation: StringInterpolationProtocol {
        fileprivate var markup = ""

        package init(literalCapacity: Int, interpolationCount: Int) { markup.reserveCapacity(literalCapacity + interpolationCount * 16) }
        package mutating func appendLiteral(_ literal: String) { markup += literal }
        package mutating func appendInterpolation(_ text: String) { markup += HTML.escaped(text) }
        package mutating func appendInterpolation(_ text: Substring) { markup += HTML.escaped(String(text)) }
        package mutating func appendInterpolation(_ number: some BinaryInteger) { markup += String(number) }
        package mutating func appendInterpolation(_ html: HTML) { markup += html.markup }
        package mutating func appendInterpolation(_ pieces: [HTML]) { markup += pieces.map(\.markup).joined() }
    }
}

extension Sequence {
    /// The markup of each element, one after another.
    package func html(_ transform: (Element) throws -> HTML) rethrows -> HTML { HTML(try map(transform)) }
}

extension HTML {
    /// The pieces one after another.
    package static func + (lhs: HTML, rhs: HTML) -> HTML { HTML([lhs, rhs]) }
}
