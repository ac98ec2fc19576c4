import Foundation
import GRDB

extension SQLiteStore {
    package func insertWebhookEndpoint(_ endpoint: WebhookEndpointRecord, limit: Int) async throws -> Bool {
        // In the one writer's transaction: no other insert comes between the count and this one.
        try await write { db in
            let count = try Int.fetchOne(db, sql: WebhookStatements.countAppEndpoints, arguments: [endpoint.bundleID]) ?? 0
            guard count < limit else { return false }
            try db.run(WebhookStatements.insertEndpoint, WebhookEndpointRecord.table.arguments(endpoint).sqlite)
            return true
        }
    }

    package func replaceWebhookSecrets(_ secrets: [(id: String, secret: String)]) async throws {
        try await write { db in
            for (id, secret) in secrets { try db.run(WebhookStatements.replaceSecret, [secret, id]) }
        }
    }

    package func updateWebhookEndpoint(_ endpoint: WebhookEndpointRecord) async throws -> Bool {
        try await write { db in
            try db.run(WebhookStatements.updateEndpoint, WebhookStatements.updateArguments(endpoint).sqlite)
            return db.changesCount > 0
        }
    }

    package func webhookEndpoints(app: String?) async throws -> [WebhookEndpointRecord] {
        try await pool.read { db in
            guard let app else { return try db.fetchAll(WebhookStatements.allEndpoints, as: WebhookEndpointRecord.init(row:)) }
            return try db.fetchAll(WebhookStatements.appEndpoints, [app], as: WebhookEndpointRecord.init(row:))
        }
    }

    package func webhookEndpoint(id: String) async throws -> WebhookEndpointRecord? {
        try await pool.read { db in try db.fetchOne(WebhookStatements.endpoint, [id], as: WebhookEndpointRecord.init(row:)) }
    }

    package func deleteWebhookEndpoint(id: String) async throws -> Bool {
        try await write { db in
            try db.run(WebhookStatements.deleteDeliveries, [id])
            try db.run(WebhookStatements.deleteEndpoint, [id])
            return db.changesCount > 0
        }
    }

    package func recordTestEvent(_ event: NewEvent, endpointID: String, at: Date) async throws -> String {
        try await write { db in
            let id = NewEvent.newID()
            let statement = OutboxStatements.record(event, at: at, id: id)
            try db.run(statement.text, statement.sqliteArguments)
            // Outside the key's order (number 0): a test waits for nothing and holds nothing up.
            try db.run(WebhookStatements.redeliver, [.text(endpointID), .text(id), .integer(0), .text(event.key), .seconds(at)].sqlite)
            return id
        }
    }

    package func redeliverWebhookEvent(endpointID: String, eventID: String, at: Date) async throws -> Bool {
        try await write { db in
            guard let endpoint = try db.fetchOne(WebhookStatements.endpoint, [endpointID], as: WebhookEndpointRecord.init(row:)),
                let event = try db.fetchOne(WebhookStatements.appEvent, [endpoint.bundleID, eventID], as: { ($0.integer(0) ?? 0, $0.string(1)) })
            else { return false }
            try db.run(WebhookStatements.redeliver, [.text(endpointID), .text(eventID), .integer(event.0), .text(event.1), .seconds(at)].sqlite)
            return true
        }
    }

    package func claimWebhookDeliveries(dueBy now: Date, limit: Int, perEndpoint: Int, leaseUntil: Date) async throws -> [ClaimedWebhookDelivery] {
        let waiting = try await pool.read { db in
            try db.fetchOne(WebhookStatements.workWaiting(unnumbered: false), [now.seconds, now.seconds], as: { $0.bool(0) }) ?? false
        }
        guard waiting else { return [] }
        return try await write { db in
            // One writer: the log's numbers are drawn in commit order, so the feed skips none.
            let last = try db.fetchOne(WebhookStatements.lastEvent, as: { $0.integer(0) ?? 0 }) ?? 0
            let batch = Int64(WebhookStatements.feedBatch)
            try db.run(WebhookStatements.feed, [.seconds(now), .integer(batch), .integer(last), .integer(last)].sqlite)
            try db.run(
                WebhookStatements.advanceCursors, [.integer(batch), .integer(last), .integer(batch), .integer(last), .integer(last)].sqlite)
            let ids = try db.fetchAll(WebhookStatements.due, [now.seconds, now.seconds, now.seconds, perEndpoint, limit], as: { $0.integer(0) ?? 0 })
            guard !ids.isEmpty else { return [] }
            let lease = WebhookStatements.lease(ids, until: leaseUntil)
            try db.execute(sql: lease.text, arguments: lease.sqliteArguments)
            let claimed = WebhookStatements.claimed(ids)
            return try Row.fetchAll(db, sql: claimed.text, arguments: claimed.sqliteArguments).map(WebhookStatements.claimedDelivery)
        }
    }

    package func recordWebhookOutcomes(_ outcomes: [(id: Int64, outcome: WebhookOutcome)], disableFailingSince: Date, at: Date) async throws
        -> [String]
    {
        guard !outcomes.isEmpty else { return [] }
        return try await write { db in
            let owners = WebhookStatements.endpoints(of: outcomes.map(\.id))
            let endpoints = Dictionary(
                try Row.fetchAll(db, sql: owners.text, arguments: owners.sqliteArguments).map { ($0.integer(0) ?? 0, $0.string(1)) },
                uniquingKeysWith: { first, _ in first })
            for (id, outcome) in outcomes {
                let statement = WebhookStatements.record(id: id, outcome)
                try db.run(statement.text, statement.sqliteArguments)
            }
            var disabled: [String] = []
            for health in WebhookStatements.EndpointHealth.of(outcomes, endpoints: endpoints) {
                try db.run(health.update.text, health.update.sqliteArguments)
                if let disable = health.disable(failingSince: disableFailingSince) {
                    disabled += try db.fetchAll(disable.text, disable.sqliteArguments, as: { $0.string(0) })
                }
            }
            return disabled
        }
    }

    package func webhookDeliveries(endpointID: String, limit: Int) async throws -> [WebhookDeliveryRecord] {
        try await pool.read { db in try db.fetchAll(WebhookStatements.deliveries, [endpointID, limit], as: WebhookDeliveryRecord.init(row:)) }
    }
}
