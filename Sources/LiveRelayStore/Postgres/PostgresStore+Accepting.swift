import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// The writes that accept a request, and schedules (`AcceptingStore`).
extension PostgresStore {
    // MARK: Accepting requests

    package func idempotentAnswer(apiKeyID: String, key: String) async throws -> IdempotentAnswer? {
        try await rows(StoreStatements.idempotentAnswer, [.text(apiKeyID), .text(key)]).first.map { row in
            IdempotentAnswer(requestHash: row.string(0), answer: try AcceptedRequest(stored: row.text(1)))
        }
    }

    package func audienceEnvironments(app: String, attributesType: String, audience: Audience) async throws -> Set<PushEnvironment> {
        try await connection { db in
            Set(try await Self.pushToStartTokens(db, app: app, attributesType: attributesType, audience: audience).map(\.environment))
        }
    }

    package func acceptStart<Outcome: Sendable>(
        app: String, key: String, attributesType: String, audience: Audience, context: WriteContext,
        plan: @Sendable ([PushToStartTokenRecord]) throws -> (StartPlan, Outcome)
    ) async throws -> Accepted<Outcome> {
        let accepted = try await transaction { db in
            if try await Self.activity(db, app: app, key: key, locked: false) != nil { throw Self.keyExists(key) }
            let tokens = try await Self.pushToStartTokens(db, app: app, attributesType: attributesType, audience: audience)
            let (planned, outcome) = try plan(tokens)
            do {
                try await Self.insert(db, activity: planned.activity)
            } catch let error as PSQLError where error.isUniqueViolation {
                // Started by another request since the check above.
                throw Self.keyExists(key)
            }
            let claimed = try await Self.enqueue(
                db, payloads: planned.payloads, deliveries: planned.deliveries, at: planned.acceptedAt, context: context)
            try await Self.record(db, context: context, answer: .accepted(planned.acceptance), at: planned.acceptedAt)
            return (accepted: Accepted(outcome: outcome, claimed: claimed), pushes: planned.deliveries.count)
        }
        await keepStatisticsCurrent(afterWriting: accepted.pushes)
        return accepted.accepted
    }

    package func acceptReload<Outcome: Sendable>(
        app: String, type: ReloadPushType, audience: Audience, since: Date, context: WriteContext,
        plan: @Sendable (ReloadSnapshot) throws -> (ReloadPlan, Outcome)
    ) async throws -> Accepted<Outcome> {
        let accepted = try await transaction { db in
            let tokens = try await db.rows(StoreStatements.surfaceTokens(app: app, type: type, audience: audience)).map(SurfaceTokenRecord.init(row:))
            var recent: [String: Int] = [:]
            for row in try await db.rows(StoreStatements.recentReloads, [.text(app), .text(type.rawValue), .seconds(since)]) {
                recent[row.string(0)] = Int(row.integer(1) ?? 0)
            }
            let (planned, outcome) = try plan(ReloadSnapshot(tokens: tokens, recentReloads: recent))
            let claimed = try await Self.enqueue(
                db, payloads: [ReloadPushType.body], deliveries: planned.deliveries, at: planned.acceptedAt, context: context)
            try await Self.record(db, context: context, answer: .reloaded(planned.acceptance), at: planned.acceptedAt)
            return (accepted: Accepted(outcome: outcome, claimed: claimed), pushes: planned.deliveries.count)
        }
        await keepStatisticsCurrent(afterWriting: accepted.pushes)
        return accepted.accepted
    }

    private static func keyExists(_ key: String) -> StoreError { StoreError(.keyExists, "activity key \"\(key)\" already exists") }

    /// A change of one key costs a statement to read it and one to write it. Each statement costs
    /// PostgreSQL and postgres-nio far more than its work on one key does, so the common change
    /// takes no transaction: it is written only if the key's row is still the version it was
    /// planned from (optimistic). One that must be written with more (an idempotency key, a
    /// schedule, an end's tokens and channels, other outbox decisions), or that another write
    /// came before, is planned again in a transaction that holds the key's row.
    package func acceptChange<Outcome: Sendable>(
        app: String, key: String, budget: ChangeBudget, context: WriteContext, plan: @Sendable (ChangeSnapshot) throws -> (ChangePlan, Outcome)
    ) async throws -> Accepted<Outcome> {
        let change = KeyChange(app: app, key: key, budget: budget, handOver: context.handOver, traceParent: context.traceParent)
        let written: KeyChange.Written<Outcome>
        if context.idempotency == nil && context.scheduleID == nil,
            let unlocked = try await connection({ try await change.write($0, locked: false, plan: plan) })
        {
            written = unlocked
        } else {
            written = try await transaction { db in
                // Locked: the next change of this key waits for this one and plans from what it wrote.
                guard let written = try await change.write(db, locked: true, plan: plan) else {
                    throw PostgresStoreInconsistency("the row of key \"\(key)\" changed while this transaction held it")
                }
                try await Self.record(db, context: context, answer: .accepted(written.acceptance), at: written.acceptedAt)
                return written
            }
        }
        await keepStatisticsCurrent(afterWriting: written.pushes)
        return written.accepted
    }

    /// Writes of at least this many pushes check that `deliveries`' statistics still know about as
    /// many rows.
    static let statisticsCheckAfter = 1_000

    /// Analyzes `deliveries`' size and keys after a write of `pushes` rows when its statistics
    /// know fewer rows than that: a new database's first fan-out. Each connection plans a
    /// statement once, at its first run (`PostgresURL.planOnce`); made while the table was empty,
    /// a single-key change's plan read all of `deliveries` until autovacuum analyzed it, up to a
    /// minute later or, busy, never (`PostgresPlanTests`). Analyzing makes every connection plan
    /// again. Statuses are left to autovacuum: taken now, while the whole fan-out waits, they would
    /// say that nearly every push always waits. A failure leaves it all to autovacuum: the write
    /// is committed already.
    func keepStatisticsCurrent(afterWriting pushes: Int) async {
        guard pushes >= Self.statisticsCheckAfter else { return }
        guard let known = try? await rows("SELECT reltuples::float8 FROM pg_class WHERE oid = 'deliveries'::regclass").first?.real(0),
            known < Double(pushes)
        else { return }
        try? await run("ANALYZE deliveries (bundle_id, key)")
    }

    // MARK: Schedules

    package func insertSchedule(_ schedule: ScheduleRecord, context: WriteContext) async throws {
        try await transaction { db in
            try await db.run(
                StoreStatements.insertSchedule, ScheduleRecord.table.arguments(schedule))
            try await Self.record(db, context: context, answer: .scheduled(schedule), at: schedule.createdAt)
        }
    }

    package func schedule(id: String) async throws -> ScheduleRecord? {
        try await rows("SELECT \(ScheduleRecord.columns) FROM schedules WHERE id = ?", [.text(id)])
            .first.map(ScheduleRecord.init(row:))
    }

    package func schedules(app: String?, key: String?) async throws -> [ScheduleRecord] {
        try await rows(
            """
            SELECT \(ScheduleRecord.columns) FROM schedules WHERE (?::text IS NULL OR bundle_id = ?) AND (?::text IS NULL OR key = ?)
            ORDER BY due_at, id
            """,
            [.text(app), .text(app), .text(key), .text(key)]
        ).map(ScheduleRecord.init(row:))
    }

    package func cancelSchedule(id: String, at: Date) async throws -> ScheduleRecord? {
        try await transaction { db in
            guard
                var schedule = try await db.rows("SELECT \(ScheduleRecord.columns) FROM schedules WHERE id = ? FOR UPDATE", [.text(id)])
                    .first.map(ScheduleRecord.init(row:))
            else { return nil }
            guard schedule.state == .pending else {
                throw StoreError(.scheduleNotPending, "schedule \(id) is \(schedule.state.rawValue), not pending")
            }
            try await db.run("UPDATE schedules SET state = 'cancelled' WHERE id = ?", [.text(id)])
            schedule.state = .cancelled
            return schedule
        }
    }

    package func dueSchedules(at: Date, limit: Int) async throws -> [ScheduleRecord] {
        try await rows(
            "SELECT \(ScheduleRecord.columns) FROM schedules WHERE state = 'pending' AND due_at <= ? ORDER BY due_at, id LIMIT ?",
            [.seconds(at), .integer(Int64(limit))]
        ).map(ScheduleRecord.init(row:))
    }

    package func failSchedule(id: String, reason: String) async throws {
        try await run(
            "UPDATE schedules SET state = 'failed', result = ? WHERE id = ? AND state = 'pending'", [.text(reason), .text(id)])
    }
}
