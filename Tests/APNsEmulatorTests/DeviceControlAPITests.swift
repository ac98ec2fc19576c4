import APNs
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import SimulatedDevices
import Synchronization
import Testing

@testable import APNsEmulator

/// The app's attributes as the app and the server share them.
struct OrderAttributes: ActivityAttributes {
    struct ContentState: Codable, Hashable {
        struct Driver: Codable, Hashable { var name: String }
        var step: String
        var eta: Int?
        var driver: Driver
    }

    var activityKey: String
    var orderNumber: Int
}

/// The simulated iPhones through the control API's real router, with pushes from our client to
/// the real emulator in between.
@Suite struct DeviceControlAPITests {
    let bundle = "com.example.delivery"
    static let app = #"""
        {"bundleID":"com.example.delivery","attributeTypes":[{"name":"DeliveryAttributes",
          "attributes":{"activityKey":"String","orderNumber":"Int"},
          "contentState":{"step":{"enum":["preparing","delivering","delivered"]},"eta":"Int?","driver":{"fields":{"name":"String"}}}}]}
        """#

    func withEmulator(
        _ body: @escaping @Sendable (any TestClientProtocol, APNsEmulator, APNsClient) async throws -> Void
    ) async throws {
        try await withEmulatorAndClient { emulator, apns in
            try await Application(router: EmulatorControlAPI(emulator: emulator).router()).test(.router) { client in
                try await body(client, emulator, apns)
            }
        }
    }

    /// `POST` that must succeed; returns the body.
    func ok(
        _ client: any TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, _ json: String? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> JSONValue {
        let (status, body) = try await client.sendJSON(method, uri, json)
        #expect((200..<300).contains(status), "\(method) \(uri): \(status) \(body?.serializedString ?? "")", sourceLocation: sourceLocation)
        return body ?? .null
    }

    @Test func aPersonDrivesTheWholeLifecycleThroughTheAPI() async throws {
        try await withEmulator { client, emulator, apns in
            _ = try await ok(client, .post, "/devices", #"{"id":"iphone","model":"iPhoneWithDynamicIsland","pairedWatch":true}"#)
            let app = try await ok(client, .post, "/devices/iphone/apps", Self.app)
            let pushToStart = try #require(app["pushToStartTokens"]?["DeliveryAttributes"]?.stringValue)
            #expect(pushToStart.count == 160)

            // Push-to-start with our client, as `liverelay push start` would.
            let start = try LiveActivityPayload.start(
                attributes: OrderAttributes(activityKey: "order-42", orderNumber: 42),
                content: ActivityContent(state: .init(step: "preparing", driver: .init(name: "Ada")), staleDate: nil),
                alert: AlertConfiguration(title: "Order 42", body: "Preparing"), timestamp: emulator.clock.now,
                attributesType: "DeliveryAttributes", inputPush: .token)
            try await apns.send(start, to: DeviceToken(pushToStart), topic: BundleID(bundle))
            let started = try await ok(client, .post, "/clock/advance", #"{"seconds":1}"#)
            #expect(started["now"] != nil)
            let device = try await ok(client, .get, "/devices/iphone")
            let activity = try #require(device["activities"]?[0])
            let activityID = try #require(activity["id"]?.stringValue)
            #expect(activity["state"] == .string("active") && activity["attributes"]?["orderNumber"] == .integer(42))
            let updateToken = try #require(activity["pushToken"]?.stringValue)

            // An alerting update with a stale date and relevance: the island expands.
            let now = emulator.clock.now
            let update = try LiveActivityPayload.update(
                content: ActivityContent(
                    state: OrderAttributes.ContentState(step: "delivering", eta: 5, driver: .init(name: "Ada")), staleDate: now + 600,
                    relevanceScore: 75),
                alert: AlertConfiguration(title: "On its way", body: "5 minutes"), timestamp: now + 1)
            try await apns.send(update, to: DeviceToken(updateToken), topic: BundleID(bundle))
            _ = try await ok(client, .patch, "/devices/iphone", #"{"locked":false}"#)
            var presentation = try await ok(client, .get, "/devices/iphone/presentation")
            #expect(presentation["visible"] == .string("dynamicIsland"))
            #expect(presentation["dynamicIsland"]?["presentation"] == .string("expanded"))
            #expect(presentation["dynamicIsland"]?["alert"]?["title"] == .string("On its way"))
            #expect(presentation["watch"]?["alert"]?["alert"]?["body"] == .string("5 minutes"))

            // Ten minutes later: compact, stale.
            _ = try await ok(client, .post, "/clock/advance", #"{"seconds":601}"#)
            presentation = try await ok(client, .get, "/devices/iphone/presentation")
            #expect(presentation["dynamicIsland"]?["presentation"] == .string("compact"))
            #expect(presentation["lockScreen"]?[0]?["isStale"] == .bool(true))
            #expect(presentation["lockScreen"]?[0]?["relevanceScore"] == .integer(75))

            // The app ends it with a dismissal date; the person then swipes it away.
            let ended = try await ok(
                client, .post, "/devices/iphone/activities/\(activityID)/end",
                #"{"contentState":{"step":"delivered","driver":{"name":"Ada"}},"dismissalPolicy":"after","dismissalDate":"2099-01-01T00:00:00Z"}"#)
            #expect(ended["state"] == .string("ended"))
            let dismissed = try await ok(client, .post, "/devices/iphone/activities/\(activityID)/dismiss")
            #expect(dismissed["state"] == .string("dismissed"))
            let log = try await ok(client, .get, "/devices/iphone/log")
            let messages = (log["log"]?.arrayElements ?? []).compactMap { $0["message"]?.stringValue }
            #expect(messages.contains { $0.contains("ended by the app") } && messages.contains { $0.contains("removed by the person") })

            // Everything is in the event log, in order, filterable by activity.
            let events = try await ok(client, .get, "/events?activityID=\(activityID)")
            let kinds = (events["events"]?.arrayElements ?? []).compactMap { event -> String? in
                guard let type = event["type"]?.stringValue else { return nil }
                return event["state"]?.stringValue.map { "\(type):\($0)" } ?? type
            }
            #expect(
                kinds == [
                    "activityStarted", "tokenIssued", "contentUpdated", "stateChanged:stale", "contentUpdated",
                    "stateChanged:ended", "stateChanged:dismissed",
                ], "\(kinds)")
        }
    }

    @Test func theAppRequestsUpdatesAndIsRefusedWithActivityKitsErrors() async throws {
        try await withEmulator { client, _, _ in
            _ = try await ok(client, .post, "/devices", #"{"id":"ipad","model":"iPad"}"#)
            _ = try await ok(client, .post, "/devices/ipad/apps", Self.app)
            let request =
                #"{"attributesType":"DeliveryAttributes","attributes":{"activityKey":"k","orderNumber":1},"contentState":{"step":"preparing","driver":{"name":"Bo"}},"pushType":"token","relevanceScore":10}"#
            let activity = try await ok(client, .post, "/devices/ipad/apps/\(bundle)/activities", request)
            let id = try #require(activity["id"]?.stringValue)
            #expect(activity["pushToken"] == .null, "the token comes after the issue delay")
            _ = try await ok(client, .post, "/clock/advance", #"{"seconds":1}"#)
            let waited = try await ok(client, .get, "/events?after=0&wait=1&device=ipad")
            #expect((waited["events"]?.arrayElements ?? []).contains { $0["tokenKind"] == .string("update") })

            let updated = try await ok(
                client, .post, "/devices/ipad/activities/\(id)/update",
                #"{"contentState":{"step":"delivering","driver":{"name":"Bo"}},"alert":{"title":"Go","body":"now"}}"#)
            #expect(updated["contentState"]?["step"] == .string("delivering"))
            let presentation = try await ok(client, .get, "/devices/ipad/presentation")
            #expect(presentation["dynamicIsland"] == .null && presentation["banner"]?["alert"]?["title"] == .string("Go"), "an iPad shows a banner")

            _ = try await ok(client, .patch, "/devices/ipad/apps/\(bundle)", #"{"inForeground":false}"#)
            let background = try await client.sendJSON(.post, "/devices/ipad/apps/\(bundle)/activities", request)
            #expect(background.status == 422 && background.body?["error"]?["code"] == .string("visibility"))
            _ = try await ok(client, .patch, "/devices/ipad/apps/\(bundle)", #"{"inForeground":true,"liveActivitiesEnabled":false}"#)
            let device = try await ok(client, .get, "/devices/ipad")
            #expect(device["activities"] == .array([]), "turning Live Activities off ends and removes the app's activities")
            let denied = try await client.sendJSON(.post, "/devices/ipad/apps/\(bundle)/activities", request)
            #expect(denied.status == 422 && denied.body?["error"]?["code"] == .string("denied"))
        }
    }

    @Test(arguments: [
        ("/devices", #"{"id":"x","modle":"iPad"}"#, "modle", "unknown_key"),
        ("/devices", #"{"id":"x","model":"iPhone 15"}"#, "model", "invalid_value"),
        (
            "/devices/iphone/apps", #"{"bundleID":"com.example.a","attributeTypes":[{"name":"T","attributes":{},"contentState":{"n":"Integer"}}]}"#,
            "attributeTypes[0].contentState.n", "invalid_value"
        ),
        (
            "/devices/iphone/apps", #"{"bundleID":"com.example.a","attributeTypes":[{"name":"T","attributes":{},"contentstate":{}}]}"#,
            "attributeTypes[0].contentstate", "unknown_key"
        ),
        ("/devices/iphone/apps", #"{"bundleID":"com.example.a","attributeTypes":[],"reportTo":{"url":"ftp://x"}}"#, "reportTo.url", "invalid_value"),
        (
            "/devices/iphone/apps/com.example.delivery/activities",
            #"{"attributesType":"DeliveryAttributes","attributes":{},"contentState":{},"pushType":"tokens"}"#, "pushType", "invalid_value"
        ),
        (
            "/devices/iphone/apps/com.example.delivery/activities",
            #"{"attributesType":"DeliveryAttributes","attributes":{},"contentState":{},"start":"tomorrow"}"#, "start", "invalid_value"
        ),
        ("/clock/advance", #"{"seconds":-5}"#, "seconds", "invalid_value"),
        ("/devices/nope/apps", #"{}"#, "id", "not_found"),
        ("/devices", #"{"id":"x","iOS":"17.1"}"#, "iOS", "invalid_value"),
        ("/devices/iphone/os-update", #"{"to":"26.0"}"#, "to", "not_newer"),
        ("/devices/iphone/os-update", #"{"to":"soon"}"#, "to", "invalid_value"),
    ])
    func badInputNamesTheFieldAndTheRule(uri: String, body: String, field: String, code: String) async throws {
        try await withEmulator { client, emulator, _ in
            _ = try await ok(client, .post, "/devices", #"{"id":"iphone"}"#)
            _ = try await ok(client, .post, "/devices/iphone/apps", Self.app)
            let before = try emulator.devices.device("iphone").apps.count
            let (status, answer) = try await client.sendJSON(.post, uri, body)
            #expect((400..<500).contains(status))
            #expect(answer?["error"]?["field"] == .string(field), "\(answer?.serializedString ?? "")")
            #expect(answer?["error"]?["code"] == .string(code))
            #expect(try emulator.devices.device("iphone").apps.count == before, "nothing half-installed")
        }
    }

    /// A device runs the iOS it is given (26.0 unless told), and an update installs the next one.
    @Test func aDeviceRunsTheIOSItIsGivenAndUpdates() async throws {
        try await withEmulator { client, _, _ in
            let created = try await ok(client, .post, "/devices", #"{"id":"old","iOS":"17.2"}"#)
            #expect(created["iOS"] == .string("17.2"))
            #expect(try await ok(client, .post, "/devices", #"{"id":"new"}"#)["iOS"] == .string("26.0"))
            #expect(try await ok(client, .post, "/devices/old/os-update")["iOS"] == .string("18.0"))
            #expect(try await ok(client, .post, "/devices/old/os-update", #"{"to":"27.0"}"#)["iOS"] == .string("27.0"))
        }
    }

    /// The surfaces beyond the iPhone's screen, driven and read through the API.
    /// The person places widgets and controls, the app writes what its extension reads, and the
    /// app's view shows the tokens and each reload; WidgetKit's refusals are `422`.
    @Test func widgetsAndControlsArePlacedReadAndRemovedThroughTheAPI() async throws {
        try await withEmulator { client, emulator, apns in
            _ = try await ok(client, .post, "/devices", #"{"id":"iphone","iOS":"26.0"}"#)
            _ = try await ok(client, .post, "/devices/iphone/apps", Self.app)
            let app = "/devices/iphone/apps/\(bundle)"
            _ = try await ok(client, .put, app + "/shared-data/score", #"{"value":{"home":1,"away":0}}"#)
            let placed = try await ok(client, .post, app + "/widgets", #"{"kind":"score","family":"systemSmall"}"#)
            let token = try #require(placed["widgetToken"]?.stringValue)
            #expect(placed["widgets"]?[0]?["family"] == .string("systemSmall") && placed["widgets"]?[0]?["reloads"] == .integer(0))
            let withControl = try await ok(client, .post, app + "/controls", #"{"kind":"garage"}"#)
            #expect(withControl["controls"]?[0]?["token"]?.stringValue?.count == 160)

            try await apns.reload(.widgets, to: DeviceToken(token), topic: BundleID(bundle))
            let reloaded = try await ok(client, .get, "/devices/iphone")
            let widget = reloaded["apps"]?[0]?["widgets"]?[0]
            #expect(widget?["reloads"] == .integer(1) && widget?["value"] == .object([("home", .integer(1)), ("away", .integer(0))]))
            let events = try await ok(client, .get, "/events?device=iphone")
            let types = events["events"]?.arrayElements?.compactMap { $0["type"]?.stringValue } ?? []
            #expect(types.contains("widgetPushInfoChanged") && types.contains("controlPushInfoChanged") && types.contains("reloaded"))

            for (method, path, body, field) in [
                (HTTPRequest.Method.post, app + "/widgets", #"{"kind":"score","family":"systemHuge"}"#, "family"),
                (.post, app + "/controls", #"{"kind":"garage"}"#, "already"),
                (.delete, app + "/widgets/score/systemLarge", nil, "no score widget"),
            ] {
                let (status, answer) = try await client.sendJSON(method, path, body)
                #expect(status == 422, "\(path)")
                #expect(answer?["error"]?["message"]?.stringValue?.contains(field) == true, "\(answer?.serializedString ?? "")")
            }
            let removed = try await ok(client, .delete, app + "/widgets/score/systemSmall")
            #expect(removed["widgetToken"] == .null && removed["widgets"] == .array([]))
            _ = emulator
        }
    }

    @Test func theSurroundingsAreSetAndTheSurfacesRead() async throws {
        try await withEmulator { client, _, _ in
            _ = try await ok(client, .post, "/devices", #"{"id":"iphone","iOS":"27.0"}"#)
            _ = try await ok(client, .post, "/devices/iphone/apps", Self.app)
            let request =
                #"{"attributesType":"DeliveryAttributes","attributes":{"activityKey":"k","orderNumber":1},"contentState":{"step":"preparing","driver":{"name":"Bo"}}}"#
            let id = try #require(try await ok(client, .post, "/devices/iphone/apps/\(bundle)/activities", request)["id"]?.stringValue)
            let device = try await ok(client, .patch, "/devices/iphone", #"{"locked":false,"landscape":true,"carPlay":true,"pairedMac":true}"#)
            #expect(device["landscape"] == .bool(true) && device["carPlay"] == .bool(true) && device["pairedMac"] == .bool(true))
            let shown = try await ok(client, .get, "/devices/iphone/presentation")
            #expect(shown["orientation"] == .string("landscape") && shown["isDynamicIslandLimitedInWidth"] == .bool(true))
            #expect(shown["dynamicIsland"]?["presentation"] == .string("compact"))
            #expect(shown["carPlay"]?["activity"]?["activityID"] == .string(id))
            #expect(shown["macMenuBar"]?["opened"]?["activityID"] == .string(id))
            #expect(shown["standBy"]?["scale"] == .number("2") && shown["standBy"]?["activity"]?["activityID"] == .string(id))
        }
    }

    @Test func serverSentEventsStreamFromAGivenSequence() async throws {
        try await withEmulator { client, _, _ in
            _ = try await ok(client, .post, "/devices", #"{"id":"iphone"}"#)
            _ = try await ok(client, .post, "/devices/iphone/apps", Self.app)
            let text = try await client.execute(uri: "/events/stream?after=0&limit=1&device=iphone", method: .get) { response in
                #expect(response.headers[.contentType] == "text/event-stream")
                return String(buffer: response.body)
            }
            #expect(text.hasPrefix("id: 1\nevent: tokenIssued\ndata: {"), "\(text)")
            #expect(text.contains(#""tokenKind":"pushToStart""#) && text.hasSuffix("\n\n"))
        }
    }

    /// A stand-in for the LiveRelay server (issue 5): records what the app reports.
    @Test func anAppReportsItsTokensToTheServerItIsToldAbout() async throws {
        let received = Mutex<[(path: String, body: JSONValue, authorization: String?)]>([])
        let router = Router()
        let record: @Sendable (Request, BasicRequestContext) async throws -> HTTPResponse.Status = { request, _ in
            let body = try await request.body.collect(upTo: 1 << 16)
            let json = try JSONValue(parsing: body.readableBytesView)
            received.withLock { $0.append(("\(request.method) \(request.uri.path)", json, request.headers[.authorization])) }
            return .noContent
        }
        router.post("/v1/**", use: record)
        router.put("/v1/**", use: record)
        try await Application(router: router).test(.live) { server in
            let url = "http://127.0.0.1:\(server.port!)"
            try await withEmulator { client, emulator, _ in
                let reporting = Task { await emulator.reporter.run() }
                defer { reporting.cancel() }
                _ = try await ok(client, .post, "/devices", #"{"id":"iphone"}"#)
                let app = Self.app.replacingOccurrences(
                    of: #""attributeTypes""#, with: #""reportTo":{"url":"\#(url)","clientKey":"ck_test"},"attributeTypes""#)
                _ = try await ok(client, .post, "/devices/iphone/apps", app)
                let activity = try await ok(
                    client, .post, "/devices/iphone/apps/\(bundle)/activities",
                    #"{"attributesType":"DeliveryAttributes","attributes":{"activityKey":"order-42","orderNumber":42},"contentState":{"step":"preparing","driver":{"name":"Ada"}},"pushType":"token"}"#
                )
                let id = try #require(activity["id"]?.stringValue)
                _ = try await ok(client, .post, "/clock/advance", #"{"seconds":1}"#)
                _ = try await ok(client, .post, "/devices/iphone/activities/\(id)/dismiss")
                // Reports are sent in the background: wait (under the suite's deadline) for all four.
                while received.withLock({ $0.count }) < 4 { try await Task.sleep(for: .milliseconds(20)) }
                var reports = received.withLock { $0 }
                // First what the widget decodes, once: the server can then refuse what it would not.
                let contract = reports.removeFirst()
                #expect(contract.path == "PUT /v1/contracts/DeliveryAttributes")
                #expect(contract.body["bundleID"] == .string(bundle))
                #expect(contract.body["contentState"]?["driver"] != nil && contract.body["attributes"]?["orderNumber"] == .string("Int"))
                #expect(
                    reports.map(\.path) == [
                        "POST /v1/push-to-start-tokens", "POST /v1/activities/order-42/tokens", "POST /v1/activities/order-42/ended",
                    ])
                #expect(reports[0].body["attributesType"] == .string("DeliveryAttributes") && reports[0].body["token"]?.stringValue?.count == 160)
                #expect(reports[1].body["activityID"] == .string(id) && reports[1].body["environment"] == .string("sandbox"))
                // The person removed it while it was going: one report, the dismissal, by the person.
                #expect(reports[2].body["state"] == .string("dismissed") && reports[2].body["cause"] == .string("person"))
                #expect(reports.allSatisfy { $0.authorization == "Bearer ck_test" })
                let view = try await ok(client, .get, "/devices/iphone")
                #expect(view["apps"]?[0]?["reports"]?[0]?["status"] == .integer(204))
            }
        }
    }
}
