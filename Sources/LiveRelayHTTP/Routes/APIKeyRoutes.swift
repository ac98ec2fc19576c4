import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// `/v1/api-keys`: making, listing and revoking keys (an admin key).
extension RelayAPI {
    func addAPIKeyRoutes(to router: Router<RelayRequestContext>) {
        let admin = router.group("/v1").add(middleware: guarded(.admin))
        admin.post("/api-keys") { request, context in
            let body = try await request.decodeJSON(APIKeyBody.self, context: context)
            let (record, secret) = try await relay.createAPIKey(name: body.name, scope: body.scope, app: body.bundleID)
            var view = RelayView.json(record)
            view.set("secret", .string(secret))
            return Self.json(view, status: .created)
        }
        admin.get("/api-keys") { _, _ in
            Self.json(.object([("apiKeys", .array(try await relay.apiKeys().map(RelayView.json)))]))
        }
        admin.delete("/api-keys/{id}") { _, context in
            let id = try Self.pathParameter("id", context)
            try await relay.revokeAPIKey(id: id)
            return Self.json(.object([("id", .string(id)), ("revoked", .bool(true))]))
        }
    }
}
