import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// `/v1/schedules`: an app's scheduled starts, updates and ends (a server key).
extension RelayAPI {
    func addScheduleRoutes(to router: Router<RelayRequestContext>) {
        let server = router.group("/v1").add(middleware: guarded(.server))
        server.get("/schedules") { request, context in
            let key = request.uri.queryParameters["key"].map(String.init)
            let schedules = try await relay.schedules(app: try Self.appFilter(request, context), key: key)
            return Self.json(.object([("schedules", .array(schedules.map(RelayView.json)))]))
        }
        server.get("/schedules/{id}") { _, context in
            Self.json(RelayView.json(try await schedule(try Self.pathParameter("id", context), context)))
        }
        server.delete("/schedules/{id}") { _, context in
            let id = try Self.pathParameter("id", context)
            _ = try await schedule(id, context)
            return Self.json(RelayView.json(try await relay.cancelSchedule(id: id)))
        }
    }
}
