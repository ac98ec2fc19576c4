import APNs
import APNsEmulator
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import Testing

/// APNs at a distance: what `--latency` reads, and answers that come that much later, each
/// stream on its own, per environment, changed through the control API.
@Suite struct LatencyTests {
    @Test(arguments: [("100", 100.0, 100.0), ("40-120", 40, 120), ("0", 0, 0), ("2.5", 2.5, 2.5), (" 10 - 20 ", 10, 20)])
    func aLatencyIsMillisecondsOrARangeOfThem(text: String, lower: Double, upper: Double) throws {
        let latency = try APNsLatency(parsing: text)
        #expect(latency.lower == .microseconds(Int64(lower * 1000)) && latency.upper == .microseconds(Int64(upper * 1000)))
        #expect(try APNsLatency(parsing: latency.text) == latency, "its text reads back")
        var random = SystemRandomNumberGenerator()
        for _ in 0..<100 {
            let delay = latency.sample(using: &random).nanoseconds
            #expect(delay >= Int64(lower * 1_000_000) && delay <= Int64(upper * 1_000_000))
        }
    }

    @Test(arguments: ["", "-5", "120-40", "fast", "100ms", "1-2-3", "60001", "nan"])
    func anythingElseIsRefusedWithTheRule(text: String) {
        #expect(throws: LatencyError.self) { try APNsLatency(parsing: text) }
    }

    @Test func answersComeThatMuchLaterWithoutHoldingBackOtherStreamsOrTheOtherEnvironment() async throws {
        // Long enough that a busy machine's delays (749 ms seen for a push answered at once, with
        // the whole suite on two cores) never pass for it.
        let latency = Duration.milliseconds(1_500)
        let configuration = APNsEmulator.Configuration(latency: [.sandbox: APNsLatency(fixed: latency)])
        try await withEmulatorAndClient(configuration) { emulator, apns in
            let bundle = try BundleID("com.example.latency")
            let tokens = (0..<40).map { String(format: "%02x", $0) + String(repeating: "ab", count: 31) }
            for token in tokens { emulator.registry.register(EmulatorToken(hex: token, bundleID: bundle.value, environment: .sandbox)) }
            let payload = try LiveActivityPayload.update(content: ActivityContent(state: ["eta": 5], staleDate: nil), timestamp: Date())
            // The first push raises the stream limit (1 until then); then 40 at once.
            try await apns.send(payload, to: DeviceToken(tokens[0]), topic: bundle)
            let start = ContinuousClock.now
            let answered = try await withThrowingTaskGroup(of: Duration.self) { group in
                for token in tokens {
                    group.addTask {
                        try await apns.send(payload, to: DeviceToken(token), topic: bundle)
                        return ContinuousClock.now - start
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answered.allSatisfy { $0 >= latency }, "none before the latency: \(answered.min()!)")
            // One after another they would take 60 s; side by side, about one latency.
            #expect(answered.max()! < .seconds(8), "the slowest after \(answered.max()!)")
            #expect(emulator.journal.counts["Success"] == 41)
            #expect(emulator.latency(.production).latency == .none, "production answers at once")

            // The control API changes it from now on, and refuses a figure that is not one.
            try await Application(router: EmulatorControlAPI(emulator: emulator).router()).test(.router) { client in
                let refused = try await client.sendJSON(.put, "/latency", #"{"sandbox": "soon"}"#)
                #expect(refused.status == 400 && refused.body?["error"]?["field"] == .string("sandbox"))
                #expect(emulator.latency(.sandbox).latency == APNsLatency(fixed: latency))
                let changed = try await client.sendJSON(.put, "/latency", #"{"sandbox": "0", "production": "40-120"}"#)
                #expect(changed.status == 200 && changed.body == .object([("sandbox", .string("0")), ("production", .string("40-120"))]))
            }
            // The quickest of three in a row: with the latency still in force, each would take 1.5 s.
            var quickest = Duration.seconds(60)
            for token in tokens[1...3] {
                let quick = ContinuousClock.now
                try await apns.send(payload, to: DeviceToken(token), topic: bundle)
                quickest = min(quickest, ContinuousClock.now - quick)
            }
            #expect(quickest < latency, "at once again")
        }
    }
}

/// At a distance, one connection's streams are not enough: the client opens as many as the load
/// needs, and no more while APNs refuses its token.
@Suite struct ConnectionsAtADistanceTests {
    let bundle = try! BundleID("com.example.latency")
    let payload = try! LiveActivityPayload.update(content: ActivityContent(state: ["eta": 5], staleDate: nil), timestamp: Date())

    /// `workers` senders, each sending `rounds` pushes one after another, as the dispatcher does.
    func sendSteadily(_ apns: APNsClient, workers: Int, rounds: Int, tokens: [String]) async throws -> [Int] {
        try await withThrowingTaskGroup(of: [Int].self) { group in
            for worker in 0..<workers {
                group.addTask { [payload, bundle] in
                    var statuses: [Int] = []
                    for round in 0..<rounds {
                        let token = try DeviceToken(tokens[(worker + round) % tokens.count])
                        let answer = try await apns.execute(.liveActivity(payload, to: token, topic: bundle))
                        statuses.append(answer.status)
                    }
                    return statuses
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
    }

    func registeredTokens(_ emulator: APNsEmulator) -> [String] {
        let tokens = (0..<40).map { String(format: "%02x", $0) + String(repeating: "cd", count: 31) }
        for token in tokens { emulator.registry.register(EmulatorToken(hex: token, bundleID: bundle.value, environment: .sandbox)) }
        return tokens
    }

    @Test func fortyInFlightOnConnectionsOfTenStreamsOpenFourConnections() async throws {
        let configuration = APNsEmulator.Configuration(authenticatedStreamLimit: 10, latency: [.sandbox: APNsLatency(fixed: .milliseconds(30))])
        try await withEmulatorAndClient(configuration, connections: 1...8) { emulator, apns in
            let statuses = try await sendSteadily(apns, workers: 40, rounds: 12, tokens: registeredTokens(emulator))
            #expect(statuses.count == 480 && statuses.allSatisfy { $0 == 200 })
            let connections = Set(emulator.journal.requests.map(\.connectionID))
            #expect(connections.count == 4, "40 in flight at 10 streams a connection: \(connections.count) connections")
            #expect(apns.pushConnectionCount == 4)
        }
    }

    @Test func aRefusedTokenOpensNoMoreConnections() async throws {
        let configuration = APNsEmulator.Configuration(authenticatedStreamLimit: 10, latency: [.sandbox: APNsLatency(fixed: .milliseconds(5))])
        try await withEmulatorAndClient(configuration, registerKey: false, connections: 1...8) { emulator, apns in
            let statuses = try await sendSteadily(apns, workers: 20, rounds: 3, tokens: registeredTokens(emulator))
            #expect(statuses.count == 60 && statuses.allSatisfy { $0 == 403 })
            #expect(Set(emulator.journal.requests.map(\.connectionID)).count == 1, "APNs held the connection to one stream")
        }
    }
}
