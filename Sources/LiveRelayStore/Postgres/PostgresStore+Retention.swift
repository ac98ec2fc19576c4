import Foundation
import PostgresNIO

/// Retention on PostgreSQL (`RetentionStore`): each batch one transaction. Any instance may run
/// it (the service runs it on the ticker lease's holder); two at once delete disjoint rows or
/// wait for each other's row locks.
extension PostgresStore {
    package func prune(_ kind: PruneKind, before cutoff: Date, limit: Int) async throws -> [String: Int] {
        let limit = SQLArgument.integer(Int64(limit))
        let cutoffArgument = SQLArgument.seconds(cutoff)
        switch kind {
        case .deliveries:
            let below = try await boundary(RetentionStatements.deliveries, cutoff)
            return try await transaction { db in
                let payloads = try await db.rows(RetentionStatements.deleteDeliveries, [.integer(below), cutoffArgument, limit]).map {
                    $0.integer(0) ?? 0
                }
                var freed = 0
                for payload in Set(payloads) {
                    freed += try await db.changed(RetentionStatements.deletePayload, [.integer(payload), .integer(payload)])
                }
                return ["deliveries": payloads.count, "payloads": freed]
            }
        case .webhookDeliveries:
            let below = try await boundary(RetentionStatements.webhookDeliveries, cutoff)
            return try await deleted(kind, RetentionStatements.deleteWebhookDeliveries, [.integer(below), cutoffArgument, limit])
        case .events:
            // Events are numbered when read or posted: those nobody read are numbered now, so that
            // they are found in order with the others.
            try await transaction { db in try await numberEvents(db) }
            let below = try await boundary(RetentionStatements.events, cutoff)
            return try await transaction { db in
                let dropped = try await db.changed(RetentionStatements.deleteWaitingOfDisabled, [.integer(below)])
                let waiting = try await db.rows(RetentionStatements.firstEventWaitingPerApp).map { (app: $0.string(0), first: $0.integer(1) ?? 0) }
                let delete = RetentionStatements.deleteEvents(below: below, cutoff: cutoff, waiting: waiting, limit: limit)
                let deleted = try await db.changed(delete.text, delete.arguments)
                return [kind.table: deleted, "webhook_deliveries": dropped]
            }
        case .schedules: return try await deleted(kind, RetentionStatements.deleteSchedules, [cutoffArgument, limit])
        case .deletedChannels: return try await deleted(kind, RetentionStatements.deleteChannels, [cutoffArgument, limit])
        case .idempotencyKeys: return try await deleted(kind, RetentionStatements.deleteIdempotencyKeys, [cutoffArgument, limit])
        case .dashboardSessions: return try await deleted(kind, RetentionStatements.deleteDashboardSessions, [cutoffArgument, limit])
        case .unusedContractVersions: return try await deleted(kind, RetentionStatements.deleteUnusedContractVersions, [cutoffArgument, limit])
        case .endedActivities:
            return try await transaction { db in
                let keys = try await db.rows(RetentionStatements.endedActivities, [cutoffArgument, limit]).map { ($0.string(0), $0.string(1)) }
                var counts: [String: Int] = ["activities": 0]
                for (app, key) in keys {
                    guard try await db.changed(RetentionStatements.deleteEndedActivity, [.text(app), .text(key), cutoffArgument]) > 0 else {
                        continue
                    }
                    counts["activities", default: 0] += 1
                    for (table, statement) in RetentionStatements.activityDependents {
                        counts[table, default: 0] += try await db.changed(statement, [.text(app), .text(key)])
                    }
                }
                return counts
            }
        }
    }

    package func footprint() async throws -> StoreFootprint {
        var rows: [String: Int] = [:]
        for table in StoreFootprint.counted { rows[table] = try await self.rows("SELECT COUNT(*) FROM \(table)").first?.int(0) ?? 0 }
        let bytes =
            try await self.rows(
                """
                SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = current_schema() AND c.relkind = 'r'
                """
            ).first?.integer(0) ?? 0
        return StoreFootprint(rows: rows, bytes: bytes)
    }

    private func deleted(_ kind: PruneKind, _ sql: String, _ arguments: [SQLArgument]) async throws -> [String: Int] {
        try await connection { db in [kind.table: try await db.changed(sql, arguments)] }
    }

    /// `RetentionStatements.boundary` with a read for each probe, outside the transaction.
    private func boundary(_ table: RetentionStatements.Ordered, _ cutoff: Date) async throws -> Int64 {
        let bounds = try await rows(table.bounds).first.flatMap { row in row.integer(0).flatMap { low in row.integer(1).map { (low, $0) } } }
        return try await RetentionStatements.boundary(bounds: bounds, cutoff: cutoff.timeIntervalSince1970) { id in
            try await rows(table.firstFrom, [.integer(id)]).first.map { (id: $0.integer(0) ?? id, time: $0.real(1) ?? 0) }
        }
    }
}
