import APNsEmulator
import Foundation
import LiveActivityKit
@_spi(Adapter) import LiveRelayKit
import LiveRelayKitOnSimulatedDevices
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Testing

/// What an app's LiveRelayKit tells the server, end to end: simulated iPhones run it (the same
/// package an app ships), reporting to a real server over HTTP.
struct LiveRelayKitReportsTests {
    @Test func aPushToStartTokenIsRegisteredWithItsContractAndItsRotationReplacesIt() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            let first = try #require(try await relay.store.pushToStartTokens(deviceID: "iphone-1").first?.token)
            #expect(try await relay.store.contracts().map { "\($0.bundleID) \($0.attributesType)" } == ["\(harnessApp) DeliveryAttributes"])
            try relay.emulator.devices.withDevice("iphone-1") { device, now in
                ((), device.rotatePushToStartToken(bundleID: harnessApp, attributesType: "DeliveryAttributes", at: now))
            }
            let rotated = try #require(try relay.emulator.devices.device("iphone-1").apps[harnessApp]?.pushToStartTokens["DeliveryAttributes"])
            #expect(rotated != first)
            try await relay.eventually { try await relay.store.pushToStartTokens(deviceID: "iphone-1").map(\.token) == [rotated] }
        }
    }

    /// WidgetKit's handlers on a simulated iPhone: each widget placed or removed, each control, and
    /// a rotated token reach the server through LiveRelayKit; the last widget removed withdraws it.
    @Test func widgetAndControlTokensAreReportedReplacedOnRotationAndWithdrawn() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            func change(_ body: @escaping (inout SimulatedDevice, Date) throws -> [DeviceEvent]) throws {
                try relay.emulator.devices.withDevice("iphone-1") { device, now in ((), try body(&device, now)) }
            }
            @Sendable func widgetRows() async throws -> [SurfaceTokenRecord] {
                try await relay.store.surfaceTokens(deviceID: "iphone-1").filter { $0.pushType == .widgets }
            }
            try change { device, now in try device.placeWidget(bundleID: harnessApp, kind: "order", family: "systemSmall", at: now) }
            let token = try #require(try relay.emulator.devices.device("iphone-1").surfaces[harnessApp]?.widgetToken)
            try await relay.eventually { try await widgetRows().map(\.token) == [token] }
            try change { device, now in try device.placeWidget(bundleID: harnessApp, kind: "order", family: "accessoryRectangular", at: now) }
            try await relay.eventually { try await widgetRows().first?.widgets.map(\.family) == ["systemSmall", "accessoryRectangular"] }
            #expect(try await widgetRows().first?.environment == .sandbox)

            try change { device, now in try device.rotateWidgetToken(bundleID: harnessApp, at: now) }
            let rotated = try #require(try relay.emulator.devices.device("iphone-1").surfaces[harnessApp]?.widgetToken)
            try await relay.eventually { try await widgetRows().map(\.token) == [rotated] }

            try change { device, now in try device.addControl(bundleID: harnessApp, kind: "door", at: now) }
            try change { device, now in try device.addControl(bundleID: harnessApp, kind: "lights", at: now) }
            let controls = try relay.emulator.devices.device("iphone-1").surfaces[harnessApp]?.controls.map(\.token) ?? []
            try await relay.eventually {
                try await relay.store.surfaceTokens(deviceID: "iphone-1").filter { $0.pushType == .controls }.map(\.token) == controls
            }

            for family in ["systemSmall", "accessoryRectangular"] {
                try change { device, now in try device.removeWidget(bundleID: harnessApp, kind: "order", family: family, at: now) }
            }
            try await relay.eventually { try await widgetRows().isEmpty }
            #expect(try await relay.store.surfaceTokens(deviceID: "iphone-1").count == 2, "the controls stay")
        }
    }

    @Test func aPushStartedActivitysTokenIsRegisteredUnderItsKeyWithinASecondAndItsRotationReplacesIt() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            _ = try await relay.post("/v1/activities/order-7/start", startBody(key: "order-7"))
            try await relay.dispatch()
            try await relay.eventually { try relay.activity(on: "iphone-1") != nil }
            let issued = ContinuousClock.now
            try await relay.waitForToken("order-7", device: "iphone-1")
            // About 12 ms on an idle machine: nothing waits for a timer. The bound allows for the
            // whole test suite running beside it on two cores (1.3 s seen).
            #expect(ContinuousClock.now - issued < .seconds(5))
            let activity = try #require(try relay.activity(on: "iphone-1"))
            try relay.emulator.devices.withDevice("iphone-1") { device, now in ((), device.rotateUpdateToken(activityID: activity.id, at: now)) }
            let rotated = try #require(try relay.activity(on: "iphone-1")?.pushToken)
            try await relay.eventually { try await relay.store.activityTokens(app: harnessApp, key: "order-7").map(\.token) == [rotated] }

            // The server tells which reports came from LiveRelayKit, and which version.
            let reporter = "LiveRelayKit \(LiveRelayKitVersion.current)"
            #expect(try await relay.get("/v1/activities/order-7").json["tokens"]?[0]?["reportedBy"] == .string(reporter))
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            #expect(try await browser.get("/dashboard/activity?app=\(harnessApp)&key=order-7").text.contains("<td>\(reporter)</td>"))
            let odd = try await relay.post(
                "/v1/activities/order-7/tokens",
                .object([
                    ("deviceID", .string("iphone-2")), ("attributesType", .string("DeliveryAttributes")),
                    ("token", .string(String(repeating: "ab", count: 32))),
                ]), scope: .client, headers: [("LiveRelayKit-Version", "1.0 <script>")])
            #expect(odd.status == 400 && odd.json["error"]?["field"] == .string("LiveRelayKit-Version"), "\(odd.json)")
        }
    }

    @Test func thePersonDismissingAndTheSystemEndingAreReportedWithWhoEndedIt() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("dismissed", on: ["iphone-1"])
            let activity = try #require(try relay.activity(on: "iphone-1"))
            try relay.emulator.devices.withDevice("iphone-1") { device, now in ((), device.dismissByPerson(activityID: activity.id, at: now)) }
            try await relay.eventually {
                try await relay.store.activityTokens(app: harnessApp, key: "dismissed").map(\.stateReason) == ["reported by the device (person)"]
            }
            #expect(try await relay.store.activityTokens(app: harnessApp, key: "dismissed").map(\.state) == [.dismissed])

            // Started on both iPhones; each ends it at eight hours (the server's own clock is not
            // asked here: only the devices move on).
            try await relay.startActivity("expires", on: ["iphone-2"])
            relay.emulator.clock.advance(by: 8 * 3600 + 1)
            relay.emulator.devices.advanceAll()
            try await relay.eventually {
                try await relay.store.activityTokens(app: harnessApp, key: "expires").map(\.stateReason)
                    == Array(
                        repeating: "reported by the device (system)", count: 2)
            }
            #expect(try await relay.store.activityTokens(app: harnessApp, key: "expires").map(\.state) == [.ended, .ended])
        }
    }

    @Test func liveActivitiesSwitchedOffWithdrawThePushToStartTokenAndOnRegisterItAgain() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            try relay.emulator.devices.withDevice("iphone-1") { device, now in
                ((), device.setSettings(of: harnessApp, liveActivitiesEnabled: false, at: now))
            }
            try await relay.eventually { try await relay.store.pushToStartTokens(deviceID: "iphone-1").isEmpty }
            // Nothing to start while off: the start reaches no device, and says so.
            let start = try await relay.post("/v1/activities/k/start", startBody(key: "k"))
            #expect(start.json["deliveries"] == .integer(0))
            try relay.emulator.devices.withDevice("iphone-1") { device, now in
                ((), device.setSettings(of: harnessApp, liveActivitiesEnabled: true, at: now))
            }
            try await relay.eventually { try await relay.store.pushToStartTokens(deviceID: "iphone-1").count == 1 }
        }
    }

    @Test func twoAppsOnOnePhoneReportEachToItsOwnAppInItsOwnEnvironment() async throws {
        try await withRelayHarness { relay in
            let other = try BundleID("com.example.liverelay.scores")
            let otherClientKey = try await relay.addApp(other, key: TestSigningKey())
            try await relay.addRegisteredDevice("iphone-1")
            try relay.addDevice("iphone-1", types: [deliveryType], environment: .production, app: other, clientKey: otherClientKey)
            try await relay.eventually { try await relay.store.pushToStartTokens(deviceID: "iphone-1").count == 2 }
            let tokens = try await relay.store.pushToStartTokens(deviceID: "iphone-1").sorted { $0.bundleID < $1.bundleID }
            #expect(tokens.map(\.bundleID) == [other.value, harnessApp])
            #expect(tokens.map(\.environment) == [.production, .sandbox])
            #expect(relay.emulator.reporter.reports.allSatisfy { $0.status.map { (200..<300).contains($0) } == true })
        }
    }
}

/// A type whose activities listen to a broadcast channel.
private struct MatchAttributes: ActivityAttributes {
    struct ContentState: Codable, Hashable {
        var score: String
    }
    var activityKey: String
}

/// An app's own types, as its widget decodes them.
private struct OrderAttributes: ActivityAttributes {
    struct ContentState: Codable, Hashable {
        enum Step: String, Codable, CaseIterable { case preparing, onTheWay = "on the way" }
        var step: Step
        var etaMinutes: Int
    }
    var activityKey: String
}

extension LiveRelayKitReportsTests {
    /// The contract LiveRelayKit reads from an app's Swift types is one the server takes, and the
    /// server then refuses what those types would not decode.
    @Test func aContractReadFromSwiftTypesIsTheOneTheServerChecks() async throws {
        try await withRelayHarness { relay in
            let client = LiveRelayClient(
                server: try #require(URL(string: relay.baseURL)), clientKey: try #require(relay.keys[.client]), bundleID: harnessApp,
                environment: .sandbox, deviceID: "iphone-9", storage: MemoryReportStorage())
            client.start()
            await client.include(
                try ActivityContractShape(
                    attributesType: "OrderAttributes", attributes: OrderAttributes.self, contentState: OrderAttributes.ContentState.self))
            await client.observe(.pushToStartToken(attributesType: "OrderAttributes", token: Data(repeating: 7, count: 32)))
            try await relay.eventually { try await relay.store.pushToStartTokens(deviceID: "iphone-9").count == 1 }
            let start: (JSONValue) async throws -> RelayHarness.Answer = { state in
                try await relay.post(
                    "/v1/activities/o-1/start",
                    .object([
                        ("attributesType", .string("OrderAttributes")), ("attributes", .object([("activityKey", .string("o-1"))])),
                        ("contentState", state), ("alert", json(#"{"title": "Order", "body": "Preparing"}"#)),
                        ("audience", json(#"{"everyone": true}"#)),
                    ]))
            }
            let refused = try await start(json(#"{"step": "cooking", "etaMinutes": 5}"#))
            #expect(refused.status == 422 && refused.json["error"]?["field"] == .string("contentState.step"), "\(refused.json)")
            #expect(try await start(json(#"{"step": "on the way", "etaMinutes": 5}"#)).status == 201)
        }
    }
}

extension LiveRelayKitReportsTests {
    /// An iPhone before iOS 18 cannot join a channel (spec §3.1): told its iOS by LiveRelayKit, the
    /// server starts it with its own update token, says so, and sends it the key's updates and end
    /// one by one beside the broadcast; both iPhones show every change.
    @Test func aChannelBoundKeyReachesAnIPhoneThatCannotJoinAChannelOneByOne() async throws {
        try await withRelayHarness { relay in
            relay.emulator.registry.setBroadcastEnabled(for: nil)
            try relay.emulator.devices.addDevice(id: "iphone-17", systemVersion: SystemVersion(17, 6))
            try await relay.addRegisteredDevice("iphone-17")
            try await relay.addRegisteredDevice("iphone-26")
            #expect(try await relay.store.pushToStartTokens(deviceID: "iphone-17").first?.systemVersion == SystemVersion(17, 6))
            #expect(try await relay.store.pushToStartTokens(deviceID: "iphone-26").first?.systemVersion == SystemVersion(26))
            let started = try await relay.post(
                "/v1/activities/match-8/start", startBody(key: "match-8", extra: [("channel", json(#"{"storagePolicy": 1}"#))]))
            #expect(started.status == 201 && started.json["deliveries"] == .number("2"), "\(started.json)")
            let channel = try #require(started.json["channelID"]?.stringValue)
            let warnings = (started.json["warnings"]?.arrayElements ?? []).compactMap(\.stringValue)
            #expect(
                warnings.contains { $0.hasPrefix("1 device(s) of the audience run an iOS before 18.0, which cannot join a channel") }, "\(warnings)")
            try await relay.dispatch()
            try await relay.eventually { try relay.activity(on: "iphone-17") != nil && relay.activity(on: "iphone-26") != nil }
            #expect(try relay.activity(on: "iphone-17")?.pushType == .token)
            #expect(try relay.activity(on: "iphone-26")?.pushType == .channel(channel))
            try await relay.waitForToken("match-8", device: "iphone-17")

            for (event, status) in [("update", "on the way"), ("end", "delivered")] {
                let changed = try await relay.post("/v1/activities/match-8/\(event)", .object([("contentState", content(status, 0))]))
                #expect(changed.status == 200 && changed.json["deliveries"] == .number("2"), "a broadcast and one push: \(changed.json)")
                try await relay.dispatch()
                try await relay.eventually {
                    try ["iphone-17", "iphone-26"].allSatisfy { try relay.activity(on: $0)?.content.state["status"] == .string(status) }
                }
            }
            #expect(try relay.activity(on: "iphone-17")?.state == .ended && relay.activity(on: "iphone-26")?.state == .ended)
        }
    }

    /// Updating iOS restarts the iPhone and its apps: the push-to-start token it is issued once
    /// Live Activities are switched off and on is reported with the new version.
    @Test func anIOSUpdateIsReportedWithTheNextPushToStartToken() async throws {
        try await withRelayHarness { relay in
            try relay.emulator.devices.addDevice(id: "iphone-17", systemVersion: SystemVersion(17, 6))
            try await relay.addRegisteredDevice("iphone-17")
            try relay.emulator.devices.perform(.updateOS(), on: "iphone-17")
            try relay.emulator.devices.perform(.setLiveActivities(bundleID: harnessApp, enabled: false), on: "iphone-17")
            try relay.emulator.devices.perform(.setLiveActivities(bundleID: harnessApp, enabled: true), on: "iphone-17")
            try await relay.eventually {
                try await relay.store.pushToStartTokens(deviceID: "iphone-17").map(\.systemVersion) == [SystemVersion(18)]
            }
        }
    }

    /// A channel-bound activity has no update token: LiveRelayKit reports that it listens to the
    /// key's channel, which the server shows with the key, and its dismissal as for a token.
    @Test func aChannelBoundActivityReportsThatItListensToItsKeysChannel() async throws {
        try await withRelayHarness { relay in
            relay.emulator.registry.setBroadcastEnabled(for: nil)
            try await relay.addRegisteredDevice("iphone-1")
            let started = try await relay.post(
                "/v1/activities/match-7/start", startBody(key: "match-7", extra: [("channel", json(#"{"storagePolicy": 1}"#))]))
            let channel = try #require(started.json["channelID"]?.stringValue)
            try await relay.dispatch()
            try await relay.eventually { try await relay.store.channelListeners(app: harnessApp, key: "match-7").count == 1 }
            let activity = try #require(try relay.activity(on: "iphone-1"))
            let listener = try #require(try await relay.get("/v1/activities/match-7").json["listeners"]?[0])
            #expect(listener["deviceID"] == .string("iphone-1") && listener["channelID"] == .string(channel), "\(listener)")
            #expect(listener["activityID"] == .string(activity.id) && listener["state"] == .string("live"))
            #expect(listener["reportedBy"] == .string("LiveRelayKit \(LiveRelayKitVersion.current)"))
            #expect(try await relay.get("/v1/activities/match-7").json["tokens"] == .array([]))
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let page = try await browser.get("/dashboard/activity?app=\(harnessApp)&key=match-7").text
            #expect(page.contains("Listening on its channel") && page.contains("<code>\(channel)</code>"))

            try relay.emulator.devices.withDevice("iphone-1") { device, now in ((), device.dismissByPerson(activityID: activity.id, at: now)) }
            try await relay.eventually {
                try await relay.store.channelListeners(app: harnessApp, key: "match-7").map(\.stateReason) == ["reported by the device (person)"]
            }

            // A report must name the key's own channel, of a key that exists.
            func report(_ key: String, channel: String) async throws -> RelayHarness.Answer {
                try await relay.post(
                    "/v1/activities/\(key)/listening",
                    .object([("deviceID", .string("iphone-2")), ("channelID", .string(channel)), ("environment", .string("sandbox"))]),
                    scope: .client)
            }
            let other = try await report("match-7", channel: "b3RoZXI=")
            #expect(other.status == 409 && other.json["error"]?["field"] == .string("channelID"), "\(other.json)")
            #expect(other.json["error"]?["message"]?.stringValue?.contains("its channel in sandbox is \(channel)") == true)
            let unknown = try await report("no-such-key", channel: channel)
            #expect(unknown.status == 404 && unknown.json["error"]?["field"] == .string("key"), "\(unknown.json)")
        }
    }

    /// A scheduled activity (iOS 26) takes no update until its start date: its token reaches the
    /// server when it becomes active, not when iOS issues it.
    @Test func aScheduledActivitysTokenIsRegisteredWhenItBecomesActive() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            let id = try relay.emulator.devices.withDevice("iphone-1") { device, now in
                device.setForeground(harnessApp, true)
                let requested = try device.request(
                    bundleID: harnessApp, attributesType: "DeliveryAttributes",
                    attributes: json(#"{"activityKey": "pickup-9", "orderNumber": 9}"#), content: ActivityContentState(state: content("booked", 60)),
                    pushType: .token, alert: ShownAlert(title: "Pickup", body: "Booked", at: now), start: now + 600, at: now)
                return (requested.activityID, requested.events)
            }
            #expect(try relay.activity(on: "iphone-1")?.state == .pending)
            relay.emulator.clock.advance(by: relay.emulator.configuration.devices.tokenIssueDelay)
            relay.emulator.devices.advanceAll()
            #expect(try relay.activity(on: "iphone-1")?.pushToken != nil)
            // The token is issued; give LiveRelayKit the time it takes to report a token (the
            // push-to-start's arrival below is the sign it has worked through what came before).
            try relay.emulator.devices.withDevice("iphone-1") { device, now in
                ((), device.rotatePushToStartToken(bundleID: harnessApp, attributesType: "DeliveryAttributes", at: now))
            }
            let rotated = try #require(try relay.emulator.devices.device("iphone-1").apps[harnessApp]?.pushToStartTokens["DeliveryAttributes"])
            try await relay.eventually { try await relay.store.pushToStartTokens(deviceID: "iphone-1").map(\.token) == [rotated] }
            #expect(try await relay.store.activity(app: harnessApp, key: "pickup-9") == nil)

            relay.emulator.clock.advance(by: 600)
            relay.emulator.devices.advanceAll()
            #expect(try relay.activity(on: "iphone-1")?.state == .active)
            try await relay.eventually { try await relay.store.activityTokens(app: harnessApp, key: "pickup-9").map(\.activityID) == [id] }
        }
    }
}

extension LiveRelayKitReportsTests {
    /// LiveRelayKit's ActivityKit adapter itself (the file an iOS app compiles), compiled against
    /// the simulated iPhones' ActivityKit, in an app whose types are Swift: what it reports reaches
    /// a real server, from ActivityKit's own sequences.
    @Test func theActivityKitAdapterReportsAnAppWhoseTypesAreSwift() async throws {
        try await withRelayHarness { relay in
            try relay.emulator.devices.addDevice(id: "iphone-swift")
            relay.emulator.registry.setBroadcastEnabled(for: nil)
            let app = try relay.emulator.devices.install(
                SimulatedApp(
                    bundleID: harnessApp,
                    attributeTypes: [ActivityAttributesType(OrderAttributes.self), ActivityAttributesType(MatchAttributes.self)]),
                on: "iphone-swift")
            let client = LiveRelayClient(
                server: try #require(URL(string: relay.baseURL)), clientKey: try #require(relay.keys[.client]), bundleID: harnessApp,
                environment: .sandbox, deviceID: "iphone-swift", storage: MemoryReportStorage())
            await app.run {
                client.track(OrderAttributes.self)
                client.track(MatchAttributes.self, channelBound: true)
            }

            // The contract read from the Swift types, then the push-to-start token. (The two types
            // are tracked by tasks of their own: either's token may come first.)
            try await relay.eventually {
                try await relay.store.pushToStartTokens(deviceID: "iphone-swift").contains { $0.attributesType == "OrderAttributes" }
            }
            #expect(try await relay.store.contracts().contains { $0.attributesType == "OrderAttributes" })

            // Started by a push: ActivityKit's activityUpdates, then the activity's pushTokenUpdates.
            let start = try await relay.post(
                "/v1/activities/o-7/start",
                .object([
                    ("attributesType", .string("OrderAttributes")), ("attributes", .object([("activityKey", .string("o-7"))])),
                    ("contentState", json(#"{"step": "preparing", "etaMinutes": 20}"#)), ("alert", json(#"{"title": "Order", "body": "Preparing"}"#)),
                    ("audience", json(#"{"devices": ["iphone-swift"]}"#)),
                ]))
            #expect(start.status == 201, "\(start.json)")
            try await relay.dispatch()
            try await relay.waitForToken("o-7", device: "iphone-swift")
            let activity = try #require(try relay.activity(on: "iphone-swift"))
            #expect(try await relay.store.activityTokens(app: harnessApp, key: "o-7").map(\.activityID) == [activity.id])

            // The person removes it: activityStateUpdates says dismissed, reported as the person's.
            try relay.emulator.devices.withDevice("iphone-swift") { device, now in ((), device.dismissByPerson(activityID: activity.id, at: now)) }
            try await relay.eventually {
                try await relay.store.activityTokens(app: harnessApp, key: "o-7").map(\.stateReason) == ["reported by the device (person)"]
            }

            // A channel-bound type: its push-started activity is reported listening to its key's
            // channel, which the app cannot tell and the server knows.
            try await relay.eventually { try await relay.store.pushToStartTokens(deviceID: "iphone-swift").count == 2 }
            let match = try await relay.post(
                "/v1/activities/m-1/start",
                .object([
                    ("attributesType", .string("MatchAttributes")), ("attributes", .object([("activityKey", .string("m-1"))])),
                    ("contentState", json(#"{"score": "0-0"}"#)), ("alert", json(#"{"title": "Kick-off", "body": "0-0"}"#)),
                    ("audience", json(#"{"devices": ["iphone-swift"]}"#)), ("channel", json(#"{"storagePolicy": 1}"#)),
                ]))
            let channel = try #require(match.json["channelID"]?.stringValue, "\(match.json)")
            try await relay.dispatch()
            try await relay.eventually { try await relay.store.channelListeners(app: harnessApp, key: "m-1").map(\.channelID) == [channel] }

            // Live Activities switched off: ActivityAuthorizationInfo's updates withdraw the token.
            try relay.emulator.devices.withDevice("iphone-swift") { device, now in
                ((), device.setSettings(of: harnessApp, liveActivitiesEnabled: false, at: now))
            }
            try await relay.eventually { try await relay.store.pushToStartTokens(deviceID: "iphone-swift").isEmpty }
            withExtendedLifetime(client) {}
        }
    }

    /// The client an app sets up at launch is LiveRelayKit's to keep: it sends at once what a
    /// launch killed before sending left, the app dropping its reference stops nothing, and
    /// setting up again gives the same client (never a second sender of the same backlog).
    @Test func theClientSetUpAtLaunchOutlivesTheReferenceTheAppDropped() async throws {
        try await withRelayHarness { relay in
            let server = try #require(URL(string: relay.baseURL))
            let clientKey = try #require(relay.keys[.client])
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("liverelaykit-\(UUID().uuidString)")
            defer { try? FileManager.default.removeItem(at: folder) }
            func launch() -> LiveRelayClient {
                LiveRelayClient.setUp(
                    server: server, clientKey: clientKey, bundleID: harnessApp, environment: .sandbox, folder: folder, log: { _ in })
            }
            // An earlier launch saw a token and was killed before it could send it (offline).
            do {
                let killed = LiveRelayClient(
                    server: try #require(URL(string: "http://127.0.0.1:1")), clientKey: clientKey, bundleID: harnessApp, environment: .sandbox,
                    folder: folder, log: { _ in })
                await killed.observe(.pushToStartToken(attributesType: "OrderAttributes", token: Data(repeating: 8, count: 32)))
            }
            weak let dropped = launch()
            let client = try #require(dropped, "kept by LiveRelayKit once the app's reference went")
            #expect(launch() === client)
            let tokens: @Sendable () async throws -> [String] = {
                try await relay.store.pushToStartTokens(deviceID: client.reporter.deviceID).map(\.token)
            }
            // Set up, it sends what the earlier launch kept, before any type is tracked.
            try await relay.eventually { try await tokens() == [String(repeating: "08", count: 32)] }
            // It sends by itself (setUp started it): no call of the app's keeps it going.
            await client.observe(.pushToStartToken(attributesType: "OrderAttributes", token: Data(repeating: 9, count: 32)))
            try await relay.eventually { try await tokens() == [String(repeating: "09", count: 32)] }
            try await relay.eventually { await client.status == .upToDate }
        }
    }

    /// `end(_:content:dismissalPolicy:)` ends the activity through ActivityKit and reports the
    /// end as the app's: without it, ActivityKit's `.ended` alone is reported as the system's.
    @Test func anActivityEndedThroughTheClientIsReportedAsTheApps() async throws {
        try await withRelayHarness { relay in
            try relay.emulator.devices.addDevice(id: "iphone-end")
            let app = try relay.emulator.devices.install(
                SimulatedApp(bundleID: harnessApp, attributeTypes: [ActivityAttributesType(OrderAttributes.self)]), on: "iphone-end")
            let client = LiveRelayClient(
                server: try #require(URL(string: relay.baseURL)), clientKey: try #require(relay.keys[.client]), bundleID: harnessApp,
                environment: .sandbox, deviceID: "iphone-end", storage: MemoryReportStorage())
            await app.run { client.track(OrderAttributes.self) }
            try await relay.eventually { try await relay.store.pushToStartTokens(deviceID: "iphone-end").count == 1 }
            for key in ["o-app", "o-push"] {
                let start = try await relay.post(
                    "/v1/activities/\(key)/start",
                    .object([
                        ("attributesType", .string("OrderAttributes")), ("attributes", .object([("activityKey", .string(key))])),
                        ("contentState", json(#"{"step": "preparing", "etaMinutes": 20}"#)),
                        ("alert", json(#"{"title": "Order", "body": "Preparing"}"#)), ("audience", json(#"{"devices": ["iphone-end"]}"#)),
                    ]))
                #expect(start.status == 201, "\(start.json)")
                try await relay.dispatch()
                try await relay.waitForToken(key, device: "iphone-end")
            }
            let delivered = OrderAttributes.ContentState(step: .onTheWay, etaMinutes: 0)
            try await app.run {
                let activity = try #require(Activity<OrderAttributes>.activities.first { $0.attributes.activityKey == "o-app" })
                await client.end(activity, content: ActivityContent(state: delivered, staleDate: nil), dismissalPolicy: .default)
            }
            try await relay.eventually {
                try await relay.store.activityTokens(app: harnessApp, key: "o-app").map(\.stateReason) == ["reported by the device (app)"]
            }
            #expect(
                try relay.emulator.devices.device("iphone-end").activities.first { $0.attributes["activityKey"] == .string("o-app") }?.state == .ended
            )
            // Ended by a push: reported as the system's.
            let ended = try await relay.post(
                "/v1/activities/o-push/end", .object([("contentState", json(#"{"step": "on the way", "etaMinutes": 0}"#))]))
            #expect(ended.status == 200, "\(ended.json)")
            try await relay.dispatch()
            try await relay.eventually {
                try await relay.store.activityTokens(app: harnessApp, key: "o-push").map(\.stateReason) == ["reported by the device (system)"]
            }
            withExtendedLifetime(client) {}
        }
    }

    /// An activity that ended while its app was not running changes no more, so its state
    /// sequence says nothing: launched, the adapter reads the activity's token and state at once.
    @Test func anActivityThatEndedWhileTheAppWasNotRunningIsReportedAtItsLaunch() async throws {
        try await withRelayHarness { relay in
            try relay.emulator.devices.addDevice(id: "iphone-late")
            let app = try relay.emulator.devices.install(
                SimulatedApp(bundleID: harnessApp, attributeTypes: [ActivityAttributesType(OrderAttributes.self)]), on: "iphone-late")
            // The app ran once (its push-to-start token is the server's), then was not running.
            let pushToStart = try #require(try relay.emulator.devices.device("iphone-late").apps[harnessApp]?.pushToStartTokens["OrderAttributes"])
            let registered = try await relay.post(
                "/v1/push-to-start-tokens",
                .object([
                    ("deviceID", .string("iphone-late")), ("attributesType", .string("OrderAttributes")), ("token", .string(pushToStart)),
                ]), scope: .client)
            #expect(registered.status == 201, "\(registered.json)")
            _ = try await relay.post(
                "/v1/activities/o-9/start",
                .object([
                    ("attributesType", .string("OrderAttributes")), ("attributes", .object([("activityKey", .string("o-9"))])),
                    ("contentState", json(#"{"step": "preparing", "etaMinutes": 20}"#)), ("alert", json(#"{"title": "Order", "body": "Preparing"}"#)),
                    ("audience", json(#"{"devices": ["iphone-late"]}"#)),
                ]))
            try await relay.dispatch()
            // Its token issued, then the activity ended by the 8-hour limit, still on the Lock Screen.
            for step: TimeInterval in [relay.emulator.configuration.devices.tokenIssueDelay, 8 * 3600] {
                relay.emulator.clock.advance(by: step)
                relay.emulator.devices.advanceAll()
            }
            #expect(try relay.activity(on: "iphone-late")?.pushToken != nil)
            #expect(try relay.activity(on: "iphone-late")?.state == .ended)
            #expect(try await relay.store.activityTokens(app: harnessApp, key: "o-9").isEmpty)

            let client = LiveRelayClient(
                server: try #require(URL(string: relay.baseURL)), clientKey: try #require(relay.keys[.client]), bundleID: harnessApp,
                environment: .sandbox, deviceID: "iphone-late", storage: MemoryReportStorage())
            await app.run { client.track(OrderAttributes.self) }
            try await relay.eventually {
                try await relay.store.activityTokens(app: harnessApp, key: "o-9").map(\.stateReason) == ["reported by the device (system)"]
            }
            withExtendedLifetime(client) {}
        }
    }
}
