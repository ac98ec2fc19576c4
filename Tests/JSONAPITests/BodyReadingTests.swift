import Foundation
import JSONAPI
import LiveActivityKit
import Testing

/// The two ways our APIs read a body: `Decodable` for fixed shapes, `JSONBodyReader` where
/// literals and member order must survive. Both name the field and the rule.
@Suite struct BodyReadingTests {
    struct Window: Decodable {
        var from: Date?
        var count: Int?

        init(from decoder: any Decoder) throws {
            try decoder.refuseUnknownKeys(["from", "count"])
            let body = try decoder.container(keyedBy: JSONKey.self)
            from = try body.date(JSONKey("from"))
            count = try body.integer(JSONKey("count"), in: 0...100)
        }
    }

    struct Order: APIRequestBody {
        static let fields = ["name", "window"]
        var name: String
        var window: Window?

        init(from decoder: any Decoder) throws {
            let body = try decoder.container(keyedBy: JSONKey.self)
            name = try body.requireNonEmptyString(JSONKey("name"))
            window = try body.decodeIfPresent(Window.self, forKey: JSONKey("window"))
        }
    }

    static func refusal(_ json: String) -> JSONFieldError? {
        do {
            _ = try Order.decode(json: Array(json.utf8))
            return nil
        } catch {
            return error
        }
    }

    @Test func aFixedShapeReads() throws {
        let order = try Order.decode(json: Array(#"{"name": "n", "window": {"from": "2026-11-21T10:00:00Z", "count": 3}}"#.utf8))
        #expect(order.name == "n")
        #expect(order.window?.from == ISO8601DateFormatter().date(from: "2026-11-21T10:00:00Z"))
        #expect(order.window?.count == 3)
        #expect(
            try Order.decode(json: Array(#"{"name": "n", "window": {"from": 1800000000}}"#.utf8)).window?.from
                == Date(timeIntervalSince1970: 1_800_000_000))
    }

    @Test(
        arguments: [
            (#"{"name": "n", "nmae": 1}"#, "unknown_key", "nmae", "is not a field of this request"),
            (#"{"name": "n", "window": {"form": 1}}"#, "unknown_key", "window.form", "did you mean \"from\"?"),
            (#"{"window": {}}"#, "missing", "name", "is required"),
            (#"{"name": ""}"#, "invalid_value", "name", "must not be empty"),
            (#"{"name": 5}"#, "wrong_type", "name", "must be a string"),
            (#"{"name": "n", "window": {"count": 1e19}}"#, "invalid_value", "window.count", "whole number from 0 to 100"),
            (#"{"name": "n", "window": {"count": 1.5}}"#, "invalid_value", "window.count", "whole number"),
            (#"{"name": "n", "window": {"from": "soon"}}"#, "invalid_value", "window.from", "ISO 8601"),
            (#"{"name": "n", "window": {"from": 1e15}}"#, "invalid_value", "window.from", "between 1970"),
            (#"[1]"#, "wrong_type", nil, "must be a JSON object"),
            (#"{"name": "#, "invalid_json", nil, "not valid JSON"),
        ] as [(String, String, String?, String)])
    func aBrokenRuleIsNamed(json: String, code: String, field: String?, message: String) {
        let error = Self.refusal(json)
        #expect(error?.code == code)
        #expect(error?.field == field)
        #expect(error?.message.contains(message) == true, "\(error?.message ?? "no error")")
    }

    @Test func theReaderKeepsLiteralsAndOrder() throws {
        let body = try JSONBodyReader(try JSONBodyReader.parse(Array(#"{"state": {"b": 1.10, "a": 1e2}}"#.utf8)), fields: ["state"])
        let state = try body.require("state")
        #expect(state.serializedString == #"{"b":1.10,"a":1e2}"#)
        #expect(throws: JSONFieldError(code: "unknown_key", message: "is not a field of this request (did you mean \"state\"?)", field: "stat")) {
            try JSONBodyReader(try JSONBodyReader.parse(Array(#"{"stat": 1}"#.utf8)), fields: ["state"])
        }
    }

    @Test func theReaderRangeChecksADateBeforeConverting() throws {
        let body = try JSONBodyReader(try JSONBodyReader.parse(Array(#"{"at": 1e19}"#.utf8)), fields: ["at"])
        #expect { try body.date("at") } throws: { ($0 as? JSONFieldError)?.field == "at" }
    }
}
