import Foundation
import LiveActivityKit

/// The statements both engines run as written, with `?` for each argument (PostgreSQL's are
/// numbered from them): where the SQL of the two is the same, it is here once. What differs
/// stays with each engine: SQLite's batched `VALUES` and id ranges, PostgreSQL's locks, arrays and
/// `RETURNING` ids. The outbox's own statements are `OutboxStatements`.
enum StoreStatements {
    static let saveApp = """
        INSERT INTO apps \(AppRecord.table.insertion)
        ON CONFLICT (bundle_id) DO UPDATE SET
            team_id = excluded.team_id, key_id = excluded.key_id, signing_key = excluded.signing_key, updated_at = excluded.updated_at,
            ungranted_reports = excluded.ungranted_reports
        """

    static let insertAPIKey = "INSERT INTO api_keys \(APIKeyRecord.table.insertion)"

    static let savePushToStartToken = """
        INSERT INTO push_to_start_tokens \(PushToStartTokenRecord.table.insertion)
        ON CONFLICT (bundle_id, device_id, attributes_type) DO UPDATE SET
            user_id = excluded.user_id, token = excluded.token, frequent_pushes = excluded.frequent_pushes,
            environment = excluded.environment, updated_at = excluded.updated_at, dead_reason = NULL,
            system_version = excluded.system_version, app_version = excluded.app_version
        """

    /// The app on a device said its version (app, device, version): every token it holds is the
    /// new version's now (an update replaces the widget extension too, so its live activities
    /// decode as that version does).
    ///
    /// SQLite is named the index of a device's update tokens: planning without statistics, it
    /// prefers the first column of a table's primary key (the app) to any index, and read every
    /// live token of the app at each report (11 ms at 100,000).
    static func updateDeviceAppVersion(namingIndex: Bool) -> [String] {
        [
            "UPDATE push_to_start_tokens SET app_version = ? WHERE bundle_id = ? AND device_id = ? AND app_version IS DISTINCT FROM ?",
            "UPDATE activity_tokens \(namingIndex ? "INDEXED BY activity_tokens_by_device " : "")SET app_version = ? "
                + "WHERE bundle_id = ? AND device_id = ? AND state = 'live' AND app_version IS DISTINCT FROM ?",
        ]
    }

    /// A device's live update tokens (`updateDeviceAppVersion`). Led by the device, so that
    /// nothing takes it for an app's.
    static let activityTokensByDeviceIndex = "CREATE INDEX activity_tokens_by_device ON activity_tokens (device_id, bundle_id) WHERE state = 'live'"

    /// Migration 0031: the token indexes that a read of a key's tokens could take for its own.
    static let tokenIndexes =
        ["DROP INDEX push_to_start_tokens_by_app_version", "DROP INDEX activity_tokens_by_app_version"] + RetentionStatements.tokensByAppVersion
        + [activityTokensByDeviceIndex]

    /// The same push-to-start token under another device id of the app (app, token, device): the
    /// app lost its device id (a reinstall, a restore) and made a new one. Kept twice, a start would
    /// go twice to one iPhone and show two activities; the newest report holds it.
    static let forgetTokenOfOtherDevices = "DELETE FROM push_to_start_tokens WHERE bundle_id = ? AND token = ? AND device_id != ?"

    /// Finds a push-to-start token by its value (`forgetTokenOfOtherDevices`).
    static let pushToStartTokensByTokenIndex = "CREATE INDEX push_to_start_tokens_by_token ON push_to_start_tokens (bundle_id, token)"

    /// A device's push-to-start tokens for an app, every type: Live Activities were switched off.
    static let withdrawPushToStartTokens = "DELETE FROM push_to_start_tokens WHERE bundle_id = ? AND device_id = ?"

    // MARK: Widget and control tokens

    /// A device's tokens of a push type for an app (app, device, type): all replaced at each report.
    static let deleteSurfaceTokens = "DELETE FROM surface_tokens WHERE bundle_id = ? AND device_id = ? AND push_type = ?"

    static let insertSurfaceToken = "INSERT INTO surface_tokens \(SurfaceTokenRecord.table.insertion)"

    /// The token held by another device of the app (app, token, device): it moved.
    static let forgetSurfaceTokenOfOtherDevices = "DELETE FROM surface_tokens WHERE bundle_id = ? AND token = ? AND device_id != ?"

    static let surfaceTokensOfDevice =
        "SELECT \(SurfaceTokenRecord.columns) FROM surface_tokens WHERE device_id = ? ORDER BY bundle_id, push_type, kind"

    /// The table, with the engine's type for seconds since 1970.
    static func surfaceTokensTable(seconds: String) -> String {
        """
        CREATE TABLE surface_tokens (
            bundle_id TEXT NOT NULL, device_id TEXT NOT NULL, push_type TEXT NOT NULL, kind TEXT NOT NULL, token TEXT NOT NULL,
            widgets TEXT, environment TEXT NOT NULL, user_id TEXT, app_version TEXT, updated_at \(seconds) NOT NULL,
            PRIMARY KEY (bundle_id, device_id, push_type, kind))
        """
    }

    /// The app's tokens of a push type that an audience holds, by device and kind.
    static func surfaceTokens(app: String, type: ReloadPushType, audience: Audience) -> SQLStatement {
        var statement = SQLStatement(
            text: "SELECT \(SurfaceTokenRecord.columns) FROM surface_tokens WHERE bundle_id = ? AND push_type = ?",
            arguments: [.text(app), .text(type.rawValue)])
        switch audience {
        case .everyone: break
        case .devices(let ids), .users(let ids):
            let column = if case .devices = audience { "device_id" } else { "user_id" }
            statement.text += " AND \(column) IN (\(SQLStatement.marks(max(ids.count, 1))))"
            statement.arguments += ids.isEmpty ? [.text("")] : ids.map { .text($0) }
        }
        statement.text += " ORDER BY device_id, kind"
        return statement
    }

    /// Each device's reloads of a push type queued, on their way or sent since a time (app,
    /// target, since): what the device's reload budget has spent (`deliveries_reloads`).
    static let recentReloads = """
        SELECT device_id, COUNT(*) FROM deliveries
        WHERE bundle_id = ? AND event = 'reload' AND target = ? AND created_at >= ? AND status IN ('queued', 'sending', 'sent')
        GROUP BY device_id
        """

    /// Widget and control tokens by value (`forgetSurfaceTokenOfOtherDevices`, a `410`'s token).
    static let surfaceTokensByTokenIndex = "CREATE INDEX surface_tokens_by_token ON surface_tokens (bundle_id, token)"

    /// A device's update token under a key, live (again): the record's state is `live`.
    static let saveActivityToken = """
        INSERT INTO activity_tokens \(ActivityTokenRecord.table.insertion)
        ON CONFLICT (bundle_id, key, device_id) DO UPDATE SET
            activity_id = excluded.activity_id, token = excluded.token, frequent_pushes = excluded.frequent_pushes,
            registered_at = excluded.registered_at, state = 'live', state_reason = NULL, environment = excluded.environment,
            reported_by = excluded.reported_by, app_version = excluded.app_version,
            last_delivery_id = CASE WHEN activity_tokens.token = excluded.token THEN activity_tokens.last_delivery_id END
        """

    /// A device's channel-bound activity under a key, listening (again): the record's state is `live`.
    static let saveChannelListener = """
        INSERT INTO channel_listeners \(ChannelListenerRecord.table.insertion)
        ON CONFLICT (bundle_id, key, device_id) DO UPDATE SET
            activity_id = excluded.activity_id, channel_id = excluded.channel_id, environment = excluded.environment,
            registered_at = excluded.registered_at, state = 'live', state_reason = NULL, reported_by = excluded.reported_by
        """

    static let channelListeners =
        "SELECT \(ChannelListenerRecord.columns) FROM channel_listeners WHERE bundle_id = ? AND key = ? ORDER BY device_id"

    /// A page of events after a place in the log, in order; the query's filters as arguments.
    static func events(_ query: EventQuery) -> SQLStatement {
        var filter = SQLConditions()
        filter.add("seq > ?", .integer(query.after))
        if let app = query.bundleID { filter.add("bundle_id = ?", .text(app)) }
        if let key = query.key { filter.add("key = ?", .text(key)) }
        if let types = query.types, !types.isEmpty {
            let sorted = types.map(\.rawValue).sorted()
            filter.add("type IN (\(SQLStatement.marks(sorted.count)))", sorted.map { .text($0) })
        }
        return SQLStatement(
            text: "SELECT \(EventRecord.columns) FROM events \(filter.clause) ORDER BY seq\(query.newestFirst ? " DESC" : "") LIMIT ?",
            arguments: filter.arguments + [.integer(Int64(query.limit))])
    }

    /// Push-to-starts APNs accepted in a span of time (after, before) whose device reported no
    /// activity under their key and has no `activity.start_unconfirmed` for it yet, oldest first.
    static let unconfirmedStarts = """
        SELECT d.id, d.bundle_id, d.key, d.device_id, d.environment, d.apns_id, d.finished_at FROM deliveries d
        WHERE d.event = 'start' AND d.status = 'sent' AND d.finished_at > ? AND d.finished_at <= ?
            AND NOT EXISTS (SELECT 1 FROM activity_tokens t WHERE t.bundle_id = d.bundle_id AND t.key = d.key AND t.device_id = d.device_id)
            AND NOT EXISTS (SELECT 1 FROM channel_listeners l WHERE l.bundle_id = d.bundle_id AND l.key = d.key AND l.device_id = d.device_id)
            AND NOT EXISTS (
                SELECT 1 FROM events e
                WHERE e.bundle_id = d.bundle_id AND e.key = d.key AND e.device_id = d.device_id AND e.type = 'activity.start_unconfirmed')
        ORDER BY d.finished_at, d.id LIMIT 1000
        """

    /// The event of an `unconfirmedStarts` row.
    static func unconfirmedStart(_ row: some StoreRow, window: TimeInterval) throws -> NewEvent {
        var data: JSONValue.Members = [("deliveryID", .integer(row.integer(0) ?? 0))]
        if let apnsID = row.text(5) { data.append(("apnsID", .string(apnsID))) }
        if let sent = row.date(6) { data.append(("sentAt", .string(sent.iso8601))) }
        data.append(("waitedSeconds", .integer(Int64(window))))
        return NewEvent(
            .activityStartUnconfirmed, bundleID: row.string(1), key: row.string(2), environment: try row.value(4, "deliveries.environment"),
            deviceID: row.text(3), data: data)
    }

    /// A channel marked deleted, once (id, when): the first marking's time stays, and it is
    /// written with the `channel.deleted` event of its key, before the mark.
    static func channelDeleted(id: String, at: Date) -> [SQLStatement] {
        let data = JSONValue.object([("channelID", .string(id))]).serializedString
        return [
            SQLStatement(
                text: """
                    INSERT INTO events (id, type, bundle_id, environment, key, device_id, occurred_at, data)
                    SELECT ?, ?, bundle_id, environment, COALESCE(key, ''), NULL, ?, ? FROM channels WHERE channel_id = ? AND deleted_at IS NULL
                    """,
                arguments: [.text(NewEvent.newID()), .text(EventType.channelDeleted.rawValue), .seconds(at), .text(data), .text(id)]),
            SQLStatement(
                text: "UPDATE channels SET deleted_at = ? WHERE channel_id = ? AND deleted_at IS NULL", arguments: [.seconds(at), .text(id)]),
        ]
    }

    /// The state of a device's token under a key, if it has one (app, key, device).
    static let tokenState = "SELECT state FROM activity_tokens WHERE bundle_id = ? AND key = ? AND device_id = ?"

    static let listenerState = "SELECT state FROM channel_listeners WHERE bundle_id = ? AND key = ? AND device_id = ?"

    /// How many live activities the device has under a key, token or channel-bound (app, key, device twice).
    static let liveOnDevice = """
        SELECT (SELECT COUNT(*) FROM activity_tokens WHERE bundle_id = ? AND key = ? AND device_id = ? AND state = 'live')
            + (SELECT COUNT(*) FROM channel_listeners WHERE bundle_id = ? AND key = ? AND device_id = ? AND state = 'live')
        """

    /// The device's end of its activity under a key, token or channel-bound: the same arguments
    /// for each (state, reason, app, key, device).
    static let endOnDevice = [
        "UPDATE activity_tokens SET state = ?, state_reason = ? WHERE bundle_id = ? AND key = ? AND device_id = ?",
        "UPDATE channel_listeners SET state = ?, state_reason = ? WHERE bundle_id = ? AND key = ? AND device_id = ?",
    ]

    static let insertActivity = "INSERT INTO activities \(ActivityRecord.table.insertion)"

    static let insertActivityChannel = "INSERT INTO activity_channels (bundle_id, key, environment, channel_id) VALUES (?, ?, ?, ?)"

    /// A key (app, key), without its channels (`activityChannels`).
    static let activity = "SELECT \(ActivityRecord.columns) FROM activities WHERE bundle_id = ? AND key = ?"

    static let activityChannels = "SELECT environment, channel_id FROM activity_channels WHERE bundle_id = ? AND key = ?"

    /// The ids of the channels of the app's key given as the statement's two arguments.
    static let channelsOfKey = "SELECT channel_id FROM activity_channels WHERE bundle_id = ? AND key = ?"

    static let channelsOfKeyRecords = "SELECT \(ChannelRecord.columns) FROM channels WHERE channel_id IN (\(channelsOfKey))"

    static let liveTokens =
        "SELECT \(ActivityTokenRecord.columns) FROM activity_tokens WHERE bundle_id = ? AND key = ? AND state = 'live' ORDER BY device_id"

    static let liveTokenCount = "SELECT COUNT(*) FROM activity_tokens WHERE bundle_id = ? AND key = ? AND state = 'live'"

    /// A key's pushes that can count against its priority-10 budget (app, key): the rows of
    /// `deliveries_priority10`, whose condition this repeats so that the index applies.
    private static let priority10Rows = "deliveries WHERE bundle_id = ? AND key = ? AND target != 'push-to-start' AND priority = 10"

    /// A key's pushes that count against its priority-10 budget since a time (app, key, since).
    private static let priority10Pushes = "FROM \(priority10Rows) AND created_at >= ? AND \(OutboxStatements.budgetCondition)"

    /// `priority10Pushes` per device or channel.
    static let priority10Counts = "SELECT COALESCE(device_id, channel_id, ''), COUNT(*) \(priority10Pushes) GROUP BY 1"

    /// The index of the pushes that can count against a budget, by key and time, then device: a
    /// change's pushes all share their time, so a fan-out appends to it (issue 59).
    static let priority10Index =
        "CREATE INDEX deliveries_priority10 ON deliveries (bundle_id, key, created_at, device_id) WHERE priority = 10 AND target != 'push-to-start'"

    // MARK: An update token's last result

    /// A key's update tokens by device, each with the answer to its newest push that was
    /// attempted (app, key).
    static let activityTokensWithLastResult = """
        SELECT \(ActivityTokenRecord.table.list("t")), d.apns_status, d.apns_reason, d.attempted_at
        FROM activity_tokens t LEFT JOIN deliveries d ON d.id = t.last_delivery_id
        WHERE t.bundle_id = ? AND t.key = ? ORDER BY t.device_id
        """

    /// What marks a token's newest attempted push (`activity_tokens.last_delivery_id`): a push
    /// to it that is answered raises the mark, never lowers it; a report of another token clears
    /// it (`saveActivityToken`). Kept with the token, since finding it in the history needs an
    /// index that orders a key's pushes by device, and every fan-out would write across all of
    /// it (issue 59). The trigger keeps the rule for every statement that records an answer.
    static let lastDeliveryRule = (
        condition: "NEW.target = 'activity' AND NEW.attempts > OLD.attempts",
        mark: """
        UPDATE activity_tokens SET last_delivery_id = NEW.id
        WHERE bundle_id = NEW.bundle_id AND key = NEW.key AND device_id = NEW.device_id AND token = NEW.token
            AND (last_delivery_id IS NULL OR last_delivery_id < NEW.id);
        """
    )

    /// `lastDeliveryRule` on SQLite.
    static let sqliteLastDeliveryTrigger = """
        CREATE TRIGGER deliveries_mark_token AFTER UPDATE OF attempts ON deliveries
        WHEN \(lastDeliveryRule.condition)
        BEGIN \(lastDeliveryRule.mark) END
        """

    /// `lastDeliveryRule` on PostgreSQL: a function, and its trigger.
    static let postgresLastDeliveryTrigger = [
        """
        CREATE FUNCTION deliveries_mark_token() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN \(lastDeliveryRule.mark) RETURN NULL; END $$
        """,
        """
        CREATE TRIGGER deliveries_mark_token AFTER UPDATE OF attempts ON deliveries FOR EACH ROW
        WHEN (\(lastDeliveryRule.condition)) EXECUTE FUNCTION deliveries_mark_token()
        """,
    ]

    /// The marks of the tokens a store kept before them, read from the history at the migration,
    /// by the index that orders a key's pushes by device, before it goes (its order, newest first:
    /// `MAX(id)` would be read from the key's newest push back).
    static let markLastDeliveries = """
        UPDATE activity_tokens SET last_delivery_id = (
            SELECT d.id FROM deliveries d
            WHERE d.bundle_id = activity_tokens.bundle_id AND d.key = activity_tokens.key AND d.device_id = activity_tokens.device_id
                AND d.token = activity_tokens.token AND d.target = 'activity' AND d.attempts > 0
            ORDER BY d.created_at DESC, d.id DESC LIMIT 1)
        """

    /// Migration 0030, on both engines but for the trigger's form and the column's type (issue
    /// 59): a key's history is no longer ordered by device, so that a fan-out appends.
    static func historyWithoutDeviceOrder(trigger: [String], idType: String) -> [String] {
        ["ALTER TABLE activity_tokens ADD COLUMN last_delivery_id \(idType)", markLastDeliveries] + trigger + [
            "DROP INDEX deliveries_by_key", "DROP INDEX deliveries_priority10", "DROP INDEX deliveries_queued_by_device", priority10Index,
            byTimestampIndex, "CREATE INDEX deliveries_reloads ON deliveries (bundle_id, target, created_at) WHERE key = ''",
            queuedByTargetIndex,
        ]
    }

    // MARK: A key's latest state and the devices that report late

    /// The devices a key's start was sent to, by key and device.
    static let startsByDeviceIndex =
        "CREATE INDEX deliveries_starts_by_device ON deliveries (bundle_id, key, device_id) WHERE event = 'start'"

    /// An app's pushes by `timestamp`, then key and device: whether a device was sent a given
    /// change of a key (`catchUpReads`). A change's timestamp is past every earlier one of its key
    /// and near the clock, so a fan-out appends to it. The key comes after the timestamp so that
    /// SQLite, which plans without statistics, never takes it for a key's pushes: those are read
    /// by the indexes that hold only what the read wants (a key's starts, its queued pushes).
    /// No index orders a key's whole history by device: a fan-out would write into every page of
    /// it (issue 59).
    static let byTimestampIndex = "CREATE INDEX deliveries_by_timestamp ON deliveries (bundle_id, timestamp, key, device_id)"

    /// A key's queued pushes by kind, then device: those a change passes over, a report or a dead
    /// token skips, an expiry drops. Each selection names a kind: with the app and the key alone,
    /// SQLite (which plans without statistics) took the key's whole history by
    /// `deliveries_by_key_newest` instead (1.2 s for a fan-out's key of 3 million pushes).
    static let queuedByTargetIndex =
        "CREATE INDEX deliveries_queued_by_target ON deliveries (bundle_id, key, target, device_id) WHERE status = 'queued'"

    /// An app's reloads by push type and time (`recentReloads`): a day's, not all it ever sent.
    /// A partial index's condition never compares a column that statements bind with a value:
    /// SQLite compiles such a statement again at each new value of that argument. Its first
    /// form, `WHERE key = ''`, recompiled three statements of every change of a key (issue 59).
    static let reloadsIndex = [
        "DROP INDEX deliveries_reloads",
        "CREATE INDEX deliveries_reloads ON deliveries (bundle_id, target, created_at) WHERE event = 'reload'",
    ]

    /// The pushes that ended unsent (`DeliveryStatus.endedUnsent`) by their own index (by status,
    /// then id), so that the dashboard and `/metrics` count them and a page of them is read
    /// without reading the whole history: with 10 million pushes, the counts took 3 s, and a page
    /// of failures 1.8 s when none had failed.
    static let unsentCondition = "status IN (\(DeliveryStatus.endedUnsent.map { "'\($0.rawValue)'" }.joined(separator: ", ")))"
    static let unsentIndex = "CREATE INDEX deliveries_unsent ON deliveries (status, id) WHERE \(unsentCondition)"

    /// The statuses of pushes that reach, or may still reach, their device.
    private static let reaching = "status IN ('queued', 'sending', 'sent')"

    /// What the token of a device that reports late is read with, in one row:
    /// - whether the device was sent (or is still to be sent) the key's latest change: a push of
    ///   its `timestamp`, which no other change of the key has (`ChangePlanner` gives each one
    ///   past the last). A start skipped unsent reached it all the same: only its device's report
    ///   skips one whose token lives.
    /// - its priority-10 pushes under the key since the budget window began, found by seeking
    ///   each moment the key pushed at priority 10 in the window (a loose index scan of
    ///   `deliveries_priority10`): the read costs the key's changes in the window, not its devices.
    static func catchUpReads(app: String, key: String, deviceID: String, latest: Int64, since: Date) -> SQLStatement {
        let appKey: [SQLArgument] = [.text(app), .text(key)]
        return SQLStatement(
            text: """
                SELECT EXISTS (
                        SELECT 1 FROM deliveries WHERE bundle_id = ? AND timestamp = ? AND key = ? AND device_id = ?
                            AND (\(reaching) OR (event = 'start' AND status = 'skipped'))),
                    (WITH RECURSIVE moments (at) AS (
                            SELECT MIN(created_at) FROM \(priority10Rows) AND created_at >= ?
                            UNION ALL
                            SELECT (SELECT MIN(created_at) FROM \(priority10Rows) AND created_at > moments.at) FROM moments WHERE at IS NOT NULL)
                        SELECT COUNT(*) FROM moments CROSS JOIN \(priority10Rows) AND created_at = moments.at AND device_id = ?
                            AND \(OutboxStatements.budgetCondition))
                """,
            arguments: [.text(app), .integer(latest), .text(key), .text(deviceID)] + appKey + [.seconds(since)] + appKey + appKey + [.text(deviceID)])
    }

    /// Whether a device belongs to a key: its start was sent to it, or it reported an update token
    /// or a channel listener under the key ((app, key, device) three times).
    static let deviceKnownToKey = """
        SELECT EXISTS (SELECT 1 FROM deliveries WHERE bundle_id = ? AND key = ? AND device_id = ? AND event = 'start')
            OR EXISTS (SELECT 1 FROM activity_tokens WHERE bundle_id = ? AND key = ? AND device_id = ?)
            OR EXISTS (SELECT 1 FROM channel_listeners WHERE bundle_id = ? AND key = ? AND device_id = ?)
        """

    /// The devices a key's start was sent to (or is still to be sent to) that have reported
    /// neither an update token nor a channel listener under it yet (app, key): a change holds
    /// their share, and each is caught up when it reports.
    static let awaitingDevices = awaitingDevices(app: "?", key: "?")

    /// `awaitingDevices` of the key an enclosing query names (its app and key as SQL).
    static func awaitingDevices(app: String, key: String) -> String {
        """
        SELECT COUNT(DISTINCT s.device_id) FROM deliveries s
        WHERE s.bundle_id = \(app) AND s.key = \(key) AND s.event = 'start' AND s.\(reaching)
            AND NOT EXISTS (SELECT 1 FROM activity_tokens t WHERE t.bundle_id = s.bundle_id AND t.key = s.key AND t.device_id = s.device_id)
            AND NOT EXISTS (
                SELECT 1 FROM channel_listeners l WHERE l.bundle_id = s.bundle_id AND l.key = s.key AND l.device_id = s.device_id)
        """
    }

    static let endKeyTokens =
        "UPDATE activity_tokens SET state = 'ended', state_reason = 'key ended' WHERE bundle_id = ? AND key = ? AND state = 'live'"

    /// `endKeyTokens` for one device, once the end it was caught up with is queued (app, key, device).
    static let endDeviceToken = endKeyTokens + " AND device_id = ?"

    static let deleteKeyChannelsAfter =
        "UPDATE channels SET delete_after = ? WHERE channel_id IN (\(channelsOfKey)) AND deleted_at IS NULL"

    static let expireActivity =
        "UPDATE activities SET state = 'ended', ended_at = ?, end_reason = '\(ActivityEndReason.expired.rawValue)' WHERE bundle_id = ? AND key = ?"

    static let expireTokens =
        "UPDATE activity_tokens SET state = 'ended', state_reason = 'expired' WHERE bundle_id = ? AND key = ? AND state = 'live'"

    /// The app's activities started before a date, active or ended at 8 hours: what
    /// `restartActivities` starts again (the app, the date).
    private static let restartable = """
        SELECT bundle_id, key FROM activities WHERE bundle_id = ? AND started_at < ?
            AND (state = 'active' OR end_reason = '\(ActivityEndReason.expired.rawValue)')
        """

    /// Their tokens the 8 hours ended, live again (`restartable`'s arguments).
    static let restartTokens = """
        UPDATE activity_tokens SET state = 'live', state_reason = NULL
        WHERE state = 'ended' AND state_reason = 'expired' AND (bundle_id, key) IN (\(restartable))
        """

    /// Then the activities, active and started at the first argument (`restartable`'s after it).
    static let restartActivities = """
        UPDATE activities SET state = 'active', started_at = ?, ended_at = NULL, end_reason = NULL
        WHERE (bundle_id, key) IN (\(restartable))
        """

    static let insertSchedule = "INSERT INTO schedules \(ScheduleRecord.table.insertion)"

    /// The pushes waiting to be sent or being sent (`deliveries_due`'s condition, so that index answers).
    static let pendingDeliveryCount = "SELECT COUNT(*) FROM deliveries WHERE \(OutboxStatements.claimableCondition)"
    /// By status, every push but those sent, from the indexes of claimable and of unsent pushes.
    static let waitingAndUnsentCounts = """
        SELECT status, COUNT(*) FROM deliveries WHERE \(OutboxStatements.claimableCondition) GROUP BY status
        UNION ALL SELECT status, COUNT(*) FROM deliveries WHERE \(unsentCondition) GROUP BY status
        """

    static let insertIdempotencyKey =
        "INSERT INTO idempotency_keys (api_key_id, key, request_hash, answer, created_at) VALUES (?, ?, ?, ?, ?)"
    static let idempotentAnswer = "SELECT request_hash, answer FROM idempotency_keys WHERE api_key_id = ? AND key = ?"

    static let scheduleDone = "UPDATE schedules SET state = 'done', result = ? WHERE id = ? AND state = 'pending'"

    static let saveContract = """
        INSERT INTO contracts \(ContractRecord.table.insertion)
        ON CONFLICT (bundle_id, attributes_type, app_version) DO UPDATE SET
            contract = excluded.contract, updated_at = excluded.updated_at, pinned = excluded.pinned, registered_in = excluded.registered_in
        """

    /// One version's contract of a type (app, type, version).
    static let deleteContract = "DELETE FROM contracts WHERE bundle_id = ? AND attributes_type = ? AND app_version = ?"

    static let saveChannel = """
        INSERT INTO channels \(ChannelRecord.table.insertion)
        ON CONFLICT (channel_id) DO UPDATE SET key = excluded.key, delete_after = excluded.delete_after,
            deleted_at = excluded.deleted_at
        """

    /// Takes or renews a lease (name, holder, until, now): it is the holder's when free, run out, or
    /// already the holder's; a row comes back only then.
    static let takeLease = """
        INSERT INTO leases (name, holder, until) VALUES (?, ?, ?)
        ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, until = excluded.until
        WHERE leases.holder = excluded.holder OR leases.until <= ?
        RETURNING holder
        """

    /// What a new delivery is written with; the rest of its columns start empty.
    static let newDeliveryColumns = """
        key, event, target, device_id, token, channel_id, payload_id, priority, priority_reason, expiration, timestamp, request_id, \
        status, attempts, next_attempt_at, created_at, environment, bundle_id
        """

    /// A statement that writes pushes, as it is and returning each push it wrote (for the pushes
    /// a request hands to the dispatcher), both made once.
    static func writingPushes(_ sql: String) -> (queued: String, handedOver: String) {
        (sql, sql + " RETURNING \(DeliveryRecord.columns)")
    }

    /// One push, its values in the order of `newDeliveryColumns`, `attempts` 0.
    static let insertDelivery = writingPushes(
        "INSERT INTO deliveries (\(newDeliveryColumns)) VALUES (\(SQLStatement.marks(13)), 0, \(SQLStatement.marks(4)))")

    /// A push to each live token of a key, in the order a per-token plan would have listed them:
    /// (event, payload, priority, reason, expiration, timestamp, request, status, due, now, app, key).
    static let fanOut = writingPushes("INSERT INTO deliveries (\(newDeliveryColumns)) " + fanOutRows(payload: "?"))

    /// The rows `fanOut` inserts, `payload` being the SQL of the payload's id and `condition` one
    /// more (with its arguments after the key's).
    static func fanOutRows(payload: String, and condition: String = "1 = 1") -> String {
        """
        SELECT key, ?, 'activity', device_id, token, NULL, \(payload), ?, ?, ?, ?, ?, ?, 0, ?, ?, environment, bundle_id
        FROM activity_tokens WHERE bundle_id = ? AND key = ? AND state = 'live' AND \(condition) ORDER BY device_id
        """
    }

    // MARK: Retrying a failed push

    static let retryCandidate = "SELECT \(DeliveryRecord.columns) FROM deliveries WHERE id = ?"

    /// What the target's liveness is read from, by kind (`DeliveryRetry.targetState`).
    static func retryTarget(_ target: DeliveryTarget, app: String, key: String) -> SQLStatement {
        switch target {
        case .activityToken(let device, let token):
            SQLStatement(
                text: "SELECT state, state_reason FROM activity_tokens WHERE bundle_id = ? AND key = ? AND device_id = ? AND token = ?",
                arguments: [.text(app), .text(key), .text(device), .text(token)])
        case .pushToStartToken(let device, let token):
            SQLStatement(
                text: "SELECT dead_reason FROM push_to_start_tokens WHERE bundle_id = ? AND device_id = ? AND token = ?",
                arguments: [.text(app), .text(device), .text(token)])
        case .channel(let id):
            SQLStatement(text: "SELECT deleted_at FROM channels WHERE channel_id = ?", arguments: [.text(id)])
        case .surface(_, let device, let token):
            SQLStatement(
                text: "SELECT token FROM surface_tokens WHERE bundle_id = ? AND device_id = ? AND token = ?",
                arguments: [.text(app), .text(device), .text(token)])
        }
    }

    /// A later push of the key to the same target that was not given up: queued, on its way or sent.
    static let newerPush = """
        SELECT id FROM deliveries
        WHERE bundle_id = ? AND key = ? AND target = ? AND COALESCE(device_id, '') = ? AND COALESCE(channel_id, '') = ? AND id > ?
            AND status IN ('queued', 'sending', 'sent')
        ORDER BY id LIMIT 1
        """

    /// The push again, as it was but queued and due at once: (reason, due, now, id).
    static let retry = """
        INSERT INTO deliveries (\(newDeliveryColumns))
        SELECT key, event, target, device_id, token, channel_id, payload_id, priority, ?, expiration, timestamp, request_id,
            'queued', 0, ?, ?, environment, bundle_id
        FROM deliveries WHERE id = ?
        RETURNING \(DeliveryRecord.columns)
        """

    /// A page of pushes, newest first, with only the conditions the query gives: a plan made once
    /// for every filter (`? IS NULL OR …`) read the whole history to sort it (PostgreSQL: 140 ms
    /// for 1,000 of 311,000 pushes). Each form reads from the newest end of an index: a key's by
    /// `deliveries_by_key_newest`, the others by the primary key.
    static func deliveries(_ query: DeliveryQuery) -> SQLStatement {
        var filter = SQLConditions()
        switch (query.bundleID, query.key) {
        case (let app?, let key?):
            filter.add("bundle_id = ? AND key = ?", .text(app), .text(key))
        case (let app?, nil):
            // An app is seldom selective (most servers serve one), and kept in no index by itself:
            // SQLite, which has no statistics, would read the app's whole history by an index
            // that begins with the app and sort it. Written so that no index applies, it is read newest
            // first and filtered.
            filter.add("bundle_id || '' = ?", .text(app))
        case (nil, let key?):
            filter.add("key = ?", .text(key))
        case (nil, nil):
            break
        }
        // Statuses and states are written out, not bound: partial indexes name some (`reloadsIndex`).
        if let status = query.status {
            filter.add((DeliveryStatus.endedUnsent.contains(status) ? "\(unsentCondition) AND " : "") + "status = '\(status.rawValue)'")
        }
        if let reason = query.reason { filter.add("apns_reason = ?", .text(reason)) }
        if let before = query.before { filter.add("id < ?", .integer(before)) }
        return SQLStatement(
            text: "SELECT \(DeliveryRecord.columns) FROM deliveries \(filter.clause) ORDER BY id DESC LIMIT ?",
            arguments: filter.arguments + [.integer(Int64(query.limit))])
    }

    /// The apps among `apps` with an activity under `key`: their primary key probed once each, in
    /// one statement whatever their number.
    static func apps(holdingKey key: String, among apps: [String]) -> SQLStatement {
        SQLStatement(
            text: "SELECT bundle_id FROM activities WHERE key = ? AND bundle_id IN (\(SQLStatement.marks(apps.count))) ORDER BY bundle_id",
            arguments: [.text(key)] + apps.map { .text($0) })
    }

    // MARK: The dashboard

    /// A page of activities, newest first (then by app and key, so that the order is total).
    static func activities(_ query: ActivityQuery) -> SQLStatement {
        var filter = SQLConditions()
        if let app = query.bundleID { filter.add("bundle_id = ?", .text(app)) }
        if let state = query.state { filter.add("state = '\(state.rawValue)'") }
        if let type = query.attributesType { filter.add("attributes_type = ?", .text(type)) }
        if let text = query.keyContains, !text.isEmpty {
            // lower() folds ASCII in both engines; LIKE's own characters in the text are escaped.
            let pattern = text.asciiLowercased.replacing("\\", with: "\\\\").replacing("%", with: "\\%").replacing("_", with: "\\_")
            filter.add("lower(key) LIKE ? ESCAPE '\\'", .text("%" + pattern + "%"))
        }
        if let after = query.after {
            filter.add("(started_at, bundle_id, key) < (?, ?, ?)", .seconds(after.startedAt), .text(after.bundleID), .text(after.key))
        }
        return SQLStatement(
            text:
                "SELECT \(ActivityRecord.listedColumns) FROM activities \(filter.clause) ORDER BY started_at DESC, bundle_id DESC, key DESC LIMIT ?",
            arguments: filter.arguments + [.integer(Int64(query.limit))])
    }

    static let insertDashboardSession = "INSERT INTO dashboard_sessions \(DashboardSessionRecord.table.insertion)"

    static let deleteExpiredDashboardSessions = "DELETE FROM dashboard_sessions WHERE expires_at <= ?"

    /// A session that has not run out, with its key while the key is live: revoking a key signs
    /// its sessions out.
    static let dashboardSession = """
        SELECT \(APIKeyRecord.table.list("api_keys")), \(DashboardSessionRecord.table.list("dashboard_sessions"))
        FROM dashboard_sessions JOIN api_keys ON api_keys.id = dashboard_sessions.api_key_id
        WHERE id_hash = ? AND expires_at > ? AND revoked_at IS NULL
        """

    static let deleteDashboardSession = "DELETE FROM dashboard_sessions WHERE id_hash = ?"
}

extension String {
    /// With only A to Z lowered, as SQLite's lower() does (PostgreSQL's lowers more): searches
    /// promise to ignore ASCII case alone.
    var asciiLowercased: String {
        String(String.UnicodeScalarView(unicodeScalars.map { ("A"..."Z").contains($0) ? Unicode.Scalar($0.value + 32)! : $0 }))
    }
}
