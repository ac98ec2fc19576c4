import Foundation
import LiveActivityKit

/// The webhooks' statements, the same text for both engines.
enum WebhookStatements {
    /// The deliveries' indexes: due ones, each key's in order, an endpoint's latest.
    static let indexes = [
        "CREATE INDEX webhook_deliveries_due ON webhook_deliveries (due_at) WHERE status = 'pending'",
        "CREATE INDEX webhook_deliveries_in_order ON webhook_deliveries (endpoint_id, key, event_seq) WHERE status = 'pending'",
        "CREATE INDEX webhook_deliveries_recent ON webhook_deliveries (endpoint_id, last_attempt_at)",
    ]

    static let endpointColumns = WebhookEndpointRecord.table.list

    /// A new endpoint (its columns, then `cursor`: the last event of the log now); its arguments
    /// are `WebhookEndpointRecord.table.arguments`.
    static let insertEndpoint = """
        INSERT INTO webhook_endpoints (\(endpointColumns), cursor)
        VALUES (\(SQLStatement.marks(WebhookEndpointRecord.table.count)), (SELECT COALESCE(MAX(seq), 0) FROM events))
        """

    /// The types as a column holds them: separated by spaces, in order.
    static func storedTypes(_ types: Set<EventType>) -> String {
        types.map(\.rawValue).sorted().joined(separator: " ")
    }

    static let replaceSecret = "UPDATE webhook_endpoints SET secret = ? WHERE id = ?"
    static let updateEndpoint = """
        UPDATE webhook_endpoints SET url = ?, description = ?, event_types = ?, enabled = ?, disabled_reason = ?, failing_since = ?,
            updated_at = ?
        WHERE id = ?
        """

    static func updateArguments(_ endpoint: WebhookEndpointRecord) -> [SQLArgument] {
        [
            .text(endpoint.url), .text(endpoint.description), .text(endpoint.eventTypes.map(storedTypes)), .bool(endpoint.enabled),
            .text(endpoint.disabledReason), .seconds(endpoint.failingSince), .seconds(endpoint.updatedAt), .text(endpoint.id),
        ]
    }

    static let endpoint = "SELECT \(endpointColumns) FROM webhook_endpoints WHERE id = ?"
    static let allEndpoints = "SELECT \(endpointColumns) FROM webhook_endpoints ORDER BY created_at, id"
    static let appEndpoints = "SELECT \(endpointColumns) FROM webhook_endpoints WHERE bundle_id = ? ORDER BY created_at, id"
    static let countAppEndpoints = "SELECT count(*) FROM webhook_endpoints WHERE bundle_id = ?"
    static let deleteDeliveries = "DELETE FROM webhook_deliveries WHERE endpoint_id = ?"
    static let deleteEndpoint = "DELETE FROM webhook_endpoints WHERE id = ?"

    /// Events queued per endpoint at most per claim: a long log is fed over several.
    static let feedBatch = 1000

    /// How many events the log holds up to now (its last number), which the feed queues up to.
    static let lastEvent = "SELECT COALESCE(MAX(seq), 0) FROM events"

    /// Whether a claim has anything to do (now, now): events past an enabled endpoint's cursor, or
    /// a delivery due. A read, so that the sender, woken by every change, writes only when it
    /// must (a fan-out's recordings wake it hundreds of times).
    static func workWaiting(unnumbered: Bool) -> String {
        """
        SELECT (SELECT COALESCE(MAX(seq), 0) FROM events) > (SELECT COALESCE(MIN(cursor), \(Int64.max)) FROM webhook_endpoints WHERE enabled)
            OR EXISTS (
                SELECT 1 FROM webhook_deliveries WHERE status = 'pending' AND due_at <= ? AND (lease_until IS NULL OR lease_until <= ?))
        """ + (unnumbered ? " OR EXISTS (SELECT 1 FROM events WHERE seq IS NULL)" : "")
    }

    /// Queues for each enabled endpoint the events after its cursor, up to `batch` of them and
    /// no further than the log's last (now, batch, last, last).
    static let feed = """
        INSERT INTO webhook_deliveries (endpoint_id, event_id, event_seq, key, status, attempts, due_at)
        SELECT w.id, ev.id, ev.seq, ev.key, 'pending', 0, ? FROM webhook_endpoints w
        JOIN events ev ON ev.bundle_id = w.bundle_id AND ev.seq > w.cursor AND ev.seq <= w.cursor + ? AND ev.seq <= ?
        WHERE w.enabled AND w.cursor < ? AND ev.type <> 'webhook.test'
            AND (w.event_types IS NULL OR (' ' || w.event_types || ' ') LIKE ('% ' || ev.type || ' %'))
        ON CONFLICT (endpoint_id, event_id) DO NOTHING
        """

    /// Moves the cursors past what `feed` queued (batch, last, batch, last, last).
    static let advanceCursors = """
        UPDATE webhook_endpoints SET cursor = CASE WHEN cursor + ? < ? THEN cursor + ? ELSE ? END WHERE enabled AND cursor < ?
        """

    /// The ids of due deliveries, of each endpoint and key only the oldest pending, and of each
    /// endpoint no more than it may have in flight besides those it has (now, now, now, the most an
    /// endpoint may have in flight, limit): the first come first, but an endpoint that hangs holds
    /// only its own share, and the others' come next (one claim over every endpoint made a
    /// healthy endpoint wait minutes behind 20 hanging ones).
    static let due = """
        SELECT id FROM (
            SELECT d.id, d.due_at, d.event_seq,
                ROW_NUMBER() OVER (PARTITION BY d.endpoint_id ORDER BY d.due_at, d.event_seq, d.id) AS place, COALESCE(f.n, 0) AS in_flight
            FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id
            LEFT JOIN (
                SELECT endpoint_id, count(*) AS n FROM webhook_deliveries WHERE status = 'pending' AND lease_until > ? GROUP BY endpoint_id
            ) f ON f.endpoint_id = d.endpoint_id
            WHERE d.status = 'pending' AND d.due_at <= ? AND (d.lease_until IS NULL OR d.lease_until <= ?) AND w.enabled
                AND NOT EXISTS (
                    SELECT 1 FROM webhook_deliveries p
                    WHERE p.endpoint_id = d.endpoint_id AND p.key = d.key AND p.status = 'pending' AND p.event_seq < d.event_seq)
        ) due WHERE place <= ? - in_flight
        ORDER BY due_at, event_seq, id LIMIT ?
        """

    /// Every claim given up: a server alone on its store restarts, so no one holds one.
    static let releaseLeases = "UPDATE webhook_deliveries SET lease_until = NULL WHERE status = 'pending' AND lease_until IS NOT NULL"

    static func lease(_ ids: [Int64], until: Date) -> SQLStatement {
        SQLStatement(
            text: "UPDATE webhook_deliveries SET lease_until = ? WHERE id IN (\(SQLStatement.marks(ids.count)))",
            arguments: [.seconds(until)] + ids.map { .integer($0) })
    }

    /// The claimed deliveries: the event's columns (`EventRecord.table`), then the delivery's and
    /// its endpoint's (`claimedColumns`).
    static func claimed(_ ids: [Int64]) -> SQLStatement {
        SQLStatement(
            text: """
                SELECT \(EventRecord.table.list("ev")), d.id AS delivery_id, d.attempts, w.id AS endpoint_id, w.url, w.secret
                FROM webhook_deliveries d JOIN webhook_endpoints w ON w.id = d.endpoint_id JOIN events ev ON ev.id = d.event_id
                WHERE d.id IN (\(SQLStatement.marks(ids.count))) ORDER BY d.due_at, d.event_seq, d.id
                """,
            arguments: ids.map { .integer($0) })
    }

    private static let claimedColumns = EventRecord.table.appending(["delivery_id", "attempts", "endpoint_id", "url", "secret"])

    static func claimedDelivery(_ row: some StoreRow) throws -> ClaimedWebhookDelivery {
        let row = claimedColumns.read(row)
        return ClaimedWebhookDelivery(
            id: row.integer("delivery_id") ?? 0, attempts: row.int("attempts") ?? 0, endpointID: row.string("endpoint_id"),
            url: row.string("url"), secret: row.string("secret"), event: try EventRecord(row: row))
    }

    /// An outcome written on its delivery.
    static func record(id: Int64, _ outcome: WebhookOutcome) -> SQLStatement {
        let attempt = outcome.attempt
        let (status, due, finished): (WebhookDeliveryStatus, Date?, Date?) =
            switch outcome {
            case .delivered: (.delivered, nil, attempt.at)
            case .retry(_, let at): (.pending, at, nil)
            case .gaveUp: (.failed, nil, attempt.at)
            }
        return SQLStatement(
            text: """
                UPDATE webhook_deliveries SET status = ?, due_at = COALESCE(?, due_at), finished_at = ?, attempts = attempts + 1,
                    lease_until = NULL, last_attempt_at = ?, last_status = ?, last_error = ?, last_latency_ms = ?, last_excerpt = ?
                WHERE id = ?
                """,
            arguments: [
                .text(status.rawValue), .seconds(due), .seconds(finished), .seconds(attempt.at), .integer(attempt.status.map(Int64.init)),
                .text(attempt.error), .integer(Int64(attempt.latencyMilliseconds)), .text(attempt.excerpt), .integer(id),
            ])
    }

    /// The endpoints of these deliveries.
    static func endpoints(of ids: [Int64]) -> SQLStatement {
        SQLStatement(
            text: "SELECT id, endpoint_id FROM webhook_deliveries WHERE id IN (\(SQLStatement.marks(ids.count)))",
            arguments: ids.map { .integer($0) })
    }

    /// What a batch of outcomes says of one endpoint: delivered once, it works; failed every
    /// time, it is failing (since its first failure), and disabled once failing long enough.
    struct EndpointHealth {
        var endpointID: String
        /// The last failed attempt, when none was delivered.
        var failure: WebhookAttempt?

        static func of(_ outcomes: [(id: Int64, outcome: WebhookOutcome)], endpoints: [Int64: String]) -> [EndpointHealth] {
            var delivered = Set<String>()
            var lastFailure: [String: WebhookAttempt] = [:]
            for (id, outcome) in outcomes {
                guard let endpoint = endpoints[id] else { continue }
                if case .delivered = outcome { delivered.insert(endpoint) } else { lastFailure[endpoint] = outcome.attempt }
            }
            return delivered.union(lastFailure.keys).sorted().map { endpoint in
                EndpointHealth(endpointID: endpoint, failure: delivered.contains(endpoint) ? nil : lastFailure[endpoint])
            }
        }

        var update: SQLStatement {
            guard let failure else {
                return SQLStatement(text: "UPDATE webhook_endpoints SET failing_since = NULL WHERE id = ?", arguments: [.text(endpointID)])
            }
            return SQLStatement(
                text: "UPDATE webhook_endpoints SET failing_since = COALESCE(failing_since, ?) WHERE id = ?",
                arguments: [.seconds(failure.at), .text(endpointID)])
        }

        /// Disables the endpoint if it has been failing since before `failingSince`; gives its id if so.
        func disable(failingSince: Date) -> SQLStatement? {
            guard let failure else { return nil }
            let last = failure.error ?? failure.status.map { "HTTP \($0)" } ?? "no answer"
            return SQLStatement(
                text: """
                    UPDATE webhook_endpoints SET enabled = FALSE, disabled_reason = ?, updated_at = ?
                    WHERE id = ? AND enabled AND failing_since IS NOT NULL AND failing_since <= ? RETURNING id
                    """,
                arguments: [
                    .text("disabled by the server: every attempt failed since \(failingSince.iso8601) or before (the last: \(last))"),
                    .seconds(failure.at), .text(endpointID), .seconds(failingSince),
                ])
        }
    }

    /// An endpoint's deliveries, each with its event's type (`WebhookDeliveryRecord.table`).
    static let deliveries = """
        SELECT \(WebhookDeliveryRecord.table.columns.map { $0.name == "type" ? "ev.type" : "d.\($0.name)" }.joined(separator: ", "))
        FROM webhook_deliveries d JOIN events ev ON ev.id = d.event_id
        WHERE d.endpoint_id = ? ORDER BY COALESCE(d.last_attempt_at, d.due_at) DESC, d.id DESC LIMIT ?
        """

    /// The event of an endpoint's app, with its number, if any (app, event id).
    static let appEvent = "SELECT seq, key FROM events WHERE bundle_id = ? AND id = ? AND seq IS NOT NULL"

    /// Queues an event for an endpoint again, at once (endpoint, event id, seq, key, now).
    static let redeliver = """
        INSERT INTO webhook_deliveries (endpoint_id, event_id, event_seq, key, status, attempts, due_at) VALUES (?, ?, ?, ?, 'pending', 0, ?)
        ON CONFLICT (endpoint_id, event_id) DO UPDATE SET status = 'pending', attempts = 0, due_at = excluded.due_at, lease_until = NULL,
            finished_at = NULL
        """
}
