import Foundation
import GRDB
import LiveActivityKit
import Synchronization

/// The outbox (`OutboxStore`).
extension SQLiteStore {
    // MARK: The outbox

    package func claimDeliveries(dueBy now: Date, limit: Int, leaseUntil: Date) async throws -> [DeliveryRecord] {
        try await write { db in
            // One statement picks and leases; RETURNING gives no order, so the oldest go first by id.
            let claimed = try db.fetchAll(
                Self.claim,
                [leaseUntil.seconds, now.seconds, limit], as: DeliveryRow.init(row:))
            let starts = claimed.filter { $0.record.target.kind == .pushToStart }.map(\.record.id)
            let withdrawn = try db.carryOutMoves(.claimed(starts: starts), at: now)
            return try Self.withPayloads(db, claimed.filter { !withdrawn.contains($0.record.id) }.sorted { $0.record.id < $1.record.id })
        }
    }

    package func releaseClaims(at: Date) async throws {
        try await write { db in
            try db.carryOut(.restarted(alone: true), at: at)
            try db.run(WebhookStatements.releaseLeases)
        }
    }

    package func abandonClaims(_ ids: [Int64], leasedUntil: Date, at: Date) async throws {
        try await write { db in try db.carryOut(.abandoned(ids: ids, leasedUntil: leasedUntil), at: at) }
    }

    /// Due deliveries, claimed until a lease's end (`?`: the lease, now, how many).
    private static let claim = """
        UPDATE deliveries SET status = '\(DeliveryEvent.claim.destination.rawValue)', next_attempt_at = ?
        WHERE id IN (
            SELECT id FROM deliveries WHERE \(OutboxStatements.statusCondition(.claim)) AND next_attempt_at <= ?
            ORDER BY next_attempt_at, id LIMIT ?)
        RETURNING \(DeliveryRecord.columns)
        """

    /// Batch sizes: a handful of statement texts to cache, and few statements for any count.
    private static let batchSizes = [256, 32, 4, 1]

    /// Sent pushes, `rows` at a time: (id, status, apns-id) each. One statement per few hundred
    /// pushes instead of one each, which was most of the cost of recording a fan-out. The statuses
    /// it moves from come last, bound (`OutboxStatements.statusCondition(amongIDs:)`).
    private static let recordSent = Dictionary(
        uniqueKeysWithValues: batchSizes.map { rows in
            (
                rows,
                """
                UPDATE deliveries SET status = '\(DeliveryEvent.sent.destination.rawValue)', attempts = attempts + 1, finished_at = ?,
                    attempted_at = ?, apns_status = o.column2, apns_id = o.column3, apns_reason = NULL
                FROM (VALUES \(repeatElement("(?, ?, ?)", count: rows).joined(separator: ", "))) AS o
                WHERE deliveries.id = o.column1 AND \(OutboxStatements.statusCondition(amongIDs: .sent, column: "deliveries.status").text)
                """
            )
        })
    private static let recordSentStatuses = OutboxStatements.sourceStatuses(.sent)

    package func recordOutcomes(_ outcomes: [(id: Int64, outcome: DeliveryOutcome)], at: Date) async throws {
        guard !outcomes.isEmpty else { return }
        try await write { db in
            let now = at.seconds
            var sent: [(id: Int64, status: Int, apnsID: String?)] = []
            for (id, outcome) in outcomes {
                switch outcome {
                case .sent(let status, let apnsID):
                    sent.append((id, status, apnsID))
                case .retry, .failed:
                    let answer = OutboxStatements.answer(id: id, outcome, at: at)
                    let answered = try db.fetchOne(answer.text, answer.sqliteArguments) { row in try OutboxStatements.answered(row) }
                    // An answer to a push no longer claimed changes nothing.
                    if let answered { try db.carryOut(.answered(answered, outcome), at: at) }
                }
            }
            for batch in sent.batched(Self.batchSizes) {
                var arguments: [(any DatabaseValueConvertible)?] = [now, now]
                arguments.reserveCapacity(2 + 3 * batch.count)
                for push in batch { arguments += [push.id, push.status, push.apnsID] }
                arguments += Self.recordSentStatuses.map { $0 }
                try db.run(Self.recordSent[batch.count]!, StatementArguments(arguments))
            }
        }
    }

    package func nextDueDate() async throws -> Date? {
        try await pool.read { db in
            try db.fetchOne("SELECT MIN(next_attempt_at) FROM deliveries WHERE \(OutboxStatements.statusCondition(.claim))") { $0.date(0) } ?? nil
        }
    }

    package func deliveries(_ query: DeliveryQuery) async throws -> [DeliveryRecord] {
        let statement = StoreStatements.deliveries(query)
        return try await pool.read { db in
            let rows = try db.fetchAll(statement.text, statement.sqliteArguments, as: DeliveryRow.init(row:))
            return query.includePayloads ? try Self.withPayloads(db, rows) : rows.map(\.record)
        }
    }

    package func retryDelivery(id: Int64, app: String?, at now: Date) async throws -> DeliveryRetry.Outcome {
        try await write { db in
            guard let failed = try db.fetchOne(StoreStatements.retryCandidate, [id], as: DeliveryRow.init(row:))?.record,
                app == nil || failed.bundleID == app
            else { return .notFound }
            let check = StoreStatements.retryTarget(failed.target, app: failed.bundleID, key: failed.key)
            let target = DeliveryRetry.targetState(failed.target, row: try Row.fetchOne(db, sql: check.text, arguments: check.sqliteArguments))
            let (kind, deviceID, _, channelID) = failed.target.columns
            let newer =
                try db.fetchOne(
                    StoreStatements.newerPush, [failed.bundleID, failed.key, kind, deviceID ?? "", channelID ?? "", id]
                ) { $0.integer(0) } ?? nil
            if let refusal = DeliveryRetry.refusal(status: failed.status, target: target, newerPush: newer) { return .refused(refusal) }
            let rows = try db.fetchAll(StoreStatements.retry, ["retry of push \(id)", now.seconds, now.seconds, id], as: DeliveryRow.init(row:))
            guard let retried = try Self.withPayloads(db, rows).first else { return .notFound }
            return .retried(retried)
        }
    }

    package func pendingDeliveryCount() async throws -> Int {
        try await pool.read { db in try db.fetchOne(StoreStatements.pendingDeliveryCount) { $0[0] as Int } ?? 0 }
    }

    package func deliveryCounts() async throws -> [DeliveryStatus: Int] {
        try await statusCounts("SELECT status, COUNT(*) FROM deliveries GROUP BY status")
    }

    package func waitingAndUnsentCounts() async throws -> [DeliveryStatus: Int] {
        try await statusCounts(StoreStatements.waitingAndUnsentCounts)
    }

    private func statusCounts(_ sql: String) async throws -> [DeliveryStatus: Int] {
        try await pool.read { db in
            var counts: [DeliveryStatus: Int] = [:]
            try db.forEach(sql) { row in counts[try DeliveryStatus(stored: row[0], column: "deliveries.status")] = row[1] }
            return counts
        }
    }
}
