import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import Testing

/// Retention through the server: the ticker's holder deletes what is past its time, a batch at a
/// time, and says so in `/metrics`.
@Suite(.timeLimit(.minutes(2)))
struct RetentionTests {
    @Test func theTickersHolderDeletesTheHistoryAndEndedActivitiesPastTheirTimeAndCountsThem() async throws {
        try await withRelayHarness(configure: { configuration, _ in
            // Batches of two; the run's time is not what is tested (a loaded machine spent the 250 ms).
            configuration.retention = RetentionPolicy(historyDays: 2, endedDays: 1, batchSize: 2, runBudget: .seconds(60))
        }) { harness in
            try await harness.startActivity("order-1", on: ["iphone-1", "iphone-2", "iphone-3"])
            #expect(try await harness.post("/v1/activities/order-1/update", .object([("contentState", content("on the way", 10))])).status == 200)
            try await harness.dispatch()
            func pushes() async throws -> Int { try await harness.get("/v1/deliveries?key=order-1").json["deliveries"]?.arrayElements?.count ?? -1 }
            #expect(try await pushes() == 6)

            // A day on: the activity has ended (its 8 hours are over), and the history is kept.
            try await harness.advance(by: 86_400)
            #expect(try await harness.get("/v1/activities/order-1").json["state"] == .string("ended"))
            #expect(try await pushes() == 6)

            // Past both windows: the pushes (three batches of two), their payloads, the ended
            // activity and its tokens are gone.
            try await harness.advance(by: 2 * 86_400)
            #expect(try await pushes() == 0)
            #expect(try await harness.get("/v1/activities/order-1").status == 404)
            let metrics = harness.relay.metrics
            #expect(metrics.value(.retentionDeletedTotal, ["table": "deliveries"]) == 6)
            #expect(metrics.value(.retentionDeletedTotal, ["table": "payloads"]) == 2)
            #expect(metrics.value(.retentionDeletedTotal, ["table": "activities"]) == 1)
            #expect(metrics.value(.retentionDeletedTotal, ["table": "activity_tokens"]) == 3)
            let text = try await harness.get("/metrics", scope: .admin).text
            #expect(text.contains("# HELP liverelay_retention_deleted_total"))
            #expect(text.contains("liverelay_retention_deleted_total{table=\"deliveries\"} 6"))
            #expect(text.contains("liverelay_retention_batch_longest_microseconds "))
        }
    }
}
