import Foundation
import GRDB
import LiveActivityKit
import Synchronization

/// The writes that accept a request, and schedules (`AcceptingStore`).
extension SQLiteStore {
    // MARK: Accepting requests

    package func idempotentAnswer(apiKeyID: String, key: String) async throws -> IdempotentAnswer? {
        try await pool.read { db in
            try db.fetchOne(StoreStatements.idempotentAnswer, [apiKeyID, key]) { row in
                IdempotentAnswer(requestHash: row[0], answer: try AcceptedRequest(stored: row.text(1)))
            }
        }
    }

    package func audienceEnvironments(app: String, attributesType: String, audience: Audience) async throws -> Set<PushEnvironment> {
        try await pool.read { db in
            Set(try Self.pushToStartTokens(db, app: app, attributesType: attributesType, audience: audience).map(\.environment))
        }
    }

    package func acceptStart<Outcome: Sendable>(
        app: String, key: String, attributesType: String, audience: Audience, context: WriteContext,
        plan: @Sendable ([PushToStartTokenRecord]) throws -> (StartPlan, Outcome)
    ) async throws -> Accepted<Outcome> {
        try await write { db in
            if try Self.activity(db, app: app, key: key) != nil {
                throw StoreError(.keyExists, "activity key \"\(key)\" already exists")
            }
            let tokens = try Self.pushToStartTokens(db, app: app, attributesType: attributesType, audience: audience)
            let (planned, outcome) = try plan(tokens)
            try Self.insert(db, activity: planned.activity)
            let claimed = try Self.enqueue(
                db, payloads: planned.payloads, deliveries: planned.deliveries, at: planned.acceptedAt, context: context)
            try Self.record(db, context: context, answer: .accepted(planned.acceptance), at: planned.acceptedAt)
            return Accepted(outcome: outcome, claimed: claimed)
        }
    }

    package func acceptChange<Outcome: Sendable>(
        app: String, key: String, budget: ChangeBudget, context: WriteContext,
        plan: @Sendable (ChangeSnapshot) throws -> (ChangePlan, Outcome)
    ) async throws -> Accepted<Outcome> {
        try await write { db in
            let activity = try Self.activity(db, app: app, key: key)
            var tokens: [ActivityTokenRecord] = []
            var tokenCount = 0
            var counts: [String: Int] = [:]
            if activity != nil, budget.readsTokens {
                tokens = try db.fetchAll(
                    StoreStatements.liveTokens,
                    [app, key], as: ActivityTokenRecord.init(row:))
                tokenCount = tokens.count
                if let windowStart = budget.windowStart {
                    try db.forEach(
                        StoreStatements.priority10Counts,
                        [app, key, windowStart.seconds]
                    ) { row in counts[row[0]] = row[1] }
                }
            } else if activity != nil {
                // One priority for every push: the plan needs only how many there will be.
                tokenCount =
                    try db.fetchOne(
                        StoreStatements.liveTokenCount, [app, key]
                    ) { $0[0] as Int } ?? 0
            }
            let channels =
                activity == nil || activity!.channelIDs.isEmpty
                ? []
                : try db.fetchAll(
                    StoreStatements.channelsOfKeyRecords, [app, key],
                    as: ChannelRecord.init(row:))
            let awaiting = activity == nil ? 0 : try db.fetchOne(StoreStatements.awaitingDevices, [app, key]) { $0[0] as Int } ?? 0
            let (planned, outcome) = try plan(
                ChangeSnapshot(
                    activity: activity, liveTokens: tokens, liveTokenCount: tokenCount, priority10Counts: counts, channels: channels,
                    awaitingDevices: awaiting))
            try Self.updateChanged(db, activity: planned.activity)
            // Written before an end ends the tokens: its fan-out goes to those live until now.
            let claimed = try Self.enqueue(
                db, payloads: [planned.payload], deliveries: planned.deliveries, fanOut: planned.fanOut.map { ($0, tokenCount) },
                at: planned.acceptedAt, context: context)
            if let exhausted = planned.budgetExhausted {
                try db.carryOut(.budgetExhausted(app: app, key: key, exhausted), at: planned.acceptedAt)
            }
            if planned.activity.state == .ended {
                if activity?.state != .ended { try db.carryOut(.keyEnded(app: app, key: key), at: planned.acceptedAt) }
                try db.run(
                    StoreStatements.endKeyTokens,
                    [app, key])
                if let deleteAfter = planned.channelDeleteAfter {
                    try db.run(
                        StoreStatements.deleteKeyChannelsAfter,
                        [deleteAfter.seconds, app, key])
                }
            }
            try Self.record(db, context: context, answer: .accepted(planned.acceptance), at: planned.acceptedAt)
            return Accepted(outcome: outcome, claimed: claimed)
        }
    }

    package func acceptReload<Outcome: Sendable>(
        app: String, type: ReloadPushType, audience: Audience, since: Date, context: WriteContext,
        plan: @Sendable (ReloadSnapshot) throws -> (ReloadPlan, Outcome)
    ) async throws -> Accepted<Outcome> {
        try await write { db in
            let query = StoreStatements.surfaceTokens(app: app, type: type, audience: audience)
            let tokens = try Row.fetchAll(db, sql: query.text, arguments: query.sqliteArguments).map(SurfaceTokenRecord.init(row:))
            var recent: [String: Int] = [:]
            try db.forEach(StoreStatements.recentReloads, [app, type.rawValue, since.seconds]) { row in recent[row[0]] = row[1] }
            let (planned, outcome) = try plan(ReloadSnapshot(tokens: tokens, recentReloads: recent))
            let claimed = try Self.enqueue(
                db, payloads: [ReloadPushType.body], deliveries: planned.deliveries, at: planned.acceptedAt, context: context)
            try Self.record(db, context: context, answer: .reloaded(planned.acceptance), at: planned.acceptedAt)
            return Accepted(outcome: outcome, claimed: claimed)
        }
    }

    // MARK: Schedules

    package func insertSchedule(_ schedule: ScheduleRecord, context: WriteContext) async throws {
        try await write { db in
            try db.run(
                StoreStatements.insertSchedule, ScheduleRecord.table.arguments(schedule).sqlite)
            try Self.record(db, context: context, answer: .scheduled(schedule), at: schedule.createdAt)
        }
    }

    package func schedule(id: String) async throws -> ScheduleRecord? {
        try await pool.read { db in
            try db.fetchOne("SELECT \(ScheduleRecord.columns) FROM schedules WHERE id = ?", [id], as: ScheduleRecord.init(row:))
        }
    }

    package func schedules(app: String?, key: String?) async throws -> [ScheduleRecord] {
        try await pool.read { db in
            try db.fetchAll(
                """
                SELECT \(ScheduleRecord.columns) FROM schedules WHERE (? IS NULL OR bundle_id = ?) AND (? IS NULL OR key = ?)
                ORDER BY due_at, id
                """,
                [app, app, key, key], as: ScheduleRecord.init(row:))
        }
    }

    package func cancelSchedule(id: String, at: Date) async throws -> ScheduleRecord? {
        try await write { db in
            guard let schedule = try db.fetchOne("SELECT \(ScheduleRecord.columns) FROM schedules WHERE id = ?", [id], as: ScheduleRecord.init(row:))
            else {
                return nil
            }
            guard schedule.state == .pending else {
                throw StoreError(.scheduleNotPending, "schedule \(id) is \(schedule.state.rawValue), not pending")
            }
            try db.run("UPDATE schedules SET state = 'cancelled' WHERE id = ?", [id])
            var cancelled = schedule
            cancelled.state = .cancelled
            return cancelled
        }
    }

    package func dueSchedules(at: Date, limit: Int) async throws -> [ScheduleRecord] {
        try await pool.read { db in
            try db.fetchAll(
                "SELECT \(ScheduleRecord.columns) FROM schedules WHERE state = 'pending' AND due_at <= ? ORDER BY due_at, id LIMIT ?",
                [at.seconds, limit], as: ScheduleRecord.init(row:))
        }
    }

    package func failSchedule(id: String, reason: String) async throws {
        try await write { db in
            try db.run("UPDATE schedules SET state = 'failed', result = ? WHERE id = ? AND state = 'pending'", [reason, id])
        }
    }
}
