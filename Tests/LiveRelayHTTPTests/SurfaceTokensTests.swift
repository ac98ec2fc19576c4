import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import Testing

/// What an app's widget extension reports (iOS 26): the widget token with the widgets placed,
/// and every control's token; each report replaces the last, and bad ones name the field.
struct SurfaceTokensTests {
    static func hex(_ seed: UInt8) -> String { String(repeating: String(format: "%02x", seed), count: 32) }

    @Test func widgetAndControlTokensAreReportedReplacedAndWithdrawn() async throws {
        try await withRelayHarness { relay in
            let widgets: JSONValue = .array([
                .object([("kind", .string("score")), ("family", .string("systemSmall"))]),
                .object([("kind", .string("score")), ("family", .string("accessoryRectangular"))]),
            ])
            let reported = try await relay.post(
                "/v1/widget-tokens",
                .object([
                    ("deviceID", .string("iphone-1")), ("token", .string(Self.hex(0xA1))), ("widgets", widgets), ("appVersion", .string("2.0 (7)")),
                ]),
                scope: .client)
            #expect(reported.status == 201 && reported.json["tokens"] == .integer(1), "\(reported.json)")
            let controls = try await relay.post(
                "/v1/control-tokens",
                .object([
                    ("deviceID", .string("iphone-1")),
                    (
                        "controls",
                        .array([
                            .object([("kind", .string("garage")), ("token", .string(Self.hex(0xC1)))]),
                            .object([("kind", .string("lights")), ("token", .string(Self.hex(0xC2)))]),
                        ])
                    ),
                ]), scope: .client)
            #expect(controls.status == 201 && controls.json["tokens"] == .integer(2), "\(controls.json)")
            var kept = try await relay.store.surfaceTokens(deviceID: "iphone-1")
            #expect(kept.map(\.token) == [Self.hex(0xC1), Self.hex(0xC2), Self.hex(0xA1)])
            #expect(kept.last?.widgets.map(\.family) == ["systemSmall", "accessoryRectangular"] && kept.last?.appVersion == "2.0 (7)")

            // Rotated; then the last widget removed: the token is withdrawn.
            _ = try await relay.post(
                "/v1/widget-tokens", .object([("deviceID", .string("iphone-1")), ("token", .string(Self.hex(0xA2))), ("widgets", widgets)]),
                scope: .client)
            kept = try await relay.store.surfaceTokens(deviceID: "iphone-1")
            #expect(kept.filter { $0.pushType == .widgets }.map(\.token) == [Self.hex(0xA2)])
            let withdrawn = try await relay.post(
                "/v1/widget-tokens", .object([("deviceID", .string("iphone-1")), ("token", .null), ("widgets", .array([]))]), scope: .client)
            #expect(withdrawn.status == 201 && withdrawn.json["tokens"] == .integer(0))
            #expect(try await relay.store.surfaceTokens(deviceID: "iphone-1").allSatisfy { $0.pushType == .controls })
        }
    }

    @Test(arguments: [
        (#"{"deviceID":"d","token":"xyz","widgets":[]}"#, "token"),
        (#"{"deviceID":"d","token":null,"widgets":[{"kind":"score","family":"systemSmall"}]}"#, "token"),
        (#"{"deviceID":"d","token":"abcd","widgets":[{"kind":"score"}]}"#, "widgets[0].family"),
        (#"{"deviceID":"d","token":"abcd","widgets":[{"kind":"score","family":"systemSmall","size":2}]}"#, "widgets[0].size"),
        (#"{"deviceID":"d","token":"abcd"}"#, "widgets"),
        (#"{"deviceID":"d","controls":[{"kind":"a","token":"abcd"},{"kind":"a","token":"abce"}]}"#, "controls"),
        (#"{"deviceID":"d","controls":[{"kind":"","token":"abcd"}]}"#, "controls[0].kind"),
    ])
    func aBadReportNamesItsField(body: String, field: String) async throws {
        try await withRelayHarness { relay in
            let path = body.contains("controls") ? "/v1/control-tokens" : "/v1/widget-tokens"
            let answer = try await relay.post(path, try JSONValue(parsing: Array(body.utf8)), scope: .client)
            #expect(answer.status == 400, "\(answer.json)")
            #expect(answer.json["error"]?["field"] == .string(field), "\(answer.json)")
        }
    }

    /// Any install could claim a user: a widget token is kept with one only with the backend's grant.
    @Test func aWidgetTokenNamesAUserOnlyWithTheBackendsGrant() async throws {
        try await withRelayHarness { relay in
            let body: JSONValue = .object([
                ("deviceID", .string("iphone-1")), ("token", .string(Self.hex(0xA1))), ("widgets", .array([])), ("userID", .string("user-7")),
                ("environment", .string("production")),
            ])
            let refused = try await relay.post("/v1/widget-tokens", body, scope: .client)
            #expect(refused.status == 403 && refused.json["error"]?["code"] == .string("grant_required"), "\(refused.json)")
        }
    }
}
