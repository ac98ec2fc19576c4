import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// The outbox (`OutboxStore`).
extension PostgresStore {
    // MARK: The outbox

    package func claimDeliveries(dueBy now: Date, limit: Int, leaseUntil: Date) async throws -> [DeliveryRecord] {
        try await transaction { db in
            // SKIP LOCKED: instances claiming at once each take other pushes, and none waits.
            let claimed = try await db.rows(Self.claim, [.seconds(leaseUntil), .seconds(now), .integer(Int64(limit))]).map(DeliveryRow.init(row:))
            let starts = claimed.filter { $0.record.target.kind == .pushToStart }.map(\.record.id)
            var withdrawn = Set<Int64>()
            for case .move(let move) in OutboxRules.decisions(after: .claimed(starts: starts), at: now) {
                withdrawn.formUnion(try await db.rows(OutboxStatements.move(move, returningIDs: true)).compactMap { $0.integer(0) })
            }
            return try await Self.withPayloads(db, claimed.filter { !withdrawn.contains($0.record.id) }.sorted { $0.record.id < $1.record.id })
        }
    }

    /// The due pushes are locked by a sub-select that runs once (`ARRAY(…)`, an init plan): as
    /// `id IN (…)`, a plan made on an empty table ran it again for every row, each run locking
    /// the next due pushes, and a claim took the whole outbox. And it is not prepared, but planned
    /// at each claim on the table as it is then (a claim is one statement per batch of up to
    /// 1,000 pushes): prepared on a new database's empty table, the plan found the locked pushes
    /// by reading the whole table, for every batch (`PostgresPlanTests`).
    static let claim = """
        UPDATE deliveries SET status = '\(DeliveryEvent.claim.destination.rawValue)', next_attempt_at = ?
        WHERE id = ANY(ARRAY(
            SELECT id FROM deliveries WHERE \(OutboxStatements.statusCondition(.claim)) AND next_attempt_at <= ?
            ORDER BY next_attempt_at, id LIMIT ? FOR UPDATE SKIP LOCKED))
        RETURNING \(DeliveryRecord.columns)
        """

    package func releaseClaims(at: Date) async throws {
        try await transaction { db in try await db.carryOut(.restarted(alone: false), at: at) }
    }

    package func abandonClaims(_ ids: [Int64], leasedUntil: Date, at: Date) async throws {
        try await transaction { db in try await db.carryOut(.abandoned(ids: ids, leasedUntil: leasedUntil), at: at) }
    }

    package func recordOutcomes(_ outcomes: [(id: Int64, outcome: DeliveryOutcome)], at: Date) async throws {
        guard !outcomes.isEmpty else { return }
        try await transaction { db in
            var sent: (ids: [Int64], statuses: [Int64], apnsIDs: [String]) = ([], [], [])
            for (id, outcome) in outcomes {
                switch outcome {
                case .sent(let status, let apnsID):
                    sent.ids.append(id)
                    sent.statuses.append(Int64(status))
                    sent.apnsIDs.append(apnsID ?? "")
                case .retry, .failed:
                    let answer = OutboxStatements.answer(id: id, outcome, at: at)
                    let answered = try await db.rows(answer).first.map { row in try OutboxStatements.answered(row) }
                    // An answer to a push no longer claimed changes nothing.
                    if let answered { try await db.carryOut(.answered(answered, outcome), at: at) }
                }
            }
            guard !sent.ids.isEmpty else { return }
            var binds = PostgresBindings()
            binds.append(at.timeIntervalSince1970)
            binds.append(sent.ids)
            binds.append(sent.statuses)
            binds.append(sent.apnsIDs)
            binds.append(OutboxStatements.sourceStatuses(.sent))
            try await db.rows(PreparedStatements.RecordSent.self, bindings: binds)
        }
    }

    package func nextDueDate() async throws -> Date? {
        try await rows(PreparedStatements.NextDue.self, []).first?.date(0)
    }

    package func deliveries(_ query: DeliveryQuery) async throws -> [DeliveryRecord] {
        let statement = StoreStatements.deliveries(query)
        return try await connection { db in
            let rows = try await db.rows(statement.text, statement.arguments).map(DeliveryRow.init(row:))
            return query.includePayloads ? try await Self.withPayloads(db, rows) : rows.map(\.record)
        }
    }

    package func retryDelivery(id: Int64, app: String?, at now: Date) async throws -> DeliveryRetry.Outcome {
        try await transaction { db in
            guard
                let failed = try await db.rows(StoreStatements.retryCandidate + " FOR UPDATE", [.integer(id)]).first.map(DeliveryRow.init(row:))?
                    .record,
                app == nil || failed.bundleID == app
            else { return .notFound }
            let check = StoreStatements.retryTarget(failed.target, app: failed.bundleID, key: failed.key)
            let target = DeliveryRetry.targetState(failed.target, row: try await db.rows(check.text, check.arguments).first)
            let (kind, deviceID, _, channelID) = failed.target.columns
            let newer = try await db.rows(
                StoreStatements.newerPush,
                [.text(failed.bundleID), .text(failed.key), .text(kind), .text(deviceID ?? ""), .text(channelID ?? ""), .integer(id)]
            ).first?.integer(0)
            if let refusal = DeliveryRetry.refusal(status: failed.status, target: target, newerPush: newer) { return .refused(refusal) }
            let rows = try await db.rows(StoreStatements.retry, [.text("retry of push \(id)"), .seconds(now), .seconds(now), .integer(id)])
                .map(DeliveryRow.init(row:))
            try await db.run("SELECT pg_notify(?, '')", [.text(Self.outboxChannel)])
            guard let retried = try await Self.withPayloads(db, rows).first else { return .notFound }
            return .retried(retried)
        }
    }

    /// Read by the index of claimable pushes whatever the statistics say: taken while a fan-out
    /// waited, they say that half the table waits, and the count, planned from them, read the
    /// whole history (`PostgresPlanTests`). Sequential scans are priced out for this one read.
    package func pendingDeliveryCount() async throws -> Int {
        try await transaction { db in
            try await db.run("SET LOCAL enable_seqscan = off")
            return try await db.rows(StoreStatements.pendingDeliveryCount).first?.int(0) ?? 0
        }
    }

    package func deliveryCounts() async throws -> [DeliveryStatus: Int] {
        try await statusCounts("SELECT status, COUNT(*) FROM deliveries GROUP BY status")
    }

    package func waitingAndUnsentCounts() async throws -> [DeliveryStatus: Int] {
        try await statusCounts(StoreStatements.waitingAndUnsentCounts)
    }

    private func statusCounts(_ sql: String) async throws -> [DeliveryStatus: Int] {
        var counts: [DeliveryStatus: Int] = [:]
        for row in try await rows(sql) {
            counts[try DeliveryStatus(stored: row.string(0), column: "deliveries.status")] = row.int(1)
        }
        return counts
    }
}
