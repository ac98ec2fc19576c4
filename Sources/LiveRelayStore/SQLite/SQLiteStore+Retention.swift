import Foundation
import GRDB

/// Retention on SQLite (`RetentionStore`): each batch one write transaction.
extension SQLiteStore {
    package func prune(_ kind: PruneKind, before cutoff: Date, limit: Int) async throws -> [String: Int] {
        let limit = Int64(limit)
        switch kind {
        case .deliveries:
            let below = try await boundary(RetentionStatements.deliveries, cutoff)
            return try await write { db in
                let payloads = try db.fetchAll(RetentionStatements.deleteDeliveries, [below, cutoff.seconds, limit]) { row -> Int64 in row[0] }
                var freed = 0
                for payload in Set(payloads) {
                    try db.run(RetentionStatements.deletePayload, [payload, payload])
                    freed += db.changesCount
                }
                return ["deliveries": payloads.count, "payloads": freed]
            }
        case .webhookDeliveries:
            let below = try await boundary(RetentionStatements.webhookDeliveries, cutoff)
            return try await deleted(kind, RetentionStatements.deleteWebhookDeliveries, [below, cutoff.seconds, limit])
        case .events:
            let below = try await boundary(RetentionStatements.events, cutoff)
            return try await write { db in
                try db.run(RetentionStatements.deleteWaitingOfDisabled, [below])
                let dropped = db.changesCount
                let waiting = try db.fetchAll(RetentionStatements.firstEventWaitingPerApp) { row -> (app: String, first: Int64) in (row[0], row[1]) }
                let delete = RetentionStatements.deleteEvents(below: below, cutoff: cutoff, waiting: waiting, limit: .integer(limit))
                try db.execute(sql: delete.text, arguments: delete.sqliteArguments)
                return [kind.table: db.changesCount, "webhook_deliveries": dropped]
            }
        case .schedules: return try await deleted(kind, RetentionStatements.deleteSchedules, [cutoff.seconds, limit])
        case .deletedChannels: return try await deleted(kind, RetentionStatements.deleteChannels, [cutoff.seconds, limit])
        case .idempotencyKeys: return try await deleted(kind, RetentionStatements.deleteIdempotencyKeys, [cutoff.seconds, limit])
        case .dashboardSessions: return try await deleted(kind, RetentionStatements.deleteDashboardSessions, [cutoff.seconds, limit])
        case .unusedContractVersions: return try await deleted(kind, RetentionStatements.deleteUnusedContractVersions, [cutoff.seconds, limit])
        case .endedActivities:
            return try await write { db in
                let keys = try db.fetchAll(RetentionStatements.endedActivities, [cutoff.seconds, limit]) { row -> (String, String) in (row[0], row[1])
                }
                var counts: [String: Int] = ["activities": 0]
                for (app, key) in keys {
                    try db.run(RetentionStatements.deleteEndedActivity, [app, key, cutoff.seconds])
                    guard db.changesCount > 0 else { continue }
                    counts["activities", default: 0] += 1
                    for (table, statement) in RetentionStatements.activityDependents {
                        try db.run(statement, [app, key])
                        counts[table, default: 0] += db.changesCount
                    }
                }
                return counts
            }
        }
    }

    package func footprint() async throws -> StoreFootprint {
        try await pool.read { db in
            var rows: [String: Int] = [:]
            for table in StoreFootprint.counted { rows[table] = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0 }
            let pages = try Int64.fetchOne(db, sql: "PRAGMA page_count") ?? 0
            let pageSize = try Int64.fetchOne(db, sql: "PRAGMA page_size") ?? 0
            return StoreFootprint(rows: rows, bytes: pages * pageSize)
        }
    }

    private func deleted(_ kind: PruneKind, _ sql: String, _ arguments: StatementArguments) async throws -> [String: Int] {
        try await write { db in
            try db.run(sql, arguments)
            return [kind.table: db.changesCount]
        }
    }

    /// `RetentionStatements.boundary` with a read for each probe, outside the write transaction.
    private func boundary(_ table: RetentionStatements.Ordered, _ cutoff: Date) async throws -> Int64 {
        let bounds = try await pool.read { db -> (lowest: Int64, highest: Int64)? in
            guard let row = try Row.fetchOne(db, sql: table.bounds), let lowest = row[0] as Int64?, let highest = row[1] as Int64? else { return nil }
            return (lowest, highest)
        }
        return try await RetentionStatements.boundary(bounds: bounds, cutoff: cutoff.seconds) { id in
            try await pool.read { db in
                try Row.fetchOne(db, sql: table.firstFrom, arguments: [id]).map { row in (id: row[0] as Int64, time: row[1] as Double) }
            }
        }
    }
}
