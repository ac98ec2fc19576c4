import Foundation
import GRDB
import LiveActivityKit
import Synchronization

/// Dashboard sessions and leases (`SessionAndLeaseStore`).
extension SQLiteStore {
    // MARK: Dashboard sessions

    package func insertDashboardSession(_ session: DashboardSessionRecord) async throws {
        try await write { db in
            try db.run(StoreStatements.deleteExpiredDashboardSessions, [session.signedInAt.seconds])
            try db.run(
                StoreStatements.insertDashboardSession, DashboardSessionRecord.table.arguments(session).sqlite)
        }
    }

    package func dashboardSession(idHash: Data, at now: Date) async throws -> (session: DashboardSessionRecord, key: APIKeyRecord)? {
        try await pool.read { db in
            try db.fetchOne(StoreStatements.dashboardSession, [idHash, now.seconds]) { row in
                (DashboardSessionRecord(row: row, idHash: idHash), try APIKeyRecord(row: row))
            }
        }
    }

    package func deleteDashboardSession(idHash: Data) async throws {
        try await write { db in try db.run(StoreStatements.deleteDashboardSession, [idHash]) }
    }

    // MARK: Instances

    package func takeLease(_ name: String, holder: String, until: Date, at now: Date) async throws -> Bool {
        try await write { db in
            try db.fetchOne(StoreStatements.takeLease, [name, holder, until.seconds, now.seconds]) { _ in true } ?? false
        }
    }
}
