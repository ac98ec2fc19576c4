import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// What happened: `/v1/deliveries` (every push, and retrying a failed one) and `/v1/events` (the
/// event log).
extension RelayAPI {
    func addHistoryRoutes(to router: Router<RelayRequestContext>) {
        let server = router.group("/v1").add(middleware: guarded(.server))
        server.get("/deliveries") { request, context in try await deliveries(request, context) }
        server.post("/deliveries/{id}/retry") { request, context in
            let text = try Self.pathParameter("id", context)
            guard let id = Int64(text) else { throw APIError.invalid("id", "must be a delivery id") }
            let retry = try await relay.retryDelivery(id: id, app: try Self.appFilter(request, context))
            return Self.json(RelayView.json(retry), status: .created)
        }
        router.group("/v1").add(middleware: guarded(.server, .admin)).get("/events") { request, context in
            let query = try EventQuery(parameters: request.queryDictionary(), bundleID: try Self.appFilter(request, context))
            if let key = query.key { try RelayService.checkKey(key) }
            let page = try await relay.events(query)
            // Where to read on from: after the last event read, or where this read started.
            let next = page.last?.sequence ?? query.after
            return Self.json(.object([("events", .array(page.map(\.json))), ("next", .string(String(next)))]))
        }
    }
}
