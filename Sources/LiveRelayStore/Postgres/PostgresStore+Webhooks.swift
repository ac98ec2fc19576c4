import Foundation
import PostgresNIO

extension PostgresStore {
    package func insertWebhookEndpoint(_ endpoint: WebhookEndpointRecord, limit: Int) async throws -> Bool {
        try await transaction { db in
            // Its cursor is the log's last number: what is written from now on is numbered after it.
            // The numbering lock, held to the end, also keeps every other insert from coming
            // between the count and this one.
            try await numberEvents(db)
            let count = try await db.rows(WebhookStatements.countAppEndpoints, [.text(endpoint.bundleID)]).first?.int(0) ?? 0
            guard count < limit else { return false }
            try await db.run(WebhookStatements.insertEndpoint, WebhookEndpointRecord.table.arguments(endpoint))
            return true
        }
    }

    package func replaceWebhookSecrets(_ secrets: [(id: String, secret: String)]) async throws {
        try await transaction { db in
            for (id, secret) in secrets { try await db.run(WebhookStatements.replaceSecret, [.text(secret), .text(id)]) }
        }
    }

    package func updateWebhookEndpoint(_ endpoint: WebhookEndpointRecord) async throws -> Bool {
        try await connection { db in try await db.changed(WebhookStatements.updateEndpoint, WebhookStatements.updateArguments(endpoint)) > 0 }
    }

    package func webhookEndpoints(app: String?) async throws -> [WebhookEndpointRecord] {
        guard let app else { return try await rows(WebhookStatements.allEndpoints).map(WebhookEndpointRecord.init(row:)) }
        return try await rows(WebhookStatements.appEndpoints, [.text(app)]).map(WebhookEndpointRecord.init(row:))
    }

    package func webhookEndpoint(id: String) async throws -> WebhookEndpointRecord? {
        try await rows(WebhookStatements.endpoint, [.text(id)]).first.map(WebhookEndpointRecord.init(row:))
    }

    package func deleteWebhookEndpoint(id: String) async throws -> Bool {
        try await transaction { db in
            try await db.run(WebhookStatements.deleteDeliveries, [.text(id)])
            return try await db.changed(WebhookStatements.deleteEndpoint, [.text(id)]) > 0
        }
    }

    package func recordTestEvent(_ event: NewEvent, endpointID: String, at: Date) async throws -> String {
        try await transaction { db in
            let id = NewEvent.newID()
            try await db.rows(OutboxStatements.record(event, at: at, id: id))
            // Outside the key's order (number 0): a test waits for nothing and holds nothing up.
            try await db.run(WebhookStatements.redeliver, [.text(endpointID), .text(id), .integer(0), .text(event.key), .seconds(at)])
            return id
        }
    }

    package func redeliverWebhookEvent(endpointID: String, eventID: String, at: Date) async throws -> Bool {
        try await transaction { db in
            try await numberEvents(db)
            guard let endpoint = try await db.rows(WebhookStatements.endpoint, [.text(endpointID)]).first.map(WebhookEndpointRecord.init(row:)),
                let event = try await db.rows(WebhookStatements.appEvent, [.text(endpoint.bundleID), .text(eventID)]).first
            else { return false }
            try await db.run(
                WebhookStatements.redeliver, [.text(endpointID), .text(eventID), .integer(event.integer(0)), .text(event.string(1)), .seconds(at)])
            return true
        }
    }

    package func claimWebhookDeliveries(dueBy now: Date, limit: Int, perEndpoint: Int, leaseUntil: Date) async throws -> [ClaimedWebhookDelivery] {
        guard try await rows(WebhookStatements.workWaiting(unnumbered: true), [.seconds(now), .seconds(now)]).first?.bool(0) == true else {
            return []
        }
        return try await transaction { db in
            // Under the numbering lock, held to the commit: instances feed and claim one at a
            // time, so each sees the other's cursors and leases, and a key's next event is
            // claimed only once the one before it is delivered.
            try await numberEvents(db)
            let last = try await db.rows(WebhookStatements.lastEvent).first?.integer(0) ?? 0
            let batch = Int64(WebhookStatements.feedBatch)
            try await db.run(WebhookStatements.feed, [.seconds(now), .integer(batch), .integer(last), .integer(last)])
            try await db.run(WebhookStatements.advanceCursors, [.integer(batch), .integer(last), .integer(batch), .integer(last), .integer(last)])
            let ids = try await db.rows(
                WebhookStatements.due, [.seconds(now), .seconds(now), .seconds(now), .integer(Int64(perEndpoint)), .integer(Int64(limit))]
            ).compactMap { $0.integer(0) }
            guard !ids.isEmpty else { return [] }
            try await db.rows(WebhookStatements.lease(ids, until: leaseUntil))
            return try await db.rows(WebhookStatements.claimed(ids)).map(WebhookStatements.claimedDelivery)
        }
    }

    package func recordWebhookOutcomes(_ outcomes: [(id: Int64, outcome: WebhookOutcome)], disableFailingSince: Date, at: Date) async throws
        -> [String]
    {
        guard !outcomes.isEmpty else { return [] }
        return try await transaction { db in
            let endpoints = Dictionary(
                try await db.rows(WebhookStatements.endpoints(of: outcomes.map(\.id))).map { ($0.integer(0) ?? 0, $0.string(1)) },
                uniquingKeysWith: { first, _ in first })
            for (id, outcome) in outcomes { try await db.rows(WebhookStatements.record(id: id, outcome)) }
            var disabled: [String] = []
            for health in WebhookStatements.EndpointHealth.of(outcomes, endpoints: endpoints) {
                try await db.rows(health.update)
                if let disable = health.disable(failingSince: disableFailingSince) { disabled += try await db.rows(disable).map { $0.string(0) } }
            }
            return disabled
        }
    }

    package func webhookDeliveries(endpointID: String, limit: Int) async throws -> [WebhookDeliveryRecord] {
        try await rows(WebhookStatements.deliveries, [.text(endpointID), .integer(Int64(limit))]).map(WebhookDeliveryRecord.init(row:))
    }
}
