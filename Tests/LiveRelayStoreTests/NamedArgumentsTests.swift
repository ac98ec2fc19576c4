import Foundation
import Testing

@testable import LiveRelayStore

/// PostgreSQL's statements with many parameters are bound by name, from the list beside their text.
@Suite struct NamedArgumentsTests {
    @Test func valuesComeInTheListsOrderAndEachNameOnce() throws {
        var arguments = NamedArguments(["a", "run", "b"])
        arguments["b"] = .integer(2)
        arguments.bind("run", [.text("x"), .text("y")])
        arguments["a"] = .bool(true)
        #expect(try arguments.positional(placeholders: 4) == [.bool(true), .text("x"), .text("y"), .integer(2)])

        var unbound = NamedArguments(["a", "b"])
        unbound["a"] = .integer(1)
        #expect(throws: PostgresStoreInconsistency.self) { try unbound.positional(placeholders: 2) }
        var twice = NamedArguments(["a"])
        twice["a"] = .integer(1)
        twice["a"] = .integer(2)
        #expect(throws: PostgresStoreInconsistency.self) { try twice.positional(placeholders: 1) }
        var unlisted = NamedArguments(["a"])
        unlisted["a"] = .integer(1)
        unlisted["c"] = .integer(3)
        #expect(throws: PostgresStoreInconsistency.self) { try unlisted.positional(placeholders: 1) }
        #expect(throws: PostgresStoreInconsistency.self) { try arguments.positional(placeholders: 5) }
    }

    /// Each list names every placeholder of its statement: the supersede and the exhaustion's
    /// record stand for their own statements' arguments.
    @Test func theChangeStatementsListEveryPlaceholder() {
        // Each of the two names stands for its statement's run of placeholders.
        let runs =
            OutboxStatements.move(OutboxRules.supersedingKey(app: "", key: "", at: .distantPast)).arguments.count
            + OutboxStatements.statement(PreparedStatements.exhaustionTemplate, at: .distantPast).arguments.count
        #expect(PreparedStatements.changeSnapshotParameters.count == PreparedStatements.ChangeSnapshotRead.placeholderCount)
        #expect(PreparedStatements.changeSnapshotParameters.count == PreparedStatements.LockedChangeSnapshotRead.placeholderCount)
        #expect(
            PreparedStatements.changeWriteParameters(handedOver: false).count - 2 + runs == PreparedStatements.QueuedChange.placeholderCount)
        #expect(
            PreparedStatements.changeWriteParameters(handedOver: true).count - 2 + runs
                == PreparedStatements.HandedOverChange.placeholderCount)
    }
}
