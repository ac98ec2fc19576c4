/// Markup whose interpolated text is escaped: a `String` put into an `HTML` literal cannot open a
/// tag or leave an attribute's quotes; only another `HTML` goes in as markup.
struct HTML: Sendable, Hashable, ExpressibleByStringInterpolation, CustomStringConvertible {
    private(set) var markup: String

    init(stringLiteral value: String) { markup = value }
    init(stringInterpolation: StringInterpolation) { markup = stringInterpolation.markup }
    private init(markup: String) { self.markup = markup }

    var description: String { markup }

    static let empty = HTML(markup: "")

    /// The pieces one after another.
    init(_ pieces: some Sequence<HTML>) { markup = pieces.map(\.markup).joined() }

    static func escaped(_ text: String) -> String {
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

    struct StringInterpolation: StringInterpolationProtocol {
        fileprivate var markup = ""

        init(literalCapacity: Int, interpolationCount: Int) { markup.reserveCapacity(literalCapacity + interpolationCount * 16) }
        mutating func appendLiteral(_ literal: String) { markup += literal }
        mutating func appendInterpolation(_ text: String) { markup += HTML.escaped(text) }
        mutating func appendInterpolation(_ text: Substring) { markup += HTML.escaped(String(text)) }
        mutating func appendInterpolation(_ number: some BinaryInteger) { markup += String(number) }
        mutating func appendInterpolation(_ html: HTML) { markup += html.markup }
        mutating func appendInterpolation(_ pieces: [HTML]) { markup += pieces.map(\.markup).joined() }
    }
}

extension Sequence {
    /// The markup of each element, one after another.
    func html(_ transform: (Element) throws -> HTML) rethrows -> HTML { HTML(try map(transform)) }
}
