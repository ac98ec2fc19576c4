import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Testing

/// Two instances on one store: what time does (schedules, expiry, channel clean-up) runs on one
/// of them at a time, and moves to the other once the first stops renewing its lease.
@Suite(.timeLimit(.minutes(2)))
struct InstancesTests {
    @Test func timeActsOnOneInstanceAtATimeAndMovesWhenItsHolderStops() async throws {
        try await withRelayHarness { harness in
            let other = RelayService(
                store: harness.store, configuration: RelayConfiguration(), apns: nil, masterKey: .generate(),
                now: harness.emulator.clock.function)
            #expect(other.instanceID != harness.relay.instanceID)
            // The harness's instance ticks (as `advance` does) and so holds the work.
            try await harness.advance(by: 1)
            #expect(try await !other.tick())
            try await harness.advance(by: 9)
            #expect(try await !other.tick())
            // It stops (dies): once its lease has run out, the other takes the work and keeps it.
            harness.emulator.clock.advance(by: RelayConfiguration().tickerLease)
            #expect(try await other.tick())
            #expect(try await !harness.relay.tick())
            harness.emulator.clock.advance(by: 1)
            #expect(try await other.tick())
        }
    }

    /// A claimed push waits in the dispatcher's queue while the pushes before it are slow. Sent
    /// after half its lease, it could still be in flight when the lease runs out and another
    /// instance claims it: both would send it. So the dispatcher gives it back instead, and it
    /// goes out once, on a fresh claim.
    @Test func aPushLeftWaitingPastHalfItsLeaseIsGivenBackAndSentOnAFreshClaim() async throws {
        try await withRelayHarness(configure: { relay, _ in
            relay.dispatch.inFlight = 1...1
            relay.dispatch.handOverLimit = 0
        }) { relay in
            try await relay.startActivity("match", on: ["iphone-1", "iphone-2"])
            @Sendable func updates() -> Int { relay.emulator.journal.requests.filter { $0.path.hasPrefix("/3/device/") }.count - 2 }
            // The first answer's delay is the window in which the clock must move: long enough for
            // a test task that a loaded machine keeps waiting (a run of the suite under load missed
            // 300 ms).
            _ = relay.emulator.faults.add(EmulatorFault(.delay(.seconds(2))))
            #expect(try await relay.post("/v1/activities/match/update", .object([("contentState", content("behind", 5))])).status == 200)
            let sending = Task { try await relay.dispatch() }
            // The first of the two claimed pushes is with APNs (its answer held back); the second
            // waits while the clock passes half their lease.
            try await relay.eventually { updates() >= 1 }
            #expect(updates() == 1, "the second push went out before the clock moved")
            relay.emulator.clock.advance(by: relay.relay.configuration.dispatch.lease / 2 + 1)
            try await sending.value
            #expect(relay.relay.metrics.value(.claimsAbandonedTotal) == 1)
            #expect(updates() == 2)
            for device in ["iphone-1", "iphone-2"] { #expect(try relay.activity(on: device)?.content.state == content("behind", 5)) }
            #expect(
                try await relay.store.deliveries(DeliveryQuery(key: "match", limit: 10)).filter { $0.event == .update }.map(\.status) == [
                    .sent, .sent,
                ])
        }
    }
}
