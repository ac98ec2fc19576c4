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

    /// One statement takes up to `count` tokens, as many whole ones as the refilled bucket holds
    /// (as `TokenBucket.refilled` computes), and says how many; nothing comes back when it holds
    /// none, and the wait is then read.
    package func takeRequests(_ key: String, upTo count: Int, from bucket: TokenBucket, at now: Date) async throws -> BucketTake {
        let (seconds, asked): (SQLArgument, SQLArgument) = (.seconds(now), .real(Double(count)))
        let refill: [SQLArgument] = [.real(bucket.burst), seconds, .real(bucket.rate)]
        // A bucket met for the first time is full.
        let first = Double(min(count, Int(bucket.burst)))
        let taken = try await rows(
            PreparedStatements.TakeRequests.self,
            [.text(key), .real(bucket.burst - first), seconds, .real(first)] + refill + [asked] + refill + [asked] + refill + [seconds] + refill)
        if let row = taken.first, let requests = row.real(0) { return .taken(Int(requests)) }
        guard let row = try await rows("SELECT tokens, at FROM rate_buckets WHERE key = ?", [.text(key)]).first,
            let tokens = row.real(0), let last = row.date(1)
        else { return .taken(1) }
        return .wait(seconds: bucket.wait(holding: bucket.refilled(tokens, since: last, at: now)))
    }

    /// The channel the instances sharing a database hear of queued pushes on.
    static let outboxChannel = "liverelay_outbox"
}
