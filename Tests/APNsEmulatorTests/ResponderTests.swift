import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayTesting
import SimulatedDevices
import Testing

@testable import APNsEmulator

/// A responder with one registered key, one live token, one unregistered token and one channel
/// per storage policy, judged by a manual clock.
struct Fixture {
    let clock = ManualClock()
    let key = TestSigningKey(keyID: "KEYID12345", teamID: "TEAMID1234")
    let registry = EmulatorRegistry()
    let journal = EmulatorJournal(capacity: 100)
    let faults = EmulatorFaults()
    let devices = DeviceFleet()
    let bundle = "com.example.app"
    let token = String(repeating: "ab", count: 80)
    let goneToken = String(repeating: "cd", count: 80)
    let otherAppToken = String(repeating: "ef", count: 80)
    let productionToken = String(repeating: "12", count: 80)
    let goneSince = Date(timeIntervalSince1970: 1_794_999_000.5)
    var settings = APNsEmulator.Configuration()
    /// The environment the responders play.
    let environment: PushEnvironment
    let policy0Channel: String
    let policy1Channel: String
    /// One provider token, as a client reuses it: a new one per request would be refused.
    let bearer: String

    init(environment: PushEnvironment = .sandbox) {
        self.environment = environment
        settings.now = clock.function
        registry.register(EmulatorKey(keyID: key.signingKey.keyID, teamID: key.signingKey.teamID, publicKey: key.publicKey))
        registry.register(EmulatorToken(hex: token, bundleID: bundle, environment: .sandbox))
        registry.register(EmulatorToken(hex: goneToken, bundleID: bundle, environment: .sandbox))
        registry.unregister(token: goneToken, since: goneSince)
        registry.register(EmulatorToken(hex: otherAppToken, bundleID: "com.other.app", environment: .sandbox))
        registry.register(EmulatorToken(hex: productionToken, bundleID: bundle, environment: .production))
        policy0Channel = registry.createChannel(bundleID: bundle, environment: .sandbox, storagePolicy: 0)!.id
        policy1Channel = registry.createChannel(bundleID: bundle, environment: .sandbox, storagePolicy: 1)!.id
        bearer = "bearer " + key.signingKey.makeProviderToken(issuedAt: clock.now)
    }

    var push: APNsResponder {
        APNsResponder(
            service: .push, environment: environment, settings: settings, registry: registry, journal: journal, faults: faults, devices: devices)
    }
    var management: APNsResponder {
        APNsResponder(
            service: .channelManagement, environment: environment, settings: settings, registry: registry, journal: journal, faults: faults,
            devices: devices)
    }

    var body: [UInt8] { Array(#"{"aps":{"timestamp":1795000000,"event":"update","content-state":{"a":1}}}"#.utf8) }

    /// A valid Live Activity update, changed by `edit`.
    func deviceRequest(_ edit: (inout ReceivedRequest) -> Void = { _ in }) -> ReceivedRequest {
        var request = ReceivedRequest(
            connectionID: 1, method: "POST", path: "/3/device/\(token)", authority: "127.0.0.1",
            headers: [
                ("authorization", bearer), ("apns-push-type", "liveactivity"),
                ("apns-topic", "\(bundle).push-type.liveactivity"), ("apns-priority", "10"),
            ],
            body: body)
        edit(&request)
        return request
    }

    func broadcastRequest(_ edit: (inout ReceivedRequest) -> Void = { _ in }) -> ReceivedRequest {
        var request = ReceivedRequest(
            connectionID: 1, method: "POST", path: "/4/broadcasts/apps/\(bundle)", authority: "127.0.0.1",
            headers: [
                ("authorization", bearer), ("apns-channel-id", policy0Channel), ("apns-push-type", "liveactivity"),
                ("apns-expiration", "0"), ("apns-priority", "10"),
            ],
            body: body)
        edit(&request)
        return request
    }

    func channelRequest(
        _ method: String, _ suffix: String = "channels", channelID: String? = nil, body: String = "",
        _ edit: (inout ReceivedRequest) -> Void = { _ in }
    ) -> ReceivedRequest {
        var headers = [(name: "authorization", value: bearer)]
        if let channelID { headers.append(("apns-channel-id", channelID)) }
        var request = ReceivedRequest(
            connectionID: 1, method: method, path: "/1/apps/\(bundle)/\(suffix)", authority: "127.0.0.1",
            headers: headers, body: Array(body.utf8))
        edit(&request)
        return request
    }
}

extension ReceivedRequest {
    mutating func set(_ name: String, _ value: String?) {
        headers.removeAll { $0.name == name }
        if let value { headers.append((name, value)) }
    }
}

/// Status, reason, headers and body of an answer.
struct Answer {
    var status: Int
    var headers: [(name: String, value: String)]
    var body: JSONValue?
    var reason: String? { body?["reason"]?.stringValue }
    func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

func answer(_ responder: APNsResponder, _ request: ReceivedRequest, connection: inout EmulatedConnection) -> Answer {
    guard case .respond(let status, let headers, let body) = responder.answer(request, connection: &connection) else {
        Issue.record("the emulator must answer every request")
        return Answer(status: 0, headers: [], body: nil)
    }
    return Answer(status: status, headers: headers, body: body.flatMap { try? JSONValue(parsing: $0) })
}

func answer(_ responder: APNsResponder, _ request: ReceivedRequest) -> Answer {
    var connection = responder.makeConnection(id: 1)
    return answer(responder, request, connection: &connection)
}

@Suite struct DevicePushValidationTests {
    let f = Fixture()

    @Test func aValidPushIsAcceptedWithHeadersOnlyEchoingItsID() {
        let id = "123e4567-e89b-12d3-a456-426614174000"
        let reply = answer(f.push, f.deviceRequest { $0.set("apns-id", id) })
        #expect(reply.status == 200)
        #expect(reply.body == nil, "success is a HEADERS frame only, no DATA")
        #expect(reply.header("apns-id") == id)
        #expect(reply.header("apns-unique-id") != nil, "the sandbox returns apns-unique-id")
        let generated = answer(f.push, f.deviceRequest())
        #expect(generated.header("apns-id").flatMap(UUID.init(uuidString:)) != nil)
    }

    @Test func aTokenIsTheRegisteredOneInEitherCaseAndTwoCookiesAreNoDuplicate() {
        let upper = answer(f.push, f.deviceRequest { $0.path = "/3/device/\(f.token.uppercased())" })
        #expect(upper.status == 200, "\(upper.reason ?? "")")
        let cookies = answer(f.push, f.deviceRequest { $0.headers += [("cookie", "a=1"), ("cookie", "b=2")] })
        #expect(cookies.status == 200, "HTTP/2 may split cookie into several fields: \(cookies.reason ?? "")")
    }

    @Test func productionSendsNoUniqueID() {
        let production = Fixture(environment: .production)
        let reply = answer(production.push, production.deviceRequest { $0.path = "/3/device/\(production.productionToken)" })
        #expect(reply.status == 200)
        #expect(reply.header("apns-unique-id") == nil)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        let status: Int
        let reason: String
        let edit: @Sendable (inout ReceivedRequest, Fixture) -> Void
        var testDescription: String { reason }
    }

    static let cases: [Case] = [
        Case(status: 400, reason: "DuplicateHeaders") { r, _ in r.headers.append(("apns-priority", "5")) },
        Case(status: 400, reason: "DuplicateHeaders") { r, _ in r.headers.insert(r.headers[r.headers.count - 1], at: 0) },
        Case(status: 400, reason: "BadMessageId") { r, _ in r.set("apns-id", "not-a-uuid") },
        Case(status: 405, reason: "MethodNotAllowed") { r, _ in r.method = "GET" },
        Case(status: 404, reason: "BadPath") { r, f in r.path = "/2/device/\(f.token)" },
        Case(status: 400, reason: "MissingDeviceToken") { r, _ in r.path = "/3/device/" },
        Case(status: 400, reason: "MissingTopic") { r, _ in r.set("apns-topic", nil) },
        Case(status: 400, reason: "BadTopic") { r, f in r.set("apns-topic", "\(f.bundle) .push-type.liveactivity") },
        Case(status: 400, reason: "BadTopic") { r, _ in r.set("apns-topic", "com..example") },
        Case(status: 400, reason: "BadTopic") { r, _ in r.set("apns-topic", ".com.example") },
        Case(status: 400, reason: "BadTopic") { r, _ in r.set("apns-topic", "com.example.") },
        Case(status: 400, reason: "BadTopic") { r, _ in r.set("apns-topic", "com.exämple") },
        Case(status: 400, reason: "BadCollapseId") { r, _ in r.set("apns-collapse-id", String(repeating: "c", count: 65)) },
        Case(status: 400, reason: "BadPriority") { r, _ in r.set("apns-priority", "7") },
        Case(status: 400, reason: "BadPriority") { r, _ in r.set("apns-priority", "1") },
        Case(status: 400, reason: "InvalidPushType") { r, _ in r.set("apns-push-type", "liveActivity") },
        Case(status: 400, reason: "BadExpirationDate") { r, _ in r.set("apns-expiration", "tomorrow") },
        Case(status: 400, reason: "BadDeviceToken") { r, _ in r.path = "/3/device/xyz" },
        Case(status: 400, reason: "BadDeviceToken") { r, _ in r.path = "/3/device/\(String(repeating: "99", count: 80))" },
        Case(status: 400, reason: "BadDeviceToken") { r, f in r.path = "/3/device/\(f.productionToken)" },
        Case(status: 410, reason: "Unregistered") { r, f in r.path = "/3/device/\(f.goneToken)" },
        Case(status: 400, reason: "DeviceTokenNotForTopic") { r, f in r.set("apns-topic", f.bundle) },
        Case(status: 400, reason: "DeviceTokenNotForTopic") { r, f in r.path = "/3/device/\(f.otherAppToken)" },
        Case(status: 400, reason: "DeviceTokenNotForTopic") { r, _ in r.set("apns-push-type", "alert") },
        Case(status: 403, reason: "MissingProviderToken") { r, _ in r.set("authorization", nil) },
        Case(status: 403, reason: "MissingProviderToken") { r, _ in r.set("authorization", "bearer ") },
        Case(status: 403, reason: "InvalidProviderToken") { r, _ in r.set("authorization", "bearer abc.def.ghi") },
        Case(status: 403, reason: "InvalidProviderToken") { r, f in
            r.set("authorization", "bearer " + TestSigningKey().signingKey.makeProviderToken(issuedAt: f.clock.now))
        },
        Case(status: 403, reason: "ExpiredProviderToken") { r, f in
            r.set("authorization", "bearer " + f.key.signingKey.makeProviderToken(issuedAt: f.clock.now.addingTimeInterval(-3601)))
        },
        Case(status: 400, reason: "PayloadEmpty") { r, _ in r.body = [] },
        Case(status: 413, reason: "PayloadTooLarge") { r, _ in r.body = Array(repeating: UInt8(ascii: " "), count: 4097) },
    ]

    @Test(arguments: cases)
    func eachRuleHasItsReason(_ testCase: Case) {
        let reply = answer(f.push, f.deviceRequest { testCase.edit(&$0, f) })
        #expect(reply.status == testCase.status)
        #expect(reply.reason == testCase.reason)
        #expect(reply.header("content-type") == "application/json")
        #expect(reply.header("apns-id") != nil, "errors carry apns-id too")
    }

    @Test func unregisteredCarriesItsTimestampInMilliseconds() {
        let reply = answer(f.push, f.deviceRequest { $0.path = "/3/device/\(f.goneToken)" })
        #expect(reply.body?["timestamp"] == .number("1794999000500"))
    }

    @Test func anExpiredTokenIs410ExpiredToken() {
        f.registry.register(EmulatorToken(hex: f.token, bundleID: f.bundle, environment: .sandbox, state: .expired))
        let reply = answer(f.push, f.deviceRequest())
        #expect(reply.status == 410 && reply.reason == "ExpiredToken")
    }

    @Test func theOrderOfChecksFollowsTheChecklist() {
        // Unknown token and no provider token: the token is judged first (§11).
        let reply = answer(
            f.push,
            f.deviceRequest {
                $0.path = "/3/device/\(String(repeating: "99", count: 80))"
                $0.set("authorization", nil)
            })
        #expect(reply.reason == "BadDeviceToken")
        // A bad apns-id wins over everything, and is not echoed.
        let badID = answer(
            f.push,
            f.deviceRequest {
                $0.set("apns-id", "x")
                $0.method = "GET"
            })
        #expect(badID.reason == "BadMessageId")
        #expect(badID.header("apns-id") != "x")
    }

    @Test func priority1IsAcceptedWhenConfigured() {
        var settings = f.settings
        settings.allowsPriority1ForLiveActivity = true
        let responder = APNsResponder(
            service: .push, environment: f.environment, settings: settings, registry: f.registry, journal: f.journal, faults: f.faults,
            devices: f.devices)
        #expect(answer(responder, f.deviceRequest { $0.set("apns-priority", "1") }).status == 200)
    }

    @Test func keysRestrictedToAnotherEnvironmentOrTopicAreRefused() {
        let production = TestSigningKey(keyID: "PRODKEY123", teamID: "TEAMID1234")
        f.registry.register(EmulatorKey(keyID: "PRODKEY123", teamID: "TEAMID1234", publicKey: production.publicKey, environments: [.production]))
        let wrongEnvironment = answer(
            f.push, f.deviceRequest { $0.set("authorization", "bearer " + production.signingKey.makeProviderToken(issuedAt: f.clock.now)) })
        #expect(wrongEnvironment.status == 403 && wrongEnvironment.reason == "BadEnvironmentKeyIdInToken")

        let topicKey = TestSigningKey(keyID: "TOPICKEY12", teamID: "TEAMID1234")
        f.registry.register(EmulatorKey(keyID: "TOPICKEY12", teamID: "TEAMID1234", publicKey: topicKey.publicKey, scope: .topics(["com.other.app"])))
        let otherTopic = answer(
            f.push, f.deviceRequest { $0.set("authorization", "bearer " + topicKey.signingKey.makeProviderToken(issuedAt: f.clock.now)) })
        #expect(otherTopic.status == 400 && otherTopic.reason == "TopicDisallowed")
    }

    @Test func theStreamLimitRisesAfterTheFirstAuthenticatedPush() {
        var connection = f.push.makeConnection(id: 1)
        #expect(connection.maxConcurrentStreams == 1)
        _ = answer(f.push, f.deviceRequest { $0.set("authorization", nil) }, connection: &connection)
        #expect(connection.maxConcurrentStreams == 1, "a rejected push does not raise it")
        _ = answer(f.push, f.deviceRequest(), connection: &connection)
        #expect(connection.maxConcurrentStreams == 1000)
    }

    @Test func everyRequestIsJournaledWithTheTokenElided() {
        _ = answer(f.push, f.deviceRequest())
        _ = answer(f.push, f.deviceRequest { $0.body = [] })
        let recorded = f.journal.requests
        #expect(recorded.count == 2)
        #expect(recorded[0].status == 200 && recorded[1].reason == .payloadEmpty)
        #expect(recorded[0].headers.first { $0.name == "authorization" }?.value == "bearer <provider token elided>")
        #expect(f.journal.counts == ["Success": 1, "PayloadEmpty": 1])
    }

    @Test func theJournalKeepsTheMostRecentRequestsOldestFirst() {
        let journal = EmulatorJournal(capacity: 3)
        let responder = APNsResponder(
            service: .push, environment: f.environment, settings: f.settings, registry: f.registry, journal: journal, faults: f.faults,
            devices: f.devices)
        var connection = responder.makeConnection(id: 1)
        for i in 0..<5 {
            _ = answer(responder, f.deviceRequest { $0.set("apns-collapse-id", "push-\(i)") }, connection: &connection)
        }
        let kept = journal.requests.map { $0.headers.first { $0.name == "apns-collapse-id" }?.value }
        #expect(kept == ["push-2", "push-3", "push-4"])
        #expect(journal.counts == ["Success": 5], "counts cover every request, not only the kept ones")
    }
}

@Suite struct BroadcastValidationTests {
    let f = Fixture()

    @Test func aValidBroadcastIsAcceptedWithRequestAndUniqueIDs() {
        let id = "123e4567-e89b-12d3-a456-426614174000"
        let reply = answer(f.push, f.broadcastRequest { $0.set("apns-request-id", id) })
        #expect(reply.status == 200 && reply.body == nil)
        #expect(reply.header("apns-request-id") == id)
        #expect(reply.header("apns-unique-id") != nil)
    }

    @Test(
        arguments: [
            (400, "MissingChannelId", { @Sendable (r: inout ReceivedRequest, _: Fixture) in r.set("apns-channel-id", nil) }),
            (400, "MissingPushType", { r, _ in r.set("apns-push-type", nil) }),
            (400, "InvalidPushType", { r, _ in r.set("apns-push-type", "alert") }),
            (400, "BadExpirationDate", { r, _ in r.set("apns-expiration", nil) }),
            (400, "BadExpirationDate", { r, _ in r.set("apns-expiration", "1795000000") }),
            (400, "BadPriority", { r, _ in r.set("apns-priority", nil) }),
            (400, "BadChannelId", { r, _ in r.set("apns-channel-id", "%%%") }),
            (400, "ChannelNotRegistered", { r, _ in r.set("apns-channel-id", "dW5rbm93bg==") }),
            (400, "TopicDisallowed", { r, f in r.path = "/4/broadcasts/apps/\(f.bundle).push-type.liveactivity" }),
            (404, "BadPath", { r, _ in r.path = "/4/broadcasts/apps/" }),
            (400, "PayloadEmpty", { r, _ in r.body = [] }),
            (413, "PayloadTooLarge", { r, _ in r.body = Array(repeating: UInt8(ascii: " "), count: 5121) }),
            (403, "MissingProviderToken", { r, _ in r.set("authorization", nil) }),
        ] as [(Int, String, @Sendable (inout ReceivedRequest, Fixture) -> Void)])
    func eachRuleHasItsReason(status: Int, reason: String, edit: @Sendable (inout ReceivedRequest, Fixture) -> Void) {
        let reply = answer(f.push, f.broadcastRequest { edit(&$0, f) })
        #expect(reply.status == status)
        #expect(reply.reason == reason)
        #expect(reply.header("apns-request-id") != nil)
    }

    @Test func aStoredChannelTakesAnExpirationAnd5120Bytes() {
        let reply = answer(
            f.push,
            f.broadcastRequest {
                $0.set("apns-channel-id", f.policy1Channel)
                $0.set("apns-expiration", "1795003600")
                $0.set("apns-priority", "1")
                $0.body = Array(repeating: UInt8(ascii: " "), count: 5120)
            })
        #expect(reply.status == 200)
    }

    @Test func withoutTheCapabilityBroadcastsAreRefused() {
        f.registry.setBroadcastEnabled(for: [])
        #expect(answer(f.push, f.broadcastRequest()).reason == "FeatureNotEnabled")
    }
}

@Suite struct ChannelManagementTests {
    let f = Fixture()

    @Test func createReadListDelete() throws {
        var connection = f.management.makeConnection(id: 1)
        let created = answer(
            f.management, f.channelRequest("POST", body: #"{"message-storage-policy": 1, "push-type": "LiveActivity"}"#), connection: &connection)
        #expect(created.status == 201 && created.body == nil)
        let id = try #require(created.header("apns-channel-id"))
        #expect(Data(base64Encoded: id) != nil)
        #expect(created.header("apns-request-id") != nil)

        let read = answer(f.management, f.channelRequest("GET", channelID: id), connection: &connection)
        #expect(read.status == 200)
        #expect(read.body == .object([("message-storage-policy", .number("1")), ("push-type", .string("LiveActivity"))]))

        let list = answer(f.management, f.channelRequest("GET", "all-channels"), connection: &connection)
        guard case .array(let ids) = list.body?["channels"] else {
            Issue.record("all-channels answers {\"channels\": [...]}")
            return
        }
        #expect(Set(ids.compactMap(\.stringValue)) == [id, f.policy0Channel, f.policy1Channel])

        let deleted = answer(f.management, f.channelRequest("DELETE", channelID: id), connection: &connection)
        #expect(deleted.status == 204 && deleted.body == nil)
        #expect(answer(f.management, f.channelRequest("GET", channelID: id), connection: &connection).reason == "ChannelNotRegistered")
        // A deleted id is never issued again.
        for _ in 0..<50 {
            let again = answer(
                f.management, f.channelRequest("POST", body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#), connection: &connection)
            #expect(again.header("apns-channel-id") != id)
        }
    }

    @Test(
        arguments: [
            ("POST", "channels", nil, "", 400, "PayloadEmpty"),
            ("POST", "channels", nil, "{", 400, "BadRequestPayload"),
            ("POST", "channels", nil, #"{"message-storage-policy":1,"push-type":"LiveActivity","name":"x"}"#, 400, "BadRequestParams"),
            ("POST", "channels", nil, #"{"message-storage-policy":2,"push-type":"LiveActivity"}"#, 400, "BadRequestParams"),
            ("POST", "channels", nil, #"{"message-storage-policy":1,"push-type":"Alert"}"#, 400, "InvalidPushType"),
            ("GET", "channels", nil, "", 400, "MissingChannelId"),
            ("GET", "channels", "***", "", 400, "BadChannelId"),
            ("DELETE", "channels", "dW5rbm93bg==", "", 400, "ChannelNotRegistered"),
            ("PUT", "channels", nil, "", 405, "MethodNotAllowed"),
            ("POST", "all-channels", nil, "", 405, "MethodNotAllowed"),
            ("GET", "channel", nil, "", 404, "BadPath"),
        ] as [(String, String, String?, String, Int, String)])
    func eachRuleHasItsReason(method: String, suffix: String, channelID: String?, body: String, status: Int, reason: String) {
        let reply = answer(f.management, f.channelRequest(method, suffix, channelID: channelID, body: body))
        #expect(reply.status == status)
        #expect(reply.reason == reason)
    }

    @Test func topicKeysAndTheCapabilityAreChecked() {
        let topicKey = TestSigningKey(keyID: "TOPICKEY12", teamID: "TEAMID1234")
        f.registry.register(EmulatorKey(keyID: "TOPICKEY12", teamID: "TEAMID1234", publicKey: topicKey.publicKey, scope: .topics(["com.other.app"])))
        let mismatch = answer(
            f.management,
            f.channelRequest("GET", "all-channels") {
                $0.set("authorization", "bearer " + topicKey.signingKey.makeProviderToken(issuedAt: f.clock.now))
            })
        #expect(mismatch.status == 403 && mismatch.reason == "TopicMismatch")
        f.registry.setBroadcastEnabled(for: ["com.other.app"])
        #expect(answer(f.management, f.channelRequest("GET", "all-channels")).reason == "FeatureNotEnabled")
    }

    @Test func theChannelLimitIs10000PerAppAndEnvironment() {
        let registry = EmulatorRegistry()
        #expect(EmulatorRegistry.channelLimit == 10_000)
        for _ in 0..<EmulatorRegistry.channelLimit {
            #expect(registry.createChannel(bundleID: "com.a", environment: .sandbox, storagePolicy: 0) != nil)
        }
        #expect(registry.createChannel(bundleID: "com.a", environment: .sandbox, storagePolicy: 0) == nil)
        #expect(registry.createChannel(bundleID: "com.a", environment: .production, storagePolicy: 0) != nil)
        #expect(registry.createChannel(bundleID: "com.b", environment: .sandbox, storagePolicy: 0) != nil)
    }

    @Test func creatingChannel10001IsRefusedWithCannotCreateChannelConfig() {
        let existing = f.registry.channels(of: f.bundle, in: .sandbox).count
        for _ in existing..<EmulatorRegistry.channelLimit {
            _ = f.registry.createChannel(bundleID: f.bundle, environment: .sandbox, storagePolicy: 1)
        }
        let reply = answer(f.management, f.channelRequest("POST", body: #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#))
        #expect(reply.status == 400 && reply.reason == "CannotCreateChannelConfig")
    }
}

/// Widget and control pushes (iOS 26): each token serves its own push type and topic suffix, with
/// Apple's one body, at priority 10 or 5, and never as a broadcast.
@Suite struct ReloadPushValidationTests {
    let f = Fixture()
    let widgetToken = String(repeating: "5a", count: 32)
    let controlToken = String(repeating: "c0", count: 32)

    init() {
        f.registry.register(EmulatorToken(hex: widgetToken, bundleID: f.bundle, environment: .sandbox, pushType: .widgets))
        f.registry.register(EmulatorToken(hex: controlToken, bundleID: f.bundle, environment: .sandbox, pushType: .controls))
    }

    func reload(_ type: ReloadPushType, _ edit: (inout ReceivedRequest) -> Void = { _ in }) -> ReceivedRequest {
        f.deviceRequest { request in
            request.path = "/3/device/\(type == .widgets ? widgetToken : controlToken)"
            request.set("apns-push-type", type.rawValue)
            request.set("apns-topic", "\(f.bundle).push-type.\(type.rawValue)")
            request.body = ReloadPushType.body
            edit(&request)
        }
    }

    @Test(arguments: ReloadPushType.allCases)
    func aReloadWithItsTokenTypeAndTopicIsAccepted(_ type: ReloadPushType) {
        #expect(answer(f.push, reload(type)).status == 200)
        #expect(answer(f.push, reload(type) { $0.set("apns-priority", "5") }).status == 200)
    }

    @Test(arguments: ReloadPushType.allCases)
    func eachMismatchIsRefusedWithAPNsReason(_ type: ReloadPushType) {
        let other: ReloadPushType = type == .widgets ? .controls : .widgets
        // The suffix of the other type, or of Live Activities, or none.
        for topic in ["\(f.bundle).push-type.\(other.rawValue)", "\(f.bundle).push-type.liveactivity", f.bundle] {
            #expect(answer(f.push, reload(type) { $0.set("apns-topic", topic) }).reason == "DeviceTokenNotForTopic", "\(topic)")
        }
        // The push type of another token's.
        #expect(answer(f.push, reload(type) { $0.set("apns-push-type", other.rawValue) }).reason == "DeviceTokenNotForTopic")
        // An activity's token with a reload, and the reload's token with a Live Activity push.
        #expect(answer(f.push, reload(type) { $0.path = "/3/device/\(f.token)" }).reason == "DeviceTokenNotForTopic")
        #expect(
            answer(f.push, f.deviceRequest { $0.path = "/3/device/\(type == .widgets ? widgetToken : controlToken)" }).reason
                == "DeviceTokenNotForTopic")
        #expect(answer(f.push, reload(type) { $0.set("apns-priority", "1") }).reason == "BadPriority")
        #expect(answer(f.push, reload(type) { $0.body = [] }).reason == "PayloadEmpty")
        #expect(answer(f.push, reload(type) { $0.path = "/3/device/\(String(repeating: "99", count: 32))" }).reason == "BadDeviceToken")
    }

    @Test(arguments: ReloadPushType.allCases)
    func thereIsNoReloadBroadcast(_ type: ReloadPushType) {
        let reply = answer(f.push, f.broadcastRequest { $0.set("apns-push-type", type.rawValue) })
        #expect(reply.status == 400 && reply.reason == "InvalidPushType")
    }

    @Test func aStateFileFromBeforeWidgetTokensReadsAsActivityTokens() throws {
        let old = #"{"hex":"abcd","bundleID":"com.example.app","environment":"sandbox","state":{"active":{}}}"#
        let token = try JSONDecoder().decode(EmulatorToken.self, from: Data(old.utf8))
        #expect(token.pushType == .liveActivity)
        let widget = EmulatorToken(hex: "ef01", bundleID: "com.example.app", environment: .sandbox, pushType: .widgets)
        #expect(try JSONDecoder().decode(EmulatorToken.self, from: JSONEncoder().encode(widget)) == widget)
    }
}
