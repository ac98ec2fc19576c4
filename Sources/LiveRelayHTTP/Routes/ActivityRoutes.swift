import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// `/v1/activities`: the backend starts, updates and ends an app's activities by key, and reads
/// one (a server key); listings for whoever reads (server, admin, viewer). `/v1/widgets/reload`
/// and `/v1/controls/reload`: the backend reloads an app's widgets or controls (a server key).
extension RelayAPI {
    func addActivityRoutes(to router: Router<RelayRequestContext>) {
        let server = router.group("/v1").add(middleware: guarded(.server))
        server.post("/activities/{key}/start") { request, context in
            let key = try activityKey(context)
            let app = try await app(request, context)
            return try await idempotent(request, context, app: app) { json, claim in
                try await relay.start(app: app, key: key, StartRequest(json: json), idempotency: claim)
            }
        }
        for event in [LiveActivityPayload.Event.update, .end] {
            server.post("/activities/{key}/\(event.rawValue)") { request, context in
                let key = try activityKey(context)
                let app = try await app(request, context, key: key)
                return try await idempotent(request, context, app: app) { json, claim in
                    try await relay.change(app: app, key: key, ChangeRequest(event: event, json: json), idempotency: claim)
                }
            }
        }
        for type in ReloadPushType.allCases {
            server.post("/\(type.rawValue)/reload") { request, context in
                let app = try await app(request, context)
                return try await idempotent(request, context, app: app) { json, claim in
                    try await relay.reload(app: app, type, ReloadRequest(json: json), idempotency: claim)
                }
            }
        }
        server.get("/activities/{key}") { request, context in
            let key = try activityKey(context)
            return Self.json(RelayView.json(try await relay.describe(app: try await app(request, context, key: key), key: key)))
        }
        let reading = router.group("/v1").add(middleware: guarded(.server, .admin, .viewer))
        reading.get("/activities") { request, context in
            let query = try ActivityQuery(parameters: request.queryDictionary(), bundleID: try Self.appFilter(request, context), limit: 50)
            let page = try await relay.activities(query)
            var members: JSONValue.Members = [("activities", .array(page.map(RelayView.json)))]
            if page.count == query.limit, let last = page.last { members.append(("after", .string(ActivityCursor(after: last).token))) }
            return Self.json(.object(members))
        }
    }
}
