import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// `/v1/channels`: the broadcast channels the server made or was given (an admin key).
extension RelayAPI {
    func addChannelRoutes(to router: Router<RelayRequestContext>) {
        let admin = router.group("/v1").add(middleware: guarded(.admin))
        admin.get("/channels") { _, _ in
            Self.json(.object([("channels", .array(try await relay.channels().map(RelayView.json)))]))
        }
        admin.delete("/channels/{id}") { _, context in
            let id = try Self.pathParameter("id", context)
            try await relay.deleteChannel(id)
            return Self.json(.object([("channelID", .string(id)), ("deleted", .bool(true))]))
        }
    }
}
