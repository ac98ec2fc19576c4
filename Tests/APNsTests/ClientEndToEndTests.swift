import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import NIOHTTP2
import Testing

/// The client against a real HTTP/2 + TLS server on loopback.
@Suite struct ClientEndToEndTests {
    let bundle = try! BundleID("com.example.apple-samplecode.Emoji-Rangers")
    let payload = try! LiveActivityPayload.update(
        content: ActivityContent(state: ["eventDescription": "Power Panda found a sword!"], staleDate: nil),
        timestamp: Date(timeIntervalSince1970: 1_795_000_000))

    func withClient(
        clock: ManualClock = ManualClock(), key: TestSigningKey = TestSigningKey(), timeout: Duration = .seconds(30),
        maxConcurrentStreams: Int = 1000, connections: Int = 1, patience: Duration = .seconds(1),
        _ body: @escaping @Sendable (APNsClient, ScriptedAPNsServer) async throws -> Void
    ) async throws {
        try await withDeadline(.seconds(60)) {
            let server = try await ScriptedAPNsServer.start(maxConcurrentStreams: maxConcurrentStreams)
            let configuration = APNsClient.Configuration(
                environment: server.environment, signingKey: key.signingKey, connectionsPerHost: connections...connections,
                requestTimeout: timeout, connectionPatience: patience, now: clock.function)
            do {
                try await withAPNsClient(configuration: configuration) { try await body($0, server) }
                await server.shutdown()
            } catch {
                await server.shutdown()
                throw error
            }
        }
    }

    @Test func anUpdateArrivesExactlyAsBuilt() async throws {
        let key = TestSigningKey()
        let clock = ManualClock()
        try await withClient(clock: clock, key: key) { [payload, bundle] client, server in
            let apnsID = APNsMessageID()
            let accepted = try await client.send(payload, to: liveActivityToken(), topic: bundle, options: PushOptions(apnsID: apnsID))
            #expect(accepted.status == 200)
            #expect(accepted.apnsID == apnsID.description)
            #expect(accepted.uniqueID != nil)

            let request = try #require(server.received.first)
            #expect(request.method == "POST")
            #expect(request.path == "/3/device/\(liveActivityToken().hex)")
            #expect(request.authority == "127.0.0.1:\(server.server.port)")
            #expect(request.header("apns-push-type") == "liveactivity")
            #expect(request.header("apns-topic") == "com.example.apple-samplecode.Emoji-Rangers.push-type.liveactivity")
            #expect(request.header("apns-priority") == "10")
            #expect(request.body == payload.json.serialized)
            let authorization = try #require(request.header("authorization"))
            #expect(authorization.hasPrefix("bearer "))
            let claims = try #require(verifyProviderToken(String(authorization.dropFirst(7)), with: key.publicKey)).claims
            #expect(claims["iat"] == .integer(unixSeconds(clock.now)))
        }
    }

    @Test func manyConcurrentPushesShareOneConnectionAndOneToken() async throws {
        try await withClient(maxConcurrentStreams: 50) { [payload, bundle] client, server in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for i in 0..<300 {
                    group.addTask {
                        try await client.send(payload, to: liveActivityToken(UInt8(i % 256)), topic: bundle)
                    }
                }
                try await group.waitForAll()
            }
            let received = server.received
            #expect(received.count == 300)
            #expect(Set(received.map(\.connectionID)).count == 1)
            #expect(Set(received.compactMap { $0.header("authorization") }).count == 1)
        }
    }

    /// HTTP/2 flow control: with frames handled directly, each side must open the connection
    /// window itself, or the peer stalls after 65,535 bytes. 250 kB of bodies up, 100 kB of error bodies down.
    @Test func oneConnectionCarriesMoreThanTheInitialFlowControlWindow() async throws {
        try await withClient { [bundle] client, server in
            let large = try LiveActivityPayload.update(
                content: ActivityContent(state: ["text": String(repeating: "x", count: 3_900)], staleDate: nil), timestamp: Date())
            for _ in 0..<64 { try await client.send(large, to: liveActivityToken(), topic: bundle) }
            let longBody = JSONValue.object([("reason", .string("BadTopic")), ("detail", .string(String(repeating: "y", count: 1_000)))])
            server.setFallback { _ in .respond(status: 400, headers: [("content-type", "application/json")], body: longBody.serialized) }
            for _ in 0..<100 {
                let error = await #expect(throws: APNsError.self) { try await client.send(large, to: liveActivityToken(), topic: bundle) }
                #expect(error?.reason == APNsReason("BadTopic"))
            }
            #expect(Set(server.received.map(\.connectionID)).count == 1)
        }
    }

    @Test func severalConnectionsAreUsedInTurnWithOneProviderToken() async throws {
        try await withClient(connections: 3) { [payload, bundle] client, server in
            for _ in 0..<6 { try await client.send(payload, to: liveActivityToken(), topic: bundle) }
            #expect(Set(server.received.map(\.connectionID)).count == 3)
            // One provider token for all of them.
            #expect(Set(server.received.compactMap { $0.header("authorization") }).count == 1)
        }
    }

    @Test func aRejectionCarriesReasonTimestampAndAdvice() async throws {
        try await withClient { [payload, bundle] client, server in
            server.enqueue(ScriptedAPNsServer.rejection(410, "Unregistered", timestampMilliseconds: 1_794_999_000_000))
            let error = await #expect(throws: APNsError.self) {
                try await client.send(payload, to: liveActivityToken(), topic: bundle)
            }
            #expect(error?.status == 410)
            #expect(error?.reason == APNsReason("Unregistered"))
            #expect(error?.timestamp == Date(timeIntervalSince1970: 1_794_999_000))
            #expect(error?.advice == .dropToken)
        }
    }

    @Test func anExpiredProviderTokenIsRefreshedOnceAndThePushRetried() async throws {
        let clock = ManualClock()
        try await withClient(clock: clock) { [payload, bundle] client, server in
            try await client.send(payload, to: liveActivityToken(), topic: bundle)
            clock.advance(by: 25 * 60)
            server.enqueue(ScriptedAPNsServer.rejection(403, "ExpiredProviderToken"))
            let accepted = try await client.send(payload, to: liveActivityToken(), topic: bundle)
            #expect(accepted.status == 200)
            let tokens = server.received.compactMap { $0.header("authorization") }
            #expect(tokens.count == 3)
            #expect(tokens[0] == tokens[1], "the rejected request carried the cached token")
            #expect(tokens[1] != tokens[2], "the retry carried a new token")
        }
    }

    @Test func aTokenYoungerThan20MinutesIsNotReplacedEvenIfAPNsCallsItExpired() async throws {
        let clock = ManualClock()
        try await withClient(clock: clock) { [payload, bundle] client, server in
            try await client.send(payload, to: liveActivityToken(), topic: bundle)
            clock.advance(by: 5 * 60)
            server.enqueue(ScriptedAPNsServer.rejection(403, "ExpiredProviderToken"))
            let error = await #expect(throws: APNsError.self) { try await client.send(payload, to: liveActivityToken(), topic: bundle) }
            #expect(error?.reason == APNsReason("ExpiredProviderToken"))
            #expect(server.received.count == 2)
        }
    }

    @Test func theTokenIsRenewedAfter50Minutes() async throws {
        let clock = ManualClock()
        try await withClient(clock: clock) { [payload, bundle] client, server in
            try await client.send(payload, to: liveActivityToken(), topic: bundle)
            clock.advance(by: 49 * 60)
            try await client.send(payload, to: liveActivityToken(), topic: bundle)
            clock.advance(by: 60)
            try await client.send(payload, to: liveActivityToken(), topic: bundle)
            let tokens = server.received.compactMap { $0.header("authorization") }
            #expect(tokens[0] == tokens[1] && tokens[1] != tokens[2])
        }
    }

    @Test func noAnswerEndsAtTheDeadline() async throws {
        try await withClient { [payload, bundle] client, server in
            // Connect first, so that the short deadline below is spent on the stream alone.
            try await client.send(payload, to: liveActivityToken(), topic: bundle)
            let unanswered = APNsMessageID()
            server.setFallback { request in
                request.header("apns-id") == unanswered.description ? .noAnswer : AcceptAllResponder().answer(request)
            }
            let error = await #expect(throws: APNsTransportError.self) {
                try await client.send(
                    payload, to: liveActivityToken(), topic: bundle, options: PushOptions(apnsID: unanswered), timeout: .milliseconds(300))
            }
            #expect(error?.code == .deadlineExceeded)
            // The connection is still good for the next push.
            let next = try await client.send(payload, to: liveActivityToken(), topic: bundle)
            #expect(next.status == 200)
        }
    }

    /// A frozen server holds its PING acknowledgements too (`OutputFreeze`), as a dead path does:
    /// the push fails once a PING goes unanswered, before its deadline or the thaw, and the next
    /// push goes on a new connection. A server that only leaves a push unanswered still answers
    /// PINGs: that push waits for its deadline on a connection kept. The patience is at least 10
    /// of the connection's fastest round trips, which a loaded machine (the whole suite at once)
    /// stretches: 20 pushes first make the fastest one a quick one. It is 2 s, not less, because
    /// every PING of the kept connection must come back within it, and the loaded CI machine has
    /// stretched a round trip on loopback to 290 ms.
    @Test func aConnectionThatAnswersNothingNotEvenAPingIsTakenForDead() async throws {
        try await withClient(patience: .seconds(2)) { [payload, bundle] client, server in
            for index in 0..<20 { try await client.send(payload, to: liveActivityToken(UInt8(index)), topic: bundle) }
            server.enqueue(.frozen(.seconds(60), .respond(status: 200, headers: [], body: nil)))
            let started = ContinuousClock.now
            let error = await #expect(throws: APNsTransportError.self) {
                try await client.send(payload, to: liveActivityToken(1), topic: bundle, timeout: .seconds(30))
            }
            #expect(error?.code == .connectionClosed && error?.message.contains("PING") == true, "\(String(describing: error))")
            #expect(ContinuousClock.now - started < .seconds(30), "before its deadline: \(ContinuousClock.now - started)")
            for index in 0..<20 { try await client.send(payload, to: liveActivityToken(UInt8(index)), topic: bundle) }
            #expect(Set(server.received.map(\.connectionID)).count == 2, "the next pushes on a new connection")

            server.setFallback { _ in .noAnswer }
            let unanswered = await #expect(throws: APNsTransportError.self) {
                try await client.send(payload, to: liveActivityToken(3), topic: bundle, timeout: .seconds(5))
            }
            #expect(unanswered?.code == .deadlineExceeded, "PINGs answered: alive, however slow the push")
            #expect(Set(server.received.map(\.connectionID)).count == 2)
        }
    }

    @Test func aShorterDeadlineWrittenAfterALongerOneEndsFirst() async throws {
        // A patience of half the long deadline: the silent connection is PINGed twice, not ten
        // times, and a slow acknowledgement on a loaded machine does not end it early.
        try await withClient(patience: .seconds(5)) { [payload, bundle] client, server in
            try await client.send(payload, to: liveActivityToken(), topic: bundle)
            server.setFallback { _ in .noAnswer }
            // The connection's one timer is due at the first deadline; the second, earlier one
            // must bring it forward, and the first must still end after the second has. Without
            // that, the short one would end with the long one, or with the 30 s of the first push.
            let long = Duration.seconds(10)
            let started = ContinuousClock.now
            async let longEnded: ContinuousClock.Instant = {
                await #expect(throws: APNsTransportError.self) {
                    try await client.send(payload, to: liveActivityToken(1), topic: bundle, timeout: long)
                }
                return ContinuousClock.now
            }()
            try await eventually { server.received.count == 2 }
            let short = await #expect(throws: APNsTransportError.self) {
                try await client.send(payload, to: liveActivityToken(2), topic: bundle, timeout: .milliseconds(200))
            }
            let shortEnded = ContinuousClock.now
            #expect(short?.code == .deadlineExceeded)
            #expect(shortEnded < started + long, "the short deadline waited for the long one: \(shortEnded - started)")
            let longEnd = await longEnded
            #expect(longEnd - started >= long, "\(longEnd - started)")
        }
    }

    @Test func aMalformedRequestIsRefusedBeforeItIsSent() async throws {
        try await withClient { client, server in
            let body = Array(#"{"aps":{}}"#.utf8)
            let cases: [(APNsRequest, String)] = [
                (APNsRequest(service: .push, method: .post, path: "/3/device/ab", headers: [.init("Apns-Topic", "x")], body: body), "Apns-Topic"),
                (APNsRequest(service: .push, method: .post, path: "/3/device/ab", headers: [.init(":status", "200")], body: body), ":status"),
                (
                    APNsRequest(service: .push, method: .post, path: "/3/device/ab", headers: [.init("apns-topic", "x\r\ny: z")], body: body),
                    "apns-topic"
                ),
                (APNsRequest(service: .push, method: .post, path: "/3/device/ab", headers: [.init("apns-topic", " x")], body: body), "apns-topic"),
                (APNsRequest(service: .push, method: .post, path: "/3/device/a b", headers: [], body: body), ":path"),
                (APNsRequest(service: .push, method: .post, path: "3/device/ab", headers: [], body: body), ":path"),
                (APNsRequest(service: .push, method: .post, path: "/3/device/ab", headers: [.init("connection", "close")], body: body), "connection"),
                (APNsRequest(service: .push, method: .post, path: "/3/device/ab", headers: [.init("te", "gzip")], body: body), "te"),
            ]
            for (request, field) in cases {
                let error = await #expect(throws: LiveActivityValidationError.self) { try await client.execute(request) }
                #expect(error?.field == field)
            }
            #expect(server.received.isEmpty)
            let wellFormed = APNsRequest(
                service: .push, method: .post, path: "/3/device/ab", headers: [.init("x-custom_header.1", "a b"), .init("te", "trailers")], body: body
            )
            #expect(wellFormed.malformation == nil)
        }
    }

    @Test func aResetStreamIsReported() async throws {
        try await withClient { [payload, bundle] client, server in
            server.enqueue(.resetStream(.refusedStream))
            let error = await #expect(throws: APNsTransportError.self) { try await client.send(payload, to: liveActivityToken(), topic: bundle) }
            #expect(error?.code == .streamReset)
        }
    }

    @Test func anUntrustedServerFailsToConnect() async throws {
        try await withDeadline(.seconds(60)) {
            let server = try await ScriptedAPNsServer.start()
            let otherCA = TestFiles.path("other-ca", pathExtension: "pem")
            try EmulatorCertificates.generate().writeCertificateAuthority(to: otherCA)
            let environment = APNsHosts.custom(
                host: "127.0.0.1", port: server.server.port, channelManagementPort: server.server.port, caFile: otherCA)
            let configuration = APNsClient.Configuration(environment: environment, signingKey: TestSigningKey().signingKey)
            let error = await #expect(throws: APNsTransportError.self) {
                try await withAPNsClient(configuration: configuration) { [payload, bundle] client in
                    try await client.send(payload, to: liveActivityToken(), topic: bundle)
                }
            }
            #expect(error?.code == .connectFailed)
            #expect(server.received.isEmpty)
            await server.shutdown()
            try? FileManager.default.removeItem(atPath: otherCA)
        }
    }

    @Test func broadcastAndChannelManagement() async throws {
        try await withClient { [bundle] client, server in
            server.setFallback { request in
                switch (request.method, request.path) {
                case ("POST", "/1/apps/com.example.apple-samplecode.Emoji-Rangers/channels"):
                    return .respond(
                        status: 201, headers: [("apns-request-id", UUID().uuidString.lowercased()), ("apns-channel-id", "dHN0LXNyY2gtY2hubA==")],
                        body: nil)
                case ("GET", "/1/apps/com.example.apple-samplecode.Emoji-Rangers/channels"):
                    return .respond(
                        status: 200, headers: [("content-type", "application/json")],
                        body: Array(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8))
                case ("GET", "/1/apps/com.example.apple-samplecode.Emoji-Rangers/all-channels"):
                    return .respond(status: 200, headers: [], body: Array(#"{"channels":["dHN0LXNyY2gtY2hubA==","YWJj"]}"#.utf8))
                case ("DELETE", _):
                    return .respond(status: 204, headers: [], body: nil)
                default:
                    return AcceptAllResponder().answer(request)
                }
            }
            let id = try await client.createChannel(bundleID: bundle, storagePolicy: .mostRecentMessageStored)
            #expect(id == "dHN0LXNyY2gtY2hubA==")
            let configuration = try await client.readChannel(id, bundleID: bundle)
            #expect(configuration.storagePolicy == .mostRecentMessageStored)
            #expect(configuration.pushType == "LiveActivity")
            let ids = try await client.listChannels(bundleID: bundle)
            #expect(ids == ["dHN0LXNyY2gtY2hubA==", "YWJj"])
            let update = try LiveActivityPayload.update(content: ActivityContent(state: ["home": 1], staleDate: nil), timestamp: Date())
            let requestID = APNsMessageID()
            let accepted = try await client.broadcast(
                update, channelID: id, bundleID: bundle,
                options: BroadcastOptions(priority: .powerConsiderate, expiration: .immediately, requestID: requestID))
            #expect(accepted.apnsID == requestID.description)
            try await client.deleteChannel(id, bundleID: bundle)

            let received = server.received
            #expect(received.map(\.method) == ["POST", "GET", "GET", "POST", "DELETE"])
            #expect(received[0].body == Array(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8))
            #expect(received[3].header("apns-channel-id") == id)
            #expect(received[3].header("apns-expiration") == "0")
            #expect(received[4].header("apns-channel-id") == id)
        }
    }
}
