import Foundation
import LiveActivityKit
import Testing

/// Strings as the serialiser writes them: escaped where JSON requires, copied as they are elsewhere.
@Suite struct JSONWritingTests {
    @Test func stringsAreEscapedExactlyWhereJSONRequires() throws {
        let value = JSONValue.object([("k\"ey", .string("a\"b\\c\n\r\t\u{8}\u{C}\u{1}\u{1F}/é🙂"))])
        #expect(value.serializedString == #"{"k\"ey":"a\"b\\c\n\r\t\b\f\u0001\u001f/é🙂"}"#)
        #expect(JSONValue.string("").serializedString == #""""#)
        #expect(JSONValue.string("\"").serializedString == #""\"""#)
        #expect(JSONValue.string("plain text").serializedString == #""plain text""#)
        // Each escaped byte at each place of a longer string.
        for escaped in ["\"", "\\", "\u{1F}", "\u{0}"] {
            for place in 0..<17 {
                var text = String(repeating: "x", count: 17)
                text.replaceSubrange(text.index(text.startIndex, offsetBy: place)...text.index(text.startIndex, offsetBy: place), with: escaped)
                let written = JSONValue.string(text).serializedString
                #expect(try JSONValue(parsing: Array(written.utf8)) == .string(text), "\(written)")
                #expect(written.count == 17 + 2 + (escaped == "\u{1F}" || escaped == "\u{0}" ? 5 : 1), "\(written)")
            }
        }
        // Bytes just above what needs an escape, and UTF-8's high bytes, are copied as they are.
        let plain = String(repeating: " !#[]~\u{7F}é🙂", count: 3)
        #expect(JSONValue.string(plain).serializedString == "\"" + plain + "\"")
        let page = JSONValue.array((0..<100).map { .object([("id", .integer($0)), ("text", .string("record \($0)"))]) })
        #expect(try JSONValue(parsing: page.serialized) == page)
    }

    /// Every string comes back as it went, whatever it holds and wherever the escapes fall.
    @Test func everyStringComesBackFromItsText() throws {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Unicode.Scalar] = [
            "a", "\"", "\\", "\n", "\u{0}", "\u{1F}", "\u{20}", "\u{21}", "\u{5B}", "\u{5D}", "\u{7F}", "é", "🙂", "/", " ",
        ]
        for _ in 0..<4_000 {
            let length = Int.random(in: 0...40, using: &generator)
            var text = String.UnicodeScalarView()
            for _ in 0..<length { text.append(alphabet.randomElement(using: &generator)!) }
            let string = String(text)
            let parsed = try JSONValue(parsing: JSONValue.string(string).serialized)
            #expect(parsed == .string(string), "\(string.debugDescription)")
        }
    }
}
