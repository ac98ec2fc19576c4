import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// `/v1/grants`: the backend's grant for a key or a user, which it hands its app (a server key).
extension RelayAPI {
    func addGrantRoutes(to router: Router<RelayRequestContext>) {
        let server = router.group("/v1").add(middleware: guarded(.server))
        server.post("/grants") { request, context in
            let body = try await request.decodeJSON(GrantBody.self, context: context)
            let app = try Self.bodyApp(body.namedApp, context)
            let (grant, expiresAt) = try await relay.issueGrant(app: app, key: body.key, user: body.user, expiresIn: body.expiresIn)
            var answer: JSONValue.Members = [("bundleID", .string(app))]
            if let key = body.key { answer.append(("key", .string(key))) }
            if let user = body.user { answer.append(("user", .string(user))) }
            answer += [("grant", .string(grant)), ("expiresAt", .string(expiresAt.iso8601))]
            return Self.json(.object(answer), status: .created)
        }
    }
}
