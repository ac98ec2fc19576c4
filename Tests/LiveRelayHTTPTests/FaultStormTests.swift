import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Testing

/// Apple's bad day in one fan-out: errors that ask for a retry, a throttle, a slow answer, a
/// GOAWAY, a dropped connection and a push that is never answered. Nothing accepted is lost,
/// nothing is sent for good that should have been retried, and every iPhone ends on the last update.
@Suite(.timeLimit(.minutes(2)))
struct FaultStormTests {
    @Test func aFanOutThroughAStormOfFaultsEndsSentOrSupersededAndEveryDeviceOnTheLastUpdate() async throws {
        // Long enough that a busy machine still answers in time (every push then timed out at
        // 500 ms while the several-instances tests ran), short enough that the stalled push is
        // given up soon.
        try await withRelayHarness(configure: { configuration, _ in configuration.dispatch.requestTimeout = .seconds(5) }) { relay in
            let devices = (1...20).map { "iphone-\($0)" }
            try await relay.startActivity("match", on: devices)
            let storm: [EmulatorFault] = [
                EmulatorFault(EmulatorFault.respond(.internalServerError), skip: 1, count: 2),
                EmulatorFault(EmulatorFault.respond(.serviceUnavailable), skip: 1, count: 2),
                EmulatorFault(EmulatorFault.respond(.tooManyRequests), skip: 1, count: 2),
                EmulatorFault(.delay(.milliseconds(100)), count: 2),
                EmulatorFault(.goAway(reason: .shutdown), skip: 2),
                EmulatorFault(.resetConnection, skip: 2),
                EmulatorFault(.stall, skip: 2),
            ]
            for fault in storm { relay.emulator.faults.add(fault) }

            let first = content("on the way", 10)
            let last = content("around the corner", 2)
            #expect(try await relay.post("/v1/activities/match/update", .object([("contentState", first)])).status == 200)
            try await relay.dispatch()
            // Every push that met a fault asking for a retry waits for it, one back-off away.
            let waiting = try await relay.store.deliveries(DeliveryQuery(key: "match", status: .queued))
            #expect(waiting.count >= 6)
            #expect(waiting.allSatisfy { $0.attempts == 1 })
            let reasons = Set(waiting.compactMap(\.apnsReason).map { $0.hasPrefix("no answer") ? "no answer" : $0 })
            #expect(reasons.isSuperset(of: ["InternalServerError", "ServiceUnavailable", "TooManyRequests"]), "\(reasons)")
            let backoff = relay.relay.configuration.dispatch.backoff(afterAttempts: 1)
            let due = try #require(try await relay.store.nextDueDate())
            #expect(abs(due.timeIntervalSince(relay.relay.currentDate) - backoff) < 0.001)
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "match", status: .failed)).isEmpty)

            // A newer update replaces the waiting ones; it goes through what is left of the storm.
            #expect(try await relay.post("/v1/activities/match/update", .object([("contentState", last)])).status == 200)
            for _ in 0..<10 {
                try await relay.dispatch()
                let counts = try await relay.store.deliveryCounts()
                if counts[.queued] == nil, counts[.sending] == nil { break }
                try await relay.advance(by: relay.relay.configuration.dispatch.maximumBackoff)
            }
            #expect(relay.emulator.faults.installed.isEmpty, "every fault was played")
            let all = try await relay.store.deliveries(DeliveryQuery(key: "match", limit: 1000))
            let updates = all.filter { $0.event == .update }
            #expect(updates.count == 2 * devices.count)
            #expect(updates.allSatisfy { $0.status == .sent || $0.status == .superseded }, "\(updates.map(\.status))")
            #expect(updates.filter { $0.status == .superseded }.count == waiting.count)
            for device in devices {
                #expect(try relay.activity(on: device)?.content.state == last, "\(device)")
            }
        }
    }
}
