import Foundation
import LiveActivityKit
import Testing

/// Strings as the serialiser writes them: escaped where JSON requires, copied as they are elsewhere.
@Suite struct JSONWritingTests {
    @Test func stringsAreEscapedExactlyWhereJSONRequires() {
        let value = JSONValue.object([("k\"ey", .string("a\"b\\c\n\r\t\u{8}\u{C}\u{1}\u{1F}/é🙂"))])
        #expect(value.serializedString == #"{"k\"ey":"a\"b\\c\n\r\t\b\f\u0001\u001f/é🙂"}"#)
        #expect(JSONValue.string("").serializedString == #""""#)
        #expect(JSONValue.string("\"").serializedString == #""\"""#)
        #expect(JSONValue.string("plain text").serializedString == #""plain text""#)
    }

    /// Every string comes back as it went, whatever it holds and wherever the escapes fall.
    @Test func everyStringComesBackFromItsText() throws {
        var generator = SystemRandomNumberGenerator()
        let alphabet: [Unicode.Scalar] = ["a", "\"", "\\", "\n", "\u{0}", "\u{1F}", "\u{7F}", "é", "🙂", "/", " "]
        for _ in 0..<2_000 {
            let length = Int.random(in: 0...12, using: &generator)
            var text = String.UnicodeScalarView()
            for _ in 0..<length { text.append(alphabet.randomElement(using: &generator)!) }
            let string = String(text)
            let parsed = try JSONValue(parsing: JSONValue.string(string).serialized)
            #expect(parsed == .string(string), "\(string.debugDescription)")
        }
    }
}
