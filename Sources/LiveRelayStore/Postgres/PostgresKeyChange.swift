import Foundation
import LiveActivityKit
import PostgresNIO

/// An update or end of one key on PostgreSQL: one statement reads what its plan needs
/// (`ChangeSnapshotRead`), one writes what the plan decided (`QueuedChange`, `HandedOverChange`).
struct KeyChange {
    let app: String
    let key: String
    let budget: ChangeBudget
    let handOver: HandOver?

    /// A change written, with the answer to keep with it and when it was accepted.
    struct Written<Outcome: Sendable>: Sendable {
        var accepted: Accepted<Outcome>
        var acceptance: Acceptance
        var acceptedAt: Date
    }

    /// Reads, plans and writes the change; nil when it was not written, unlocked, because the
    /// key's row changed since it was read or the plan needs more than one statement writes.
    func write<Outcome: Sendable>(
        _ db: PostgresConnection, locked: Bool, plan: (ChangeSnapshot) throws -> (ChangePlan, Outcome)
    ) async throws -> Written<Outcome>? {
        var (snapshot, version) = try await read(db, locked: locked)
        if let activity = snapshot.activity, !activity.channelIDs.isEmpty {
            // Its broadcasts supersede their channels' queued pushes, decisions the write does not
            // carry out itself: such a change is made holding the key.
            guard locked else { return nil }
            snapshot.channels = try await db.rows(PreparedStatements.ChannelsOfKey.self, [.text(app), .text(key)]).map(ChannelRecord.init(row:))
        }
        let (planned, outcome) = try plan(snapshot)
        let at = planned.acceptedAt
        let ends = planned.activity.state == .ended
        let decisions = OutboxRules.decisions(after: .accepted(deliveries: planned.deliveries, fanOut: planned.fanOut), at: at)
        let keySupersede = OutboxRules.supersedingKey(app: app, key: key, at: at)
        let supersedesInStatement = decisions == [.move(keySupersede)]
        if !locked && (ends || !(supersedesInStatement || decisions.isEmpty)) { return nil }
        if !supersedesInStatement { try await db.carryOut(decisions) }

        let entry = OutboxRules.entry(
            count: planned.deliveries.count + (planned.fanOut == nil ? 0 : snapshot.liveTokenCount), handOver: handOver, at: at)
        let handedOver = entry.status != .queued
        let changed = planned.activity
        let fanOut = planned.fanOut
        var arguments: [SQLArgument] = [
            .text(changed.contentState?.serializedString), .seconds(changed.staleDate), .real(changed.relevanceScore),
            .integer(changed.lastTimestamp), .text(changed.state.rawValue), .seconds(changed.endedAt), .text(changed.endReason?.rawValue),
            .seconds(changed.dismissalDate), .text(app), .text(key), .text(version),
            .bytes(planned.payload), .bool(!planned.deliveries.isEmpty || fanOut != nil),
        ]
        arguments += OutboxStatements.move(keySupersede).arguments + [.bool(supersedesInStatement)]
        arguments += [.text(entry.status.rawValue), .seconds(entry.due), .seconds(at), .text(ListedDelivery.json(planned.deliveries))]
        arguments += [
            .text(fanOut?.event.rawValue), .integer(fanOut.map { Int64($0.priority.rawValue) }), .text(fanOut?.priorityReason),
            .integer(fanOut?.expiration),
            .integer(fanOut?.timestamp), .text(fanOut?.requestID), .text(entry.status.rawValue), .seconds(entry.due), .seconds(at),
            .text(app), .text(key), .bool(fanOut != nil),
        ]
        var claimed: [DeliveryRecord] = []
        if handedOver {
            let rows = try await db.rows(PreparedStatements.HandedOverChange.self, arguments)
            guard try rows.first?["written"].decode(Int64.self) == 1 else { return nil }
            claimed = try rows.filter { $0.integer(0) != nil }.map { row in
                var record = try DeliveryRow(row: row).record
                record.payload = planned.payload
                return record
            }.sorted { $0.id < $1.id }
        } else {
            let rows = try await db.rows(PreparedStatements.QueuedChange.self, arguments + [.text(PostgresStore.outboxChannel)])
            guard try rows.first?["written"].decode(Int64.self) == 1 else { return nil }
        }
        // After the change's pushes are written: an end's fan-out goes to the tokens live until now.
        if ends {
            try await db.run(StoreStatements.endKeyTokens, [.text(app), .text(key)])
            if let deleteAfter = planned.channelDeleteAfter {
                try await db.run(StoreStatements.deleteKeyChannelsAfter, [.seconds(deleteAfter), .text(app), .text(key)])
            }
        }
        return Written(accepted: Accepted(outcome: outcome, claimed: claimed), acceptance: planned.acceptance, acceptedAt: at)
    }

    /// The key as its plan sees it, and the version of its row.
    private func read(_ db: PostgresConnection, locked: Bool) async throws -> (ChangeSnapshot, version: String) {
        // Not counting, the counts' window starts after every push there is.
        let arguments: [SQLArgument] = [
            .bool(budget != .notCounted), .text(app), .text(key), .real(budget.windowStart?.timeIntervalSince1970 ?? .greatestFiniteMagnitude),
            .text(app), .text(key),
        ]
        let statement: any PreparedSQL.Type = locked ? PreparedStatements.LockedChangeSnapshotRead.self : PreparedStatements.ChangeSnapshotRead.self
        guard let row = try await db.rows(statement, arguments).first else { return (ChangeSnapshot(activity: nil), "") }
        var activity = try ActivityRecord(row: row)
        for (environment, id) in zip(try row["environments"].decode([String].self), try row["ids"].decode([String].self)) {
            activity.channelIDs[try PushEnvironment(stored: environment, column: "channels.environment")] = id
        }
        let devices = try row["device_ids"].decode([String].self)
        let activityIDs = try row["activity_ids"].decode([String].self)
        let noActivityID = try row["no_activity_ids"].decode([Bool].self)
        let tokens = try row["tokens"].decode([String].self)
        let frequent = try row["frequent"].decode([Bool].self)
        let registered = try row["registered"].decode([Double].self)
        let environments = try row["token_environments"].decode([String].self)
        let liveTokens = try devices.indices.map { index in
            ActivityTokenRecord(
                bundleID: app, key: key, deviceID: devices[index], activityID: noActivityID[index] ? nil : activityIDs[index],
                token: tokens[index], frequentPushesEnabled: frequent[index],
                environment: try PushEnvironment(stored: environments[index], column: "activity_tokens.environment"),
                registeredAt: Date(timeIntervalSince1970: registered[index]), state: .live, stateReason: nil)
        }
        let counts = Dictionary(
            zip(try row["targets"].decode([String].self), try row["counts"].decode([Int64].self).map(Int.init)), uniquingKeysWith: { $0 + $1 })
        let snapshot = ChangeSnapshot(
            activity: activity, liveTokens: liveTokens, liveTokenCount: Int(try row["live"].decode(Int64.self)), priority10Counts: counts)
        return (snapshot, try row["version"].decode(String.self))
    }
}

/// What the store's own rules say cannot happen, happened: the request fails without writing.
struct PostgresStoreInconsistency: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}
