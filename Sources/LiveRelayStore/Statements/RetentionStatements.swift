import Foundation

/// The statements of retention, the same text for both engines.
enum RetentionStatements {
    /// A table whose ids grow with the time in `time` (a row's insertion), as its rows were
    /// written: the oldest rows are found from the smallest ids with point reads, so that no
    /// index on the time is kept up on the hot path.
    struct Ordered {
        var table: String
        var id: String
        var time: String

        /// Two statements in one: SQLite reads a lone MIN or MAX from the index's end, but scans
        /// the whole table for both in one SELECT.
        var bounds: String { "SELECT (SELECT MIN(\(id)) FROM \(table)), (SELECT MAX(\(id)) FROM \(table))" }
        /// The first row from an id on: its id and time.
        var firstFrom: String { "SELECT \(id), \(time) FROM \(table) WHERE \(id) >= ? ORDER BY \(id) LIMIT 1" }
    }

    static let deliveries = Ordered(table: "deliveries", id: "id", time: "created_at")
    static let webhookDeliveries = Ordered(table: "webhook_deliveries", id: "id", time: "COALESCE(finished_at, due_at)")
    static let events = Ordered(table: "events", id: "seq", time: "occurred_at")

    /// Arguments: the id boundary, the cutoff, the limit. Returns each deleted push's payload.
    static let deleteDeliveries = """
        DELETE FROM deliveries WHERE id IN (
            SELECT id FROM deliveries WHERE id < ? AND created_at < ? AND status NOT IN ('queued', 'sending') ORDER BY id LIMIT ?)
        RETURNING payload_id
        """
    /// A payload once nothing points to it. Arguments: the payload, twice.
    static let deletePayload = "DELETE FROM payloads WHERE id = ? AND NOT EXISTS (SELECT 1 FROM deliveries WHERE payload_id = ?)"
    static let deleteWebhookDeliveries = """
        DELETE FROM webhook_deliveries WHERE id IN (
            SELECT id FROM webhook_deliveries WHERE id < ? AND finished_at < ? AND status != 'pending' ORDER BY id LIMIT ?)
        """
    /// The pending deliveries of disabled endpoints whose events are past their time, found by the
    /// events' id boundary (no scan of the log by time): they go with their events, so that an
    /// endpoint disabled for days (by its owner, or after failing) never keeps the log; enabled
    /// again, it is posted what is still kept (the boundary).
    static let deleteWaitingOfDisabled = """
        DELETE FROM webhook_deliveries
        WHERE status = 'pending' AND event_seq > 0 AND event_seq < ? AND endpoint_id IN (SELECT id FROM webhook_endpoints WHERE NOT enabled)
        """
    /// Per app, the first event a webhook delivery still waits to post: one app's waits keep only
    /// its own events.
    static let firstEventWaitingPerApp = """
        SELECT w.bundle_id, MIN(d.event_seq) FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
        WHERE d.status = 'pending' AND d.event_seq > 0 GROUP BY w.bundle_id
        """
    /// Events before the boundary and the cutoff, but those an app's endpoint still waits for (the
    /// boundary, the cutoff, then each waiting app and its first waited event, then the limit).
    static func deleteEvents(below: Int64, cutoff: Date, waiting: [(app: String, first: Int64)], limit: SQLArgument) -> SQLStatement {
        let kept = waiting.map { _ in " AND NOT (bundle_id = ? AND seq >= ?)" }.joined()
        return SQLStatement(
            text: """
                DELETE FROM events WHERE seq IN (SELECT seq FROM events WHERE seq < ? AND occurred_at < ?\(kept) ORDER BY seq LIMIT ?)
                """,
            arguments: [.integer(below), .seconds(cutoff)] + waiting.flatMap { [SQLArgument.text($0.app), .integer($0.first)] } + [limit])
    }
    static let deleteSchedules = """
        DELETE FROM schedules WHERE id IN (SELECT id FROM schedules WHERE state != 'pending' AND due_at < ? LIMIT ?)
        """
    static let endedActivities = "SELECT bundle_id, key FROM activities WHERE state = 'ended' AND ended_at < ? ORDER BY ended_at LIMIT ?"
    /// Only if still ended then (PostgreSQL: a start may have taken the key since it was read).
    static let deleteEndedActivity = "DELETE FROM activities WHERE bundle_id = ? AND key = ? AND state = 'ended' AND ended_at < ?"
    /// What an ended activity leaves, by table. Arguments: bundle ID, key.
    static let activityDependents = ["activity_tokens", "activity_channels", "channel_listeners"].map {
        ($0, "DELETE FROM \($0) WHERE bundle_id = ? AND key = ?")
    }
    static let deleteChannels = """
        DELETE FROM channels WHERE channel_id IN (SELECT channel_id FROM channels WHERE deleted_at < ? LIMIT ?)
        """
    static let deleteIdempotencyKeys = """
        DELETE FROM idempotency_keys WHERE (api_key_id, key) IN (
            SELECT api_key_id, key FROM idempotency_keys WHERE created_at < ? ORDER BY created_at LIMIT ?)
        """
    /// Arguments: the cutoff, the limit.
    static let deleteUnusedContractVersions = """
        DELETE FROM contracts WHERE (bundle_id, attributes_type, app_version) IN (
            SELECT bundle_id, attributes_type, app_version FROM contracts c
            WHERE NOT c.pinned AND c.app_version != '' AND c.updated_at < ?
                AND NOT EXISTS (
                    SELECT 1 FROM push_to_start_tokens p WHERE p.bundle_id = c.bundle_id AND p.app_version = c.app_version AND p.dead_reason IS NULL)
                AND NOT EXISTS (
                    SELECT 1 FROM activity_tokens t WHERE t.bundle_id = c.bundle_id AND t.app_version = c.app_version AND t.state = 'live')
            LIMIT ?)
        """
    /// Finds the tokens of an app version (`deleteUnusedContractVersions`) without a scan. Led by
    /// the version: led by the app, PostgreSQL took the live tokens' one for a key's live tokens
    /// while its statistics predated them, and a change read every live token of the app
    /// (migration `0031-token-indexes`).
    static let tokensByAppVersion = [
        "CREATE INDEX push_to_start_tokens_by_app_version ON push_to_start_tokens (app_version, bundle_id)",
        "CREATE INDEX activity_tokens_by_app_version ON activity_tokens (app_version, bundle_id) WHERE state = 'live'",
    ]
    static let deleteDashboardSessions = """
        DELETE FROM dashboard_sessions WHERE id_hash IN (SELECT id_hash FROM dashboard_sessions WHERE expires_at < ? LIMIT ?)
        """

    /// What retention reads by age, indexed (migration `0019-retention`): payloads are freed by
    /// their pushes, ended activities and idempotency keys found by their time.
    static let indexes = [
        "CREATE INDEX deliveries_by_payload ON deliveries (payload_id)",
        "CREATE INDEX activities_ended ON activities (ended_at) WHERE state = 'ended'",
        "CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at)",
    ]

    /// The smallest id from which rows are not older than `cutoff`, found by bisection over the
    /// ids in `bounds` with `firstFrom` (a point read each, about 2·log₂ of the rows). Ids grow
    /// with time only nearly (instances' clocks, transactions that commit out of order): a row
    /// misplaced near the boundary is deleted by a later batch, never one not yet due, because
    /// each delete also checks the time itself.
    static func boundary(
        bounds: (lowest: Int64, highest: Int64)?, cutoff: Double, firstFrom: (Int64) async throws -> (id: Int64, time: Double)?
    ) async throws -> Int64 {
        guard var (low, high) = bounds.map({ ($0.lowest, $0.highest + 1) }) else { return 0 }
        while low < high {
            let middle = low + (high - low) / 2
            guard let first = try await firstFrom(middle) else {
                high = middle
                continue
            }
            if first.time < cutoff { low = first.id + 1 } else { high = middle }
        }
        return low
    }
}
