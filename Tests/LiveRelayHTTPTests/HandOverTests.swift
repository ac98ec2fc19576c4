import Foundation
import LiveActivityKit
import LiveRelayHTTP
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Synchronization
import Testing

@testable import LiveRelay

/// A small request's pushes go from the accepting transaction straight to the running
/// dispatcher, claimed, instead of being queued for it to claim in a transaction of its own.
@Suite(.timeLimit(.minutes(2)))
struct HandOverTests {
    @Test func aSmallRequestHandsItsPushesClaimedToARunningDispatcherWithRoomAndQueuesThemOtherwise() async throws {
        try await withRelayHarness(configure: { relay, _ in relay.dispatch.handOverLimit = 2 }) { relay in
            try await relay.startActivity("order-1", on: ["iphone-1"])
            try await relay.startActivity("match", on: ["iphone-2", "iphone-3", "iphone-4"])
            let taken = Mutex<[DeliveryRecord]>([])
            let room = Atomic<Bool>(true)
            relay.relay.handOver.open(.init(hasRoom: { room.load(ordering: .relaxed) }, take: { records in taken.withLock { $0 += records } }))
            func update(_ key: String, _ status: String) async throws {
                #expect(try await relay.post("/v1/activities/\(key)/update", .object([("contentState", content(status, 5))])).status == 200)
            }
            func statuses(_ key: String) async throws -> [DeliveryStatus] {
                try await relay.store.deliveries(DeliveryQuery(key: key, limit: 10)).filter { $0.event == .update }.map(\.status)
            }

            try await update("order-1", "handed over")
            let handed = taken.withLock { $0 }
            #expect(handed.map(\.key) == ["order-1"] && handed.allSatisfy { $0.status == .sending })
            #expect(try await statuses("order-1") == [.sending])
            // Over the limit, or with a dispatcher that has no room or runs no more: queued.
            try await update("match", "too many")
            room.store(false, ordering: .relaxed)
            try await update("order-1", "no room")
            relay.relay.handOver.close()
            try await update("order-1", "no dispatcher")
            #expect(taken.withLock { $0.count } == 1)
            #expect(try await statuses("match") == Array(repeating: .queued, count: 4))  // iphone-1 follows the match too
            // Newest first: the last supersedes the one queued before it, not the one handed over.
            #expect(try await statuses("order-1") == [.queued, .superseded, .sending])
        }
    }

    @Test func pushesHandedToTheRunningDispatcherAreSentAndRecorded() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("order-1", on: ["iphone-1"])
            let dispatcher = Task { try await relay.server.dispatcher.run() }
            defer { dispatcher.cancel() }
            try await relay.eventually { relay.relay.handOver.offer(at: Date(), policy: relay.relay.configuration.dispatch) != nil }

            #expect(try await relay.post("/v1/activities/order-1/update", .object([("contentState", content("on the way", 10))])).status == 200)
            // Written claimed, it would be due for a claim only when its lease runs out, and the
            // clock stands still: it reaches the device because the dispatcher was given it.
            try await relay.eventually { try relay.activity(on: "iphone-1")?.content.state == content("on the way", 10) }
            try await relay.eventually {
                try await relay.store.deliveries(DeliveryQuery(key: "order-1", limit: 10)).first?.status == .sent
            }
        }
    }
}
