import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import LiveRelayTesting
import Logging
import SimulatedDevices
import Synchronization
import Testing

/// A store that fails (a full disk: SQLite refuses every write) costs requests a clean `500`, and
/// the loops that live on the store back off, saying so once, until it works again.
@Suite(.timeLimit(.minutes(2)))
struct StoreFailureTests {
    @Test func aStoreFailureAnswers500WithARequestIDAndKeepsTheDetailInTheLog() async throws {
        let logs = CapturedLogs()
        try await withRelayHarness(logs: logs) { relay in
            try await relay.startActivity("k", on: ["iphone-1"])
            let store = relay.store
            try await store.setWritesFail(true)
            let failed = try await relay.post("/v1/activities/k/update", .object([("contentState", content("lost?", 1))]))
            #expect(failed.status == 500)
            #expect(failed.json["error"]?["code"] == .string("internal_error"))
            let requestID = try #require(failed.json["error"]?["requestID"]?.stringValue)
            #expect(requestID.hasPrefix("req_") && requestID.count == 20)
            // Nothing of the database reaches the client: not its error, not its statement.
            for detail in ["SQL", "sqlite", "readonly", "UPDATE", "INSERT", "query_only"] {
                #expect(!failed.text.contains(detail), "the 500 answer shows \(detail): \(failed.text)")
            }
            #expect(failed.json["error"]?["message"]?.stringValue?.contains(requestID) == true)
            // The log has it, under the same id.
            let line = try #require(logs.all.first { $0.metadata["request.id"] == requestID })
            #expect(line.level == .error)
            #expect(line.metadata["error"]?.contains("readonly") == true)

            // Once the store works, the same request goes through; what was accepted before is intact.
            #expect(try await relay.get("/v1/activities/k").json["contentState"] == content("preparing", 30))
            try await store.setWritesFail(false)
            #expect(try await relay.post("/v1/activities/k/update", .object([("contentState", content("on the way", 10))])).status == 200)
        }
    }

    @Test func theDispatcherBacksOffWhileTheStoreFailsLogsOnlyTheChangesAndThenDelivers() async throws {
        let logs = CapturedLogs()
        try await withRelayHarness(logs: logs) { relay in
            try await relay.startActivity("k", on: ["iphone-1"])
            // Accepted and queued while no dispatcher runs; then the disk fills up.
            #expect(try await relay.post("/v1/activities/k/update", .object([("contentState", content("on the way", 10))])).status == 200)
            let store = relay.store
            try await store.setWritesFail(true)
            let failures: @Sendable () -> Int = { relay.relay.metrics.value(.storeFailuresTotal, ["loop": "dispatcher"]) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await relay.server.dispatcher.run() }
                try await relay.eventually { failures() >= 1 }
                let firstFailure = ContinuousClock.now
                try await relay.eventually { failures() >= 4 }
                // Waits of 50, 100 and 200 ms (less the 10 ms this test polls at); without
                // back-off, four failures took a millisecond.
                #expect(ContinuousClock.now - firstFailure >= .milliseconds(330))
                #expect(logs.lines(containing: "store failing").count == 1)
                #expect(logs.lines(containing: "store works again").isEmpty)

                try await store.setWritesFail(false)
                try await relay.eventually { try relay.activity(on: "iphone-1")?.content.state == content("on the way", 10) }
                try await relay.eventually { logs.lines(containing: "store works again").count == 1 }
                #expect(logs.lines(containing: "store failing").count == 1)
                group.cancelAll()
            }
        }
    }

    /// A loop that backs off ends when its task is cancelled (how a service group stops the others
    /// when one fails to start, a busy port), at once and without a word of a store failure: a
    /// cancelled sleep returns at once, and a loop that went on would spin and outlive SIGTERM.
    @Test(arguments: [false, true])
    func theTickerAndTheDispatcherEndWhenCancelledWhetherOrNotTheStoreFails(storeFails: Bool) async throws {
        let logs = CapturedLogs()
        try await withRelayHarness(logs: logs) { relay in
            try await relay.store.setWritesFail(storeFails)
            let loops: [(name: String, run: @Sendable () async throws -> Void)] = [
                ("ticker", { try await RelayTicker(relay: relay.relay, interval: .milliseconds(20)).run() }),
                ("dispatcher", { try await relay.server.dispatcher.run() }),
            ]
            for loop in loops {
                let ended = Mutex(false)
                let running = Task {
                    try await loop.run()
                    ended.withLock { $0 = true }
                }
                if storeFails {
                    try await relay.eventually { relay.relay.metrics.value(.storeFailuresTotal, ["loop": loop.name]) >= 2 }
                } else {
                    try await Task.sleep(for: .milliseconds(100))
                }
                let failuresBefore = logs.lines(containing: "store failing").count
                running.cancel()
                // Watched rather than awaited: a loop that spins would never let an await return.
                try await withDeadline(.seconds(5)) { try await eventually { ended.withLock { $0 } } }
                #expect(logs.lines(containing: "store failing").count == failuresBefore, "\(loop.name): cancellation is no store failure")
            }
            #expect(logs.lines(containing: "store failing").count == (storeFails ? 2 : 0))
        }
    }

    @Test func backOffDoublesUpToItsMaximumAndReportsOnlyChangesOfState() {
        var backoff = StoreBackoff(initial: .milliseconds(50), maximum: .seconds(1))
        #expect(backoff.succeeded() == nil)
        var waits: [Duration] = []
        var changes: [StoreBackoff.Change?] = []
        for _ in 0..<7 {
            let (wait, change) = backoff.failed()
            waits.append(wait)
            changes.append(change)
        }
        #expect(
            waits == [.milliseconds(50), .milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1)])
        #expect(changes == [.startedFailing, nil, nil, nil, nil, nil, nil])
        #expect(backoff.succeeded() == .recovered(failures: 7))
        #expect(backoff.succeeded() == nil)
        #expect(backoff.failed().wait == .milliseconds(50))
    }
}
