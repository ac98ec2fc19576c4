import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOSSL
import PostgresNIO
import Synchronization

/// Dashboard sessions and leases (`SessionAndLeaseStore`).
extension PostgresStore {
    // MARK: Dashboard sessions

    package func insertDashboardSession(_ session: DashboardSessionRecord) async throws {
        try await transaction { db in
            try await db.run(StoreStatements.deleteExpiredDashboardSessions, [.seconds(session.signedInAt)])
            try await db.run(
                StoreStatements.insertDashboardSession, DashboardSessionRecord.table.arguments(session))
        }
    }

    package func dashboardSession(idHash: Data, at now: Date) async throws -> (session: DashboardSessionRecord, key: APIKeyRecord)? {
        try await rows(StoreStatements.dashboardSession, [.bytes(Array(idHash)), .seconds(now)]).first.map { row in
            (DashboardSessionRecord(row: row, idHash: idHash), try APIKeyRecord(row: row))
        }
    }

    package func deleteDashboardSession(idHash: Data) async throws {
        try await run(StoreStatements.deleteDashboardSession, [.bytes(Array(idHash))])
    }

    // MARK: Instances

    package func takeLease(_ name: String, holder: String, until: Date, at now: Date) async throws -> Bool {
        try await !rows(StoreStatements.takeLease, [.text(name), .text(holder), .seconds(until), .seconds(now)]).isEmpty
    }

    /// LISTENs on its own connection, held while it watches; queued pushes are NOTIFYed in the
    /// transaction that queues them, so a listener hears of them once they are committed.
    package func watchOutbox(_ queued: @escaping @Sendable () -> Void) async throws {
        try await connection { connection in
            try await connection.listen(on: Self.outboxChannel) { notifications in
                for try await _ in notifications { queued() }
            }
        }
    }

    /// One statement takes a token when the refilled bucket holds one (as `TokenBucket.refilled`
    /// computes); nothing comes back when it does not, and the wait is then read.
    package func takeRequest(_ key: String, from bucket: TokenBucket, at now: Date) async throws -> Int? {
        let (burst, seconds, rate): (SQLArgument, SQLArgument, SQLArgument) = (.real(bucket.burst), .seconds(now), .real(bucket.rate))
        let taken = try await rows(
            PreparedStatements.TakeRequest.self, [.text(key), .real(bucket.burst - 1), seconds, burst, seconds, rate, seconds, burst, seconds, rate])
        guard taken.isEmpty else { return nil }
        guard let row = try await rows("SELECT tokens, at FROM rate_buckets WHERE key = ?", [.text(key)]).first,
            let tokens = row.real(0), let last = row.date(1)
        else { return nil }
        return bucket.wait(holding: bucket.refilled(tokens, since: last, at: now))
    }

    /// The channel the instances sharing a database hear of queued pushes on.
    static let outboxChannel = "liverelay_outbox"
}
