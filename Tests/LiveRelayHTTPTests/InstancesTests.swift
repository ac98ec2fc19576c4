import APNsEmulator
import Foundation
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
                store: harness.store, configuration: RelayConfiguration(), wire: RelayWire(), apns: nil, now: harness.emulator.clock.function)
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
}
