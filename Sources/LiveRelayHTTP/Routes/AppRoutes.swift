import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// `/v1/apps`: the apps the server sends for, with their credentials (an admin key).
extension RelayAPI {
    func addAppRoutes(to router: Router<RelayRequestContext>) {
        let admin = router.group("/v1").add(middleware: guarded(.admin))
        admin.get("/apps") { _, _ in
            let contracts = try await relay.contracts(app: nil)
            return Self.json(.object([("apps", .array(try await relay.apps().map { RelayView.json($0, contracts: contracts) }))]))
        }
        admin.get("/apps/{bundleID}") { _, context in
            let app = try await relay.app(try Self.pathParameter("bundleID", context), field: "bundleID")
            return Self.json(RelayView.json(app, contracts: try await relay.contracts(app: app.bundleID)))
        }
        admin.put("/apps/{bundleID}") { [configuration] request, context in
            let body = try await request.decodeJSON(AppBody.self, context: context)
            let (app, isNew) = try await relay.registerApp(try body.registration(bundleID: try Self.pathParameter("bundleID", context)))
            var json = RelayView.json(app, contracts: try await relay.contracts(app: app.bundleID))
            if configuration.sendsToBuiltInEmulator {
                json.set(
                    "warnings",
                    .array([
                        .string(
                            "this server sends every app's pushes to its built-in emulator, not to Apple: start it with APNs credentials to reach iPhones"
                        )
                    ]))
            }
            return Self.json(json, status: isNew ? .created : .ok)
        }
    }
}
