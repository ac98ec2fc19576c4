import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import Testing

/// `serve` against APNs at a distance: it keeps more in flight than its floor as the round trip
/// needs, on more connections than one when the streams APNs allows run out.
@Suite struct DistanceTests {
    @Test func aFanOutAtADistanceGrowsPastItsFloorOntoMoreConnections() async throws {
        try await withRelayHarness(
            emulator: { emulator in
                emulator.authenticatedStreamLimit = 10
                emulator.latency = [.sandbox: APNsLatency(fixed: .milliseconds(100))]
            },
            configure: { relay, _ in relay.dispatch.inFlight = 5...1_000 }
        ) { relay in
            let now = Date()
            for index in 0..<120 {
                let token = String(format: "%08x", index) + String(repeating: "ab", count: 28)
                relay.emulator.registry.register(EmulatorToken(hex: token, bundleID: harnessApp, environment: .sandbox))
                try await relay.store.saveActivityToken(
                    ActivityTokenRecord(
                        bundleID: harnessApp, key: "match", deviceID: "fan-\(index)", token: token, frequentPushesEnabled: false,
                        environment: .sandbox, registeredAt: now),
                    attributesType: "DeliveryAttributes")
            }
            #expect(try await relay.post("/v1/activities/match/update", .object([("contentState", content("on the way", 5))])).status == 200)
            try await relay.dispatch()

            #expect(relay.emulator.journal.counts["Success"] == 120)
            #expect(try await relay.store.deliveryCounts()[.sent] == 120)
            let metrics = PrometheusSamples(try await relay.relay.renderMetrics())
            let limit = Int(try #require(metrics.value("liverelay_in_flight_limit")))
            // 5 in flight at 100 ms is 50 a second; the limit grew as that rate showed it could.
            #expect(limit > 10, "in flight at most \(limit)")
            #expect(metrics.value("liverelay_apns_round_trip_shortest_microseconds").map { $0 >= 100_000 } == true)
            let connections = Set(relay.emulator.journal.requests.filter { $0.path.hasPrefix("/3/device/") }.map(\.connectionID))
            #expect(connections.count > 1, "10 streams a connection were not enough")
            #expect(metrics.value("liverelay_apns_connections") == Double(connections.count))
        }
    }
}
