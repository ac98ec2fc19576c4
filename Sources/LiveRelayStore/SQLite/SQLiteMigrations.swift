enum SQLiteMigrations {
    static let all: [StoreMigration] = [
        StoreMigration(
            name: "0001-api-keys",
            statements: [
                """
                CREATE TABLE api_keys (
                    id TEXT PRIMARY KEY, name TEXT NOT NULL, scope TEXT NOT NULL, secret_hash BLOB NOT NULL UNIQUE,
                    created_at REAL NOT NULL, revoked_at REAL)
                """
            ]),
        StoreMigration(
            name: "0002-registry",
            statements: [
                """
                CREATE TABLE push_to_start_tokens (
                    device_id TEXT NOT NULL, attributes_type TEXT NOT NULL, user_id TEXT, token TEXT NOT NULL,
                    frequent_pushes INTEGER NOT NULL, environment TEXT NOT NULL, updated_at REAL NOT NULL, dead_reason TEXT,
                    PRIMARY KEY (device_id, attributes_type))
                """,
                "CREATE INDEX push_to_start_tokens_by_type ON push_to_start_tokens (attributes_type, user_id)",
                """
                CREATE TABLE activities (
                    key TEXT PRIMARY KEY, attributes_type TEXT NOT NULL, attributes TEXT, state TEXT NOT NULL, channel_id TEXT,
                    content_state TEXT, stale_date REAL, relevance_score REAL, started_at REAL NOT NULL, ended_at REAL,
                    end_reason TEXT, dismissal_date REAL, last_timestamp INTEGER NOT NULL)
                """,
                "CREATE INDEX activities_active ON activities (started_at) WHERE state = 'active'",
                """
                CREATE TABLE activity_tokens (
                    key TEXT NOT NULL, device_id TEXT NOT NULL, activity_id TEXT, token TEXT NOT NULL,
                    frequent_pushes INTEGER NOT NULL, registered_at REAL NOT NULL, state TEXT NOT NULL, state_reason TEXT,
                    last_status INTEGER, last_reason TEXT, last_delivery_at REAL,
                    PRIMARY KEY (key, device_id))
                """,
                """
                CREATE TABLE channels (
                    channel_id TEXT PRIMARY KEY, key TEXT, storage_policy INTEGER NOT NULL, created_at REAL NOT NULL,
                    delete_after REAL, deleted_at REAL)
                """,
            ]),
        StoreMigration(
            name: "0003-outbox",
            statements: [
                "CREATE TABLE payloads (id INTEGER PRIMARY KEY, body BLOB NOT NULL)",
                """
                CREATE TABLE deliveries (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, event TEXT NOT NULL, target TEXT NOT NULL,
                    device_id TEXT, token TEXT, channel_id TEXT, payload_id INTEGER NOT NULL REFERENCES payloads (id),
                    priority INTEGER NOT NULL, priority_reason TEXT NOT NULL, expiration INTEGER, timestamp INTEGER NOT NULL,
                    request_id TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL, next_attempt_at REAL NOT NULL,
                    created_at REAL NOT NULL, finished_at REAL, apns_status INTEGER, apns_reason TEXT, apns_id TEXT)
                """,
                "CREATE INDEX deliveries_due ON deliveries (next_attempt_at, id) WHERE status IN ('queued', 'sending')",
                "CREATE INDEX deliveries_waiting_by_token ON deliveries (token) WHERE status = 'queued'",
                "CREATE INDEX deliveries_waiting_by_channel ON deliveries (channel_id) WHERE status = 'queued'",
                "CREATE INDEX deliveries_by_key ON deliveries (key, device_id, created_at)",
            ]),
        StoreMigration(
            name: "0004-requests",
            statements: [
                """
                CREATE TABLE idempotency_keys (
                    api_key_id TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL, status INTEGER NOT NULL,
                    body BLOB NOT NULL, created_at REAL NOT NULL,
                    PRIMARY KEY (api_key_id, key))
                """,
                """
                CREATE TABLE schedules (
                    id TEXT PRIMARY KEY, key TEXT NOT NULL, action TEXT NOT NULL, request TEXT NOT NULL, due_at REAL NOT NULL,
                    state TEXT NOT NULL, result TEXT, created_at REAL NOT NULL)
                """,
                "CREATE INDEX schedules_due ON schedules (due_at) WHERE state = 'pending'",
            ]),
        // The priority-10 budget reads a key's pushes of the last hour on every update with
        // `auto` priority: an index that reaches them by time and answers alone (every column the
        // query names, even those its condition fixes), instead of a lookup in the table per push.
        // Only broadcasts carry a channel id, so the other pushes stay out of that index.
        StoreMigration(
            name: "0005-budget-index",
            statements: [
                """
                CREATE INDEX deliveries_priority10 ON deliveries (key, created_at, device_id, status, priority, target)
                WHERE priority = 10 AND target != 'push-to-start'
                """,
                "DROP INDEX deliveries_waiting_by_channel",
                "CREATE INDEX deliveries_waiting_by_channel ON deliveries (channel_id) WHERE status = 'queued' AND channel_id IS NOT NULL",
            ]),
        // A large fan-out's database time was mostly B-tree writes that its pushes' status changes
        // caused, and the per-push update of each token's last result.
        // - Queued pushes are found by key and device (a change supersedes its key's queued pushes;
        //   a dead token skips its device's): a short key written in order, instead of a random
        //   160-character token.
        // - The budget index leaves out the status, so that sending never touches it; the count
        //   reads the status from the rows in the window.
        // - A token's last result is read from its latest attempted delivery (which now records when
        //   it was attempted) instead of being written to the token on every outcome; the tokens are
        //   kept in key order, the order a fan-out reads them in.
        StoreMigration(
            name: "0006-lighter-outbox",
            statements: [
                "DROP INDEX deliveries_waiting_by_token",
                "CREATE INDEX deliveries_queued_by_device ON deliveries (key, device_id) WHERE status = 'queued'",
                "DROP INDEX deliveries_priority10",
                "CREATE INDEX deliveries_priority10 ON deliveries (key, created_at) WHERE priority = 10 AND target != 'push-to-start'",
                "ALTER TABLE deliveries ADD COLUMN attempted_at REAL",
                "UPDATE deliveries SET attempted_at = finished_at WHERE attempts > 0",
                """
                CREATE TABLE activity_tokens_by_key (
                    key TEXT NOT NULL, device_id TEXT NOT NULL, activity_id TEXT, token TEXT NOT NULL,
                    frequent_pushes INTEGER NOT NULL, registered_at REAL NOT NULL, state TEXT NOT NULL, state_reason TEXT,
                    PRIMARY KEY (key, device_id)) WITHOUT ROWID
                """,
                """
                INSERT INTO activity_tokens_by_key
                SELECT key, device_id, activity_id, token, frequent_pushes, registered_at, state, state_reason FROM activity_tokens
                """,
                "DROP TABLE activity_tokens",
                "ALTER TABLE activity_tokens_by_key RENAME TO activity_tokens",
            ]),
        // What each app's widget decodes its attributes types from: requests are checked against it.
        StoreMigration(
            name: "0007-contracts",
            statements: [
                """
                CREATE TABLE contracts (
                    bundle_id TEXT NOT NULL, attributes_type TEXT NOT NULL, contract TEXT NOT NULL, updated_at REAL NOT NULL,
                    PRIMARY KEY (bundle_id, attributes_type))
                """
            ]),
        // Both APNs environments at once: every token, channel and push names its own, and a key
        // is bound to at most one channel in each. Until now a server sent to one environment and
        // refused tokens of the other, so all it kept belongs to the environment its push-to-start
        // tokens were registered with (sandbox, the old default, when it had none).
        StoreMigration(
            name: "0008-environments",
            statements: [
                "ALTER TABLE activity_tokens ADD COLUMN environment TEXT NOT NULL DEFAULT 'sandbox'",
                "ALTER TABLE channels ADD COLUMN environment TEXT NOT NULL DEFAULT 'sandbox'",
                "ALTER TABLE deliveries ADD COLUMN environment TEXT NOT NULL DEFAULT 'sandbox'",
            ]
                + ["activity_tokens", "channels", "deliveries"].map { table in
                    "UPDATE \(table) SET environment = (SELECT environment FROM push_to_start_tokens ORDER BY updated_at DESC LIMIT 1) "
                        + "WHERE EXISTS (SELECT 1 FROM push_to_start_tokens)"
                } + [
                    """
                    CREATE TABLE activity_channels (
                        key TEXT NOT NULL, environment TEXT NOT NULL, channel_id TEXT NOT NULL,
                        PRIMARY KEY (key, environment)) WITHOUT ROWID
                    """,
                    """
                    INSERT INTO activity_channels (key, environment, channel_id)
                    SELECT a.key, COALESCE(c.environment, 'sandbox'), a.channel_id FROM activities a LEFT JOIN channels c ON c.channel_id = a.channel_id
                    WHERE a.channel_id IS NOT NULL
                    """,
                    "ALTER TABLE activities DROP COLUMN channel_id",
                ]),
        // Several apps: each has its credentials, and its keys, tokens, activities, channels,
        // schedules and pushes apart from the others' (two apps may both have an `order-42`).
        // What an earlier store holds was one app's, which it did not record: it is kept under the
        // empty bundle id until the server names that app (`adoptUnnamedData`). Keys that served
        // the one app serve every app (NULL), but a client key stays with its app.
        StoreMigration(
            name: "0009-apps",
            statements: [
                """
                CREATE TABLE apps (
                    bundle_id TEXT PRIMARY KEY, team_id TEXT NOT NULL, key_id TEXT NOT NULL, signing_key TEXT NOT NULL,
                    created_at REAL NOT NULL, updated_at REAL NOT NULL)
                """,
                "ALTER TABLE api_keys ADD COLUMN bundle_id TEXT",
                "UPDATE api_keys SET bundle_id = '' WHERE scope = 'client'",
                """
                CREATE TABLE push_to_start_tokens_by_app (
                    bundle_id TEXT NOT NULL, device_id TEXT NOT NULL, attributes_type TEXT NOT NULL, user_id TEXT, token TEXT NOT NULL,
                    frequent_pushes INTEGER NOT NULL, environment TEXT NOT NULL, updated_at REAL NOT NULL, dead_reason TEXT,
                    PRIMARY KEY (bundle_id, device_id, attributes_type))
                """,
                """
                INSERT INTO push_to_start_tokens_by_app
                SELECT '', device_id, attributes_type, user_id, token, frequent_pushes, environment, updated_at, dead_reason
                FROM push_to_start_tokens
                """,
                "DROP TABLE push_to_start_tokens",
                "ALTER TABLE push_to_start_tokens_by_app RENAME TO push_to_start_tokens",
                "CREATE INDEX push_to_start_tokens_by_type ON push_to_start_tokens (bundle_id, attributes_type, user_id)",
                """
                CREATE TABLE activities_by_app (
                    bundle_id TEXT NOT NULL, key TEXT NOT NULL, attributes_type TEXT NOT NULL, attributes TEXT, state TEXT NOT NULL,
                    content_state TEXT, stale_date REAL, relevance_score REAL, started_at REAL NOT NULL, ended_at REAL, end_reason TEXT,
                    dismissal_date REAL, last_timestamp INTEGER NOT NULL,
                    PRIMARY KEY (bundle_id, key))
                """,
                """
                INSERT INTO activities_by_app
                SELECT '', key, attributes_type, attributes, state, content_state, stale_date, relevance_score, started_at, ended_at,
                    end_reason, dismissal_date, last_timestamp
                FROM activities
                """,
                "DROP TABLE activities",
                "ALTER TABLE activities_by_app RENAME TO activities",
                "CREATE INDEX activities_active ON activities (started_at) WHERE state = 'active'",
                """
                CREATE TABLE activity_tokens_by_app (
                    bundle_id TEXT NOT NULL, key TEXT NOT NULL, device_id TEXT NOT NULL, activity_id TEXT, token TEXT NOT NULL,
                    frequent_pushes INTEGER NOT NULL, registered_at REAL NOT NULL, state TEXT NOT NULL, state_reason TEXT,
                    environment TEXT NOT NULL,
                    PRIMARY KEY (bundle_id, key, device_id)) WITHOUT ROWID
                """,
                """
                INSERT INTO activity_tokens_by_app
                SELECT '', key, device_id, activity_id, token, frequent_pushes, registered_at, state, state_reason, environment
                FROM activity_tokens
                """,
                "DROP TABLE activity_tokens",
                "ALTER TABLE activity_tokens_by_app RENAME TO activity_tokens",
                """
                CREATE TABLE activity_channels_by_app (
                    bundle_id TEXT NOT NULL, key TEXT NOT NULL, environment TEXT NOT NULL, channel_id TEXT NOT NULL,
                    PRIMARY KEY (bundle_id, key, environment)) WITHOUT ROWID
                """,
                "INSERT INTO activity_channels_by_app SELECT '', key, environment, channel_id FROM activity_channels",
                "DROP TABLE activity_channels",
                "ALTER TABLE activity_channels_by_app RENAME TO activity_channels",
                "ALTER TABLE channels ADD COLUMN bundle_id TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE schedules ADD COLUMN bundle_id TEXT NOT NULL DEFAULT ''",
                "ALTER TABLE deliveries ADD COLUMN bundle_id TEXT NOT NULL DEFAULT ''",
                "DROP INDEX deliveries_queued_by_device",
                "CREATE INDEX deliveries_queued_by_device ON deliveries (bundle_id, key, device_id) WHERE status = 'queued'",
                "DROP INDEX deliveries_by_key",
                "CREATE INDEX deliveries_by_key ON deliveries (bundle_id, key, device_id, created_at)",
                "DROP INDEX deliveries_priority10",
                "CREATE INDEX deliveries_priority10 ON deliveries (bundle_id, key, created_at) WHERE priority = 10 AND target != 'push-to-start'",
            ]),
        // Work that one instance at a time does (schedules, expiry, channel clean-up): who holds it, until when.
        StoreMigration(
            name: "0010-leases",
            statements: [
                "CREATE TABLE leases (name TEXT PRIMARY KEY, holder TEXT NOT NULL, until REAL NOT NULL)"
            ]),
        // Request rates shared by the instances on one store: SQLite's one process keeps them in memory.
        StoreMigration(name: "0011-rate-buckets", statements: []),
        // The dashboard: who is signed in, and its list of activities, newest first.
        StoreMigration(
            name: "0012-dashboard",
            statements: [
                """
                CREATE TABLE dashboard_sessions (
                    id_hash BLOB PRIMARY KEY, api_key_id TEXT NOT NULL, form_token TEXT NOT NULL, signed_in_at REAL NOT NULL,
                    expires_at REAL NOT NULL)
                """,
                "CREATE INDEX activities_newest ON activities (started_at, bundle_id, key)",
            ]),
        // PostgreSQL's statistics of keys (see its migration of this name); SQLite plans each
        // statement by its indexes, with no statistics unless ANALYZE runs, which it never does.
        StoreMigration(name: "0013-key-statistics", statements: []),
        // Answers kept as what the request did (`answer`, JSON of `AcceptedRequest`), which the API
        // renders; the HTTP answers an earlier release kept (`status`, `body`) are replayed as they are.
        StoreMigration(
            name: "0014-typed-answers",
            statements: [
                """
                CREATE TABLE idempotency_keys_typed (
                    api_key_id TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT NULL, status INTEGER, body BLOB, answer TEXT,
                    created_at REAL NOT NULL,
                    PRIMARY KEY (api_key_id, key))
                """,
                """
                INSERT INTO idempotency_keys_typed (api_key_id, key, request_hash, status, body, created_at)
                SELECT api_key_id, key, request_hash, status, body, created_at FROM idempotency_keys
                """,
                "DROP TABLE idempotency_keys",
                "ALTER TABLE idempotency_keys_typed RENAME TO idempotency_keys",
            ]),
        // What reported each update token: `LiveRelayKit 0.1.0`, from the request's header.
        StoreMigration(name: "0015-reported-by", statements: ["ALTER TABLE activity_tokens ADD COLUMN reported_by TEXT"]),
        // Devices whose channel-bound activity listens to its key's channel (they have no update token).
        StoreMigration(
            name: "0016-channel-listeners",
            statements: [
                """
                CREATE TABLE channel_listeners (
                    bundle_id TEXT NOT NULL, key TEXT NOT NULL, device_id TEXT NOT NULL, activity_id TEXT, channel_id TEXT NOT NULL,
                    environment TEXT NOT NULL, registered_at REAL NOT NULL, state TEXT NOT NULL, state_reason TEXT, reported_by TEXT,
                    PRIMARY KEY (bundle_id, key, device_id)) WITHOUT ROWID
                """
            ]),
        // What happened to the apps' activities, for their backends, in the order it is read.
        StoreMigration(
            name: "0017-events",
            statements: [
                """
                CREATE TABLE events (
                    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, type TEXT NOT NULL, bundle_id TEXT NOT NULL,
                    environment TEXT, key TEXT NOT NULL, device_id TEXT, occurred_at REAL NOT NULL, data TEXT NOT NULL)
                """,
                "CREATE INDEX events_by_app ON events (bundle_id, seq)",
                "CREATE INDEX events_by_device ON events (bundle_id, key, device_id, type)",
                // The push-to-starts the ticker checks were confirmed, by when APNs accepted them.
                "CREATE INDEX deliveries_sent_starts ON deliveries (finished_at) WHERE event = 'start' AND status = 'sent'",
            ]),
        // Where backends hear their events, and each event's delivery to each of them.
        StoreMigration(
            name: "0018-webhooks",
            statements: [
                """
                CREATE TABLE webhook_endpoints (
                    id TEXT PRIMARY KEY, bundle_id TEXT NOT NULL, url TEXT NOT NULL, description TEXT, event_types TEXT, secret TEXT NOT NULL,
                    enabled INTEGER NOT NULL, disabled_reason TEXT, failing_since REAL, created_at REAL NOT NULL, updated_at REAL NOT NULL,
                    cursor INTEGER NOT NULL)
                """,
                """
                CREATE TABLE webhook_deliveries (
                    id INTEGER PRIMARY KEY AUTOINCREMENT, endpoint_id TEXT NOT NULL, event_id TEXT NOT NULL, event_seq INTEGER NOT NULL,
                    key TEXT NOT NULL, status TEXT NOT NULL, attempts INTEGER NOT NULL, due_at REAL NOT NULL, lease_until REAL,
                    last_attempt_at REAL, last_status INTEGER, last_error TEXT, last_latency_ms INTEGER, last_excerpt TEXT, finished_at REAL,
                    UNIQUE (endpoint_id, event_id))
                """,
            ] + WebhookStatements.indexes),
        // What retention finds by age without a scan (`RetentionStatements`).
        StoreMigration(name: "0019-retention", statements: RetentionStatements.indexes),
        // A request's trace context (W3C `traceparent`), with its payload, when a tracer runs.
        StoreMigration(name: "0020-trace-context", statements: ["ALTER TABLE payloads ADD COLUMN trace_parent TEXT"]),
        // The iOS a push-to-start token's device runs, as its app reported it: a device that cannot join
        // a channel is started with its own update token instead.
        StoreMigration(name: "0021-device-ios", statements: ["ALTER TABLE push_to_start_tokens ADD COLUMN system_version TEXT"]),
        // A key's pushes newest first, as its listing reads them: without it, the page of a key with
        // 300,000 pushes sorted all of them (120 ms).
        StoreMigration(
            name: "0022-deliveries-by-key-newest", statements: ["CREATE INDEX deliveries_by_key_newest ON deliveries (bundle_id, key, id)"]),
        // A key's latest state, which a device that reports late is caught up with: its last alert
        // with its time; and the devices sent its start, which an update counts while they have
        // not reported (`StoreStatements.awaitingDevices`).
        StoreMigration(
            name: "0023-latest-state",
            statements: [
                "ALTER TABLE activities ADD COLUMN alert TEXT", "ALTER TABLE activities ADD COLUMN alert_at REAL",
                StoreStatements.startsByDeviceIndex,
            ]),
        // Which environments an app's reports need no grant in (`AppRecord.ungrantedReports`).
        StoreMigration(
            name: "0024-grants", statements: ["ALTER TABLE apps ADD COLUMN ungranted_reports TEXT NOT NULL DEFAULT 'sandbox'"]),
        // A push-to-start token is kept once per app: found by its value (`forgetTokenOfOtherDevices`).
        StoreMigration(name: "0025-token-once", statements: [StoreStatements.pushToStartTokensByTokenIndex]),
        // A contract for each app version (`''`: for any version, as every contract was until now),
        // and the version of the app that holds each token: a push is checked version by version.
        StoreMigration(
            name: "0026-app-versions",
            statements: [
                """
                CREATE TABLE contracts_by_version (
                    bundle_id TEXT NOT NULL, attributes_type TEXT NOT NULL, contract TEXT NOT NULL, updated_at REAL NOT NULL,
                    app_version TEXT NOT NULL DEFAULT '', pinned INTEGER NOT NULL DEFAULT 0,
                    PRIMARY KEY (bundle_id, attributes_type, app_version))
                """,
                """
                INSERT INTO contracts_by_version (bundle_id, attributes_type, contract, updated_at)
                SELECT bundle_id, attributes_type, contract, updated_at FROM contracts
                """,
                "DROP TABLE contracts",
                "ALTER TABLE contracts_by_version RENAME TO contracts",
                "ALTER TABLE push_to_start_tokens ADD COLUMN app_version TEXT",
                "ALTER TABLE activity_tokens ADD COLUMN app_version TEXT",
                // Their first form, led by the app (`0031-token-indexes`).
                "CREATE INDEX push_to_start_tokens_by_app_version ON push_to_start_tokens (bundle_id, app_version)",
                "CREATE INDEX activity_tokens_by_app_version ON activity_tokens (bundle_id, app_version) WHERE state = 'live'",
            ]),
        // The first named release (CHANGELOG.md): what only earlier, untagged builds wrote is
        // forgotten, not carried. Idempotency keys whose answer those builds kept as HTTP (they
        // live a day); a schedule they ran keeps no result (`ScheduleResult(stored:state:)`).
        StoreMigration(name: "0027-first-release", statements: ["DELETE FROM idempotency_keys WHERE answer IS NULL"]),
        // The environment of the build that registered a contract: only a development build's may
        // be registered again, changed, by the app (`ContractRecord.registeredIn`).
        StoreMigration(name: "0028-contract-environment", statements: ["ALTER TABLE contracts ADD COLUMN registered_in TEXT"]),
        // Widget and control tokens (iOS 26), with the widgets placed.
        StoreMigration(
            name: "0029-surface-tokens",
            statements: [
                StoreStatements.surfaceTokensTable(seconds: "REAL"), StoreStatements.surfaceTokensByTokenIndex,
            ]),
        // A key's history no longer ordered by device: each token keeps its newest attempted push
        // instead, and a late report's reads go by the key's changes (issue 59).
        StoreMigration(
            name: "0030-history-without-device-order",
            statements: StoreStatements.historyWithoutDeviceOrder(trigger: [StoreStatements.sqliteLastDeliveryTrigger], idType: "INTEGER")),
        // Token indexes led by what a key's reads do not name (issue 59).
        StoreMigration(name: "0031-token-indexes", statements: StoreStatements.tokenIndexes),
        // The index of reloads by their event, not by their empty key (issue 59).
        StoreMigration(name: "0032-reloads-by-event", statements: StoreStatements.reloadsIndex),
        // Pushes that ended unsent, counted and paged without reading the history.
        StoreMigration(name: "0033-unsent-pushes", statements: [StoreStatements.unsentIndex]),
        // One process's rates are kept in its memory (`RequestLimiter`): nothing to change here.
        StoreMigration(name: "0034-rate-reservations", statements: []),
    ]
}
