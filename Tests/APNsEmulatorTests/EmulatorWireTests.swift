import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelayTesting
import Testing

/// The emulator on loopback, port 0, spoken to by our client and by curl.
@Suite struct EmulatorWireTests {
    let bundle = "com.example.apple-samplecode.Emoji-Rangers"
    let token = String(repeating: "a1", count: 80)

    func withEmulator(
        clock: ManualClock = ManualClock(Date()),
        _ body: @escaping @Sendable (APNsEmulator, TestSigningKey, String) async throws -> Void
    ) async throws {
        // Generous: these test the wire, not latency, and share two cores with every other suite.
        try await withDeadline(.seconds(60)) {
            var configuration = APNsEmulator.Configuration()
            configuration.now = clock.function
            let emulator = try await APNsEmulator.start(configuration)
            let key = TestSigningKey()
            emulator.registry.register(EmulatorKey(keyID: key.signingKey.keyID, teamID: key.signingKey.teamID, publicKey: key.publicKey))
            emulator.registry.register(EmulatorToken(hex: token, bundleID: bundle, environment: .sandbox))
            let caFile = TestFiles.path("emulator-ca", pathExtension: "pem")
            try emulator.certificates.writeCertificateAuthority(to: caFile)
            do {
                try await body(emulator, key, caFile)
            } catch {
                await emulator.shutdown()
                try? FileManager.default.removeItem(atPath: caFile)
                throw error
            }
            await emulator.shutdown()
            try? FileManager.default.removeItem(atPath: caFile)
        }
    }

    @Test func ourClientPushesThroughTheStreamLimitOfOne() async throws {
        try await withEmulator { [bundle, token] emulator, key, caFile in
            let configuration = APNsClient.Configuration(
                environment: emulator.clientEnvironment(.sandbox, caFile: caFile), signingKey: key.signingKey, requestTimeout: .seconds(30))
            try await withAPNsClient(configuration: configuration) { client in
                let payload = try LiveActivityPayload.update(content: ActivityContent(state: ["level": 0.941], staleDate: nil), timestamp: Date())
                // 200 at once on a connection that starts with one stream: NIO queues the rest
                // until the emulator raises the limit after the first authenticated push.
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for _ in 0..<200 {
                        group.addTask { try await client.send(payload, to: DeviceToken(token), topic: BundleID(bundle)) }
                    }
                    try await group.waitForAll()
                }
                let unknown = await #expect(throws: APNsError.self) {
                    try await client.send(payload, to: DeviceToken(String(repeating: "99", count: 80)), topic: BundleID(bundle))
                }
                #expect(unknown?.reason == .badDeviceToken)
            }
            #expect(emulator.journal.counts == ["Success": 200, "BadDeviceToken": 1])
            #expect(Set(emulator.journal.requests.map(\.connectionID)).count == 1)
        }
    }

    @Test func channelsOverTheSecondPort() async throws {
        try await withEmulator { [bundle] emulator, key, caFile in
            #expect(emulator.ports(.sandbox).push != emulator.ports(.sandbox).channelManagement)
            let configuration = APNsClient.Configuration(
                environment: emulator.clientEnvironment(.sandbox, caFile: caFile), signingKey: key.signingKey)
            try await withAPNsClient(configuration: configuration) { client in
                let bundleID = try BundleID(bundle)
                let id = try await client.createChannel(bundleID: bundleID, storagePolicy: .noMessageStored)
                #expect(try await client.listChannels(bundleID: bundleID) == [id])
                let payload = try LiveActivityPayload.update(content: ActivityContent(state: ["home": 1], staleDate: nil), timestamp: Date())
                try await client.broadcast(
                    payload, channelID: id, bundleID: bundleID, options: BroadcastOptions(priority: .powerConsiderate, expiration: .immediately))
                try await client.deleteChannel(id, bundleID: bundleID)
                let gone = await #expect(throws: APNsError.self) { try await client.readChannel(id, bundleID: bundleID) }
                #expect(gone?.reason == .channelNotRegistered)
            }
        }
    }

    /// Runs `body` with our client talking to the emulator, and a valid update payload. Requests
    /// may take 30 s: in the full parallel run on two cores, connecting has taken more than 10.
    func withClient(
        _ body: @escaping @Sendable (APNsEmulator, APNsClient, LiveActivityPayload) async throws -> Void
    ) async throws {
        try await withEmulator { emulator, key, caFile in
            let configuration = APNsClient.Configuration(
                environment: emulator.clientEnvironment(.sandbox, caFile: caFile), signingKey: key.signingKey, requestTimeout: .seconds(30))
            try await withAPNsClient(configuration: configuration) { client in
                let payload = try LiveActivityPayload.update(content: ActivityContent(state: ["level": 1], staleDate: nil), timestamp: Date())
                try await body(emulator, client, payload)
            }
        }
    }

    @Test func aPushLeftUnprocessedByGoAwayIsRetriedOnANewConnection() async throws {
        try await withClient { [bundle, token] emulator, client, payload in
            emulator.faults.add(EmulatorFault(.goAway(reason: .shutdown), skip: 2))
            for _ in 0..<3 { try await client.send(payload, to: DeviceToken(token), topic: BundleID(bundle)) }
            let recorded = emulator.journal.requests
            #expect(recorded.map(\.outcome) == ["Success", "Success", "Unanswered", "Success"])
            #expect(recorded[2].connectionID == recorded[0].connectionID)
            #expect(recorded[3].connectionID != recorded[0].connectionID, "the retry went over a new connection")
        }
    }

    @Test func aShutdownIsAnsweredAndTheNextPushUsesANewConnection() async throws {
        try await withClient { [bundle, token] emulator, client, payload in
            emulator.faults.add(EmulatorFault(.shutdown))
            let shutdown = await #expect(throws: APNsError.self) {
                try await client.send(payload, to: DeviceToken(token), topic: BundleID(bundle))
            }
            #expect(shutdown?.status == 503 && shutdown?.reason == .shutdown)
            #expect(shutdown?.reason.advice(status: 503) == .retryWithBackoff)
            try await client.send(payload, to: DeviceToken(token), topic: BundleID(bundle))
            let recorded = emulator.journal.requests
            #expect(recorded.map(\.outcome) == ["Shutdown", "Success"])
            #expect(recorded[1].connectionID != recorded[0].connectionID)
        }
    }

    @Test func aDroppedConnectionFailsThePushInFlight() async throws {
        try await withClient { [bundle, token] emulator, client, payload in
            emulator.faults.add(EmulatorFault(.resetConnection))
            let dropped = await #expect(throws: APNsTransportError.self) {
                try await client.send(payload, to: DeviceToken(token), topic: BundleID(bundle))
            }
            #expect(dropped?.code == .connectionClosed, "it may have been delivered: not retried by itself")
            try await client.send(payload, to: DeviceToken(token), topic: BundleID(bundle))
            #expect(emulator.journal.counts == ["Unanswered": 1, "Success": 1])
        }
    }

    @Test func aSlowAnswerRunsIntoTheClientsDeadline() async throws {
        try await withClient { [bundle, token] emulator, client, payload in
            try await client.send(payload, to: DeviceToken(token), topic: BundleID(bundle))  // connected, with time to spare
            emulator.faults.add(EmulatorFault(.delay(.seconds(60))))
            let late = await #expect(throws: APNsTransportError.self) {
                try await client.send(payload, to: DeviceToken(token), topic: BundleID(bundle), timeout: .milliseconds(300))
            }
            #expect(late?.code == .deadlineExceeded)
        }
    }

    /// The request of the WWDC23 talk, as its curl command sends it (four headers, the JSON body,
    /// `/3/device/$TOKEN`), with the emulator's CA.
    @Test func curlWithTheTalksRequestShape() async throws {
        try await withEmulator { [bundle, token] emulator, key, caFile in
            let authentication = key.signingKey.makeProviderToken(issuedAt: Date())
            let body =
                #"{ "aps": { "timestamp": \#(Int(Date().timeIntervalSince1970)), "event": "update", "content-state": { "currentHealthLevel": 0.941, "eventDescription": "Power Panda found a sword!" } } }"#
            let result = try await run(
                "/usr/bin/env",
                [
                    "curl", "--silent", "--show-error", "--include", "--cacert", caFile,
                    "--header", "apns-topic: \(bundle).push-type.liveactivity",
                    "--header", "apns-push-type: liveactivity",
                    "--header", "apns-priority: 10",
                    "--header", "authorization: bearer \(authentication)",
                    "--data", body,
                    "--http2", "https://localhost:\(emulator.ports(.sandbox).push)/3/device/\(token)",
                ])
            #expect(result.status == 0, "\(result.output)")
            #expect(result.output.hasPrefix("HTTP/2 200"), "\(result.output)")
            #expect(result.output.lowercased().contains("apns-id: "))
            let recorded = try #require(emulator.journal.requests.last)
            #expect(recorded.status == 200)
            #expect(recorded.body == Array(body.utf8))

            let withoutToken = try await run(
                "/usr/bin/env",
                [
                    "curl", "--silent", "--cacert", caFile, "--header", "apns-topic: \(bundle).push-type.liveactivity",
                    "--header", "apns-push-type: liveactivity", "--data", body,
                    "--http2", "https://127.0.0.1:\(emulator.ports(.sandbox).push)/3/device/\(token)",
                ])
            #expect(withoutToken.output == #"{"reason":"MissingProviderToken"}"#)

            // A TLS client that offers no ALPN and speaks HTTP/2 anyway (as a widely used Python client does).
            let noALPN = try await run(
                "/usr/bin/env",
                [
                    "curl", "--silent", "--verbose", "--no-alpn", "--http2-prior-knowledge", "--cacert", caFile,
                    "--header", "apns-topic: \(bundle).push-type.liveactivity", "--header", "apns-push-type: liveactivity",
                    "--header", "authorization: bearer \(authentication)", "--data", body,
                    "https://127.0.0.1:\(emulator.ports(.sandbox).push)/3/device/\(token)",
                ])
            #expect(!noALPN.output.contains("ALPN: offers"), "\(noALPN.output)")
            #expect(noALPN.output.contains("< HTTP/2 200"), "\(noALPN.output)")
        }
    }
}

func run(_ executable: String, _ arguments: [String]) async throws -> (status: Int32, output: String) {
    let child = try ChildProcess.start(executable, arguments, environment: ProcessInfo.processInfo.environment, errors: .sameAsOutput)
    let output = try await Task { try child.output?.readToEnd() ?? Data() }.value
    return (await child.exitCode(), String(decoding: output, as: UTF8.self))
}
