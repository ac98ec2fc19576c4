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
    let traceParent: String?

    /// How many placeholders each statement has, counted once.
    static let placeholders = (
        snapshot: PreparedStatements.ChangeSnapshotRead.placeholderCount, queued: PreparedStatements.QueuedChange.placeholderCount,
        handedOver: PreparedStatements.HandedOverChange.placeholderCount
    )

    /// A change written, with the answer to keep with it and when it was accepted.
    struct Written<Outcome: Sendable>: Sendable {
        var accepted: Accepted<Outcome>
        var acceptance: Acceptance
        var acceptedAt: Date
        /// The pushes it queued or handed over, a fan-out's included.
        var pushes: Int
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
        if !supersedesInStatement { try await db.carryOut(decisions, at: at) }
        if ends, snapshot.activity?.state != .ended { try await db.carryOut(.keyEnded(app: app, key: key), at: at) }
        // The budget's exhaustion, recorded by the write when the rules decide a record unless
        // recorded in the hour, as they do.
        let exhaustion = planned.budgetExhausted.map { OutboxRules.decisions(after: .budgetExhausted(app: app, key: key, $0), at: at) } ?? []
        let exhaustionInStatement = exhaustion.count == 1 && exhaustion[0].isRecordUnlessRecorded
        if !exhaustionInStatement { try await db.carryOut(exhaustion, at: at) }

        let pushes = planned.deliveries.count + (planned.fanOut == nil ? 0 : snapshot.liveTokenCount)
        let entry = OutboxRules.entry(count: pushes, handOver: handOver, at: at)
        let handedOver = entry.status != .queued
        let changed = planned.activity
        let fanOut = planned.fanOut
        var arguments = NamedArguments(PreparedStatements.changeWriteParameters(handedOver: handedOver))
        arguments["content_state"] = .text(changed.contentState?.serializedString)
        arguments["stale_date"] = .seconds(changed.staleDate)
        arguments["relevance_score"] = .real(changed.relevanceScore)
        arguments["last_timestamp"] = .integer(changed.lastTimestamp)
        arguments["alert"] = .text(changed.storedAlert)
        arguments["alert_at"] = .seconds(changed.alertAt)
        arguments["state"] = .text(changed.state.rawValue)
        arguments["ended_at"] = .seconds(changed.endedAt)
        arguments["end_reason"] = .text(changed.endReason?.rawValue)
        arguments["dismissal_date"] = .seconds(changed.dismissalDate)
        arguments["app"] = .text(app)
        arguments["key"] = .text(key)
        arguments["version"] = .text(version)
        arguments["payload"] = .bytes(planned.payload)
        arguments["trace_parent"] = .text(traceParent)
        arguments["sends_anything"] = .bool(!planned.deliveries.isEmpty || fanOut != nil)
        arguments.bind("supersede", OutboxStatements.move(keySupersede).arguments)
        arguments["supersede_applies"] = .bool(supersedesInStatement)
        arguments.bind(
            "exhaustion", OutboxStatements.statement(exhaustionInStatement ? exhaustion[0] : PreparedStatements.exhaustionTemplate, at: at).arguments)
        arguments["exhaustion_applies"] = .bool(exhaustionInStatement)
        arguments["listed_status"] = .text(entry.status.rawValue)
        arguments["listed_due"] = .seconds(entry.due)
        arguments["listed_at"] = .seconds(at)
        arguments["listed"] = .text(ListedDelivery.json(planned.deliveries))
        arguments["fan_out_event"] = .text(fanOut?.event.rawValue)
        arguments["fan_out_priority"] = .integer(fanOut.map { Int64($0.priority.rawValue) })
        arguments["fan_out_reason"] = .text(fanOut?.priorityReason)
        arguments["fan_out_expiration"] = .integer(fanOut?.expiration)
        arguments["fan_out_timestamp"] = .integer(fanOut?.timestamp)
        arguments["fan_out_request"] = .text(fanOut?.requestID)
        arguments["fan_out_status"] = .text(entry.status.rawValue)
        arguments["fan_out_due"] = .seconds(entry.due)
        arguments["fan_out_at"] = .seconds(at)
        arguments["fan_out_app"] = .text(app)
        arguments["fan_out_key"] = .text(key)
        arguments["fan_out"] = .bool(fanOut != nil)
        var claimed: [DeliveryRecord] = []
        if handedOver {
            let rows = try await db.rows(
                PreparedStatements.HandedOverChange.self, try arguments.positional(placeholders: Self.placeholders.handedOver))
            guard try rows.first?["written"].decode(Int64.self) == 1 else { return nil }
            claimed = try rows.filter { $0.integer(0) != nil }.map { row in
                var record = try DeliveryRow(row: row).record
                record.payload = planned.payload
                record.traceParent = traceParent
                return record
            }.sorted { $0.id < $1.id }
        } else {
            arguments["notify_channel"] = .text(PostgresStore.outboxChannel)
            let rows = try await db.rows(PreparedStatements.QueuedChange.self, try arguments.positional(placeholders: Self.placeholders.queued))
            guard try rows.first?["written"].decode(Int64.self) == 1 else { return nil }
        }
        // After the change's pushes are written: an end's fan-out goes to the tokens live until now.
        if ends {
            try await db.run(StoreStatements.endKeyTokens, [.text(app), .text(key)])
            if let deleteAfter = planned.channelDeleteAfter {
                try await db.run(StoreStatements.deleteKeyChannelsAfter, [.seconds(deleteAfter), .text(app), .text(key)])
            }
        }
        return Written(
            accepted: Accepted(outcome: outcome, claimed: claimed), acceptance: planned.acceptance, acceptedAt: at, pushes: pushes)
    }

    /// The key as its plan sees it, and the version of its row.
    private func read(_ db: PostgresConnection, locked: Bool) async throws -> (ChangeSnapshot, version: String) {
        // Not counting, the counts' window starts after every push there is.
        var arguments = NamedArguments(PreparedStatements.changeSnapshotParameters)
        arguments["counting"] = .bool(budget.readsTokens)
        arguments["counts_app"] = .text(app)
        arguments["counts_key"] = .text(key)
        arguments["window_start"] = .real(budget.windowStart?.timeIntervalSince1970 ?? .greatestFiniteMagnitude)
        arguments["app"] = .text(app)
        arguments["key"] = .text(key)
        let statement: any PreparedSQL.Type = locked ? PreparedStatements.LockedChangeSnapshotRead.self : PreparedStatements.ChangeSnapshotRead.self
        guard let row = try await db.rows(statement, try arguments.positional(placeholders: Self.placeholders.snapshot)).first else {
            return (ChangeSnapshot(activity: nil), "")
        }
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
        let appVersions = try row["app_versions"].decode([String].self)
        let liveTokens = try devices.indices.map { index in
            ActivityTokenRecord(
                bundleID: app, key: key, deviceID: devices[index], activityID: noActivityID[index] ? nil : activityIDs[index],
                token: tokens[index], frequentPushesEnabled: frequent[index],
                environment: try PushEnvironment(stored: environments[index], column: "activity_tokens.environment"),
                registeredAt: Date(timeIntervalSince1970: registered[index]), state: .live, stateReason: nil,
                appVersion: appVersions[index].isEmpty ? nil : appVersions[index])
        }
        let counts = Dictionary(
            zip(try row["targets"].decode([String].self), try row["counts"].decode([Int64].self).map(Int.init)), uniquingKeysWith: { $0 + $1 })
        let snapshot = ChangeSnapshot(
            activity: activity, liveTokens: liveTokens, liveTokenCount: Int(try row["live"].decode(Int64.self)), priority10Counts: counts,
            awaitingDevices: Int(try row["awaiting"].decode(Int64.self)))
        return (snapshot, try row["version"].decode(String.self))
    }
}

/// What the store's own rules say cannot happen, happened: the request fails without writing.
struct PostgresStoreInconsistency: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) { self.description = description }
}

extension OutboxDecision {
    fileprivate var isRecordUnlessRecorded: Bool {
        if case .recordUnlessRecorded = self { true } else { false }
    }
}
