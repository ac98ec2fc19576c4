import Foundation
import LiveActivityKit
import LiveRelayStore
import Testing

/// What a request costs the database, counted: the statements of a single-key update, of a
/// fan-out, and of recording their pushes sent, on each engine. A statement added to one of
/// these paths fails here until the count below is changed with it, on purpose
/// (`Documentation/benchmarks.md`, "Where a request goes").
@Suite(.timeLimit(.minutes(2)))
struct StatementCountTests {
    /// Statements, `BEGIN` and `COMMIT` included, by engine.
    struct Expected {
        /// An update of a key with one token, its budget counted, its push handed to the
        /// dispatcher in the same transaction: what `bench server`'s single-key run sends.
        var singleKeyUpdate: Int
        /// An update of a key with 50 tokens, written as one fan-out.
        var fanOutOf50: Int
        /// Recording the 50 pushes sent, in one batch.
        var recording50Sent: Int
        /// The single-key update past its key's budget: its exhaustion recorded unless recorded in
        /// the hour (every update of `bench server`'s run).
        var overBudgetUpdate: Int
    }

    static let expected: [StoreKind: Expected] = [
        // Each statement a step of its own: SQLite's cost a statement is a few microseconds,
        // in this process.
        .sqlite: Expected(singleKeyUpdate: 11, fanOutOf50: 10, recording50Sent: 9, overBudgetUpdate: 12),
        // A read and one write of CTEs, without a transaction (`KeyChange`): PostgreSQL's cost is
        // a round trip a statement.
        // The exhaustion's record is the write's too.
        .postgres: Expected(singleKeyUpdate: 2, fanOutOf50: 2, recording50Sent: 3, overBudgetUpdate: 2),
    ]

    @Test(arguments: StoreKind.allCases)
    func theStatementsOfAChangeAreCounted(_ kind: StoreKind) async throws {
        let expected = try #require(Self.expected[kind])
        try await kind.withStore { under in
            let store = under.store
            try await store.start("single", audience: .everyone)
            try await store.registerActivity("single", on: ["d1"])
            try await store.start("wide", audience: .everyone)
            try await store.registerActivity("wide", on: (1...50).map { "w\($0)" })

            func counted(_ body: () async throws -> Void) async throws -> Int {
                let before = store.statementsRun
                try await body()
                return store.statementsRun - before
            }
            let handOver = WriteContext(handOver: HandOver(leaseUntil: t0 + 60, limit: 100))
            let single = try await counted {
                try await store.change("single", body: "u1", at: t0 + 1, context: handOver)
            }
            let fanOut = try await counted {
                try await store.change("wide", body: "u2", at: t0 + 2, countingBudget: false)
            }
            let wide = try await store.claimDeliveries(dueBy: t0 + 2, limit: 1000, leaseUntil: t0 + 60).filter { $0.key == "wide" }
            #expect(wide.count == 50)
            let recording = try await counted {
                try await store.recordOutcomes(wide.map { ($0.id, .sent(status: 200, apnsID: nil)) }, at: t0 + 3)
            }
            let exhausted = BudgetExhaustion(targetsOverBudget: 1, targets: 1, perHour: 10)
            let overBudget = try await counted {
                try await store.change("single", body: "u3", at: t0 + 4, context: handOver, exhausted: exhausted)
            }
            #expect(single == expected.singleKeyUpdate, "a single-key update on \(kind)")
            #expect(overBudget == expected.overBudgetUpdate, "an update past its budget on \(kind)")
            #expect(fanOut == expected.fanOutOf50, "a fan-out of 50 on \(kind)")
            #expect(recording == expected.recording50Sent, "recording 50 pushes sent on \(kind)")
        }
    }
}
