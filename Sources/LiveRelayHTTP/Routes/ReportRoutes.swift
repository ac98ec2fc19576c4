import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// What the app sends (a client key, for one app, which its bodies may name): its push-to-start
/// tokens, each activity's update token or listening, what the person did, and its widget and
/// control tokens.
extension RelayAPI {
    func addReportRoutes(to router: Router<RelayRequestContext>) {
        let client = router.group("/v1").add(middleware: guarded(.client))
        client.post("/push-to-start-tokens") { request, context in
            let body = try await request.decodeJSON(PushToStartBody.self, context: context)
            var registration = body.registration
            registration.bundleID = try Self.bodyApp(body.namedApp, context)
            try await relay.registerPushToStartToken(registration)
            return Self.json(.object([("registered", .bool(true))]), status: .created)
        }
        client.post("/push-to-start-tokens/withdraw") { request, context in
            let body = try await request.decodeJSON(WithdrawBody.self, context: context)
            let app = try Self.bodyApp(body.namedApp, context)
            return Self.json(.object([("withdrawn", .integer(try await relay.withdrawPushToStartTokens(deviceID: body.deviceID, bundleID: app)))]))
        }
        client.post("/widget-tokens") { request, context in
            let body = try await request.decodeJSON(WidgetTokensBody.self, context: context)
            var registration = body.registration
            registration.bundleID = try Self.bodyApp(body.namedApp, context)
            return Self.json(.object([("tokens", .integer(try await relay.registerSurfaceTokens(registration)))]), status: .created)
        }
        client.post("/control-tokens") { request, context in
            let body = try await request.decodeJSON(ControlTokensBody.self, context: context)
            var registration = body.registration
            registration.bundleID = try Self.bodyApp(body.namedApp, context)
            return Self.json(.object([("tokens", .integer(try await relay.registerSurfaceTokens(registration)))]), status: .created)
        }
        client.post("/activities/{key}/tokens") { request, context in
            let key = try activityKey(context)
            let body = try await request.decodeJSON(ActivityTokenBody.self, context: context)
            var registration = body.registration
            registration.bundleID = try Self.bodyApp(body.namedApp, context)
            registration.reportedBy = try Self.reportedBy(request)
            let saved = try await relay.registerActivityToken(key: key, registration)
            var answer: JSONValue.Members = [("key", .string(key)), ("state", .string(saved.activity.state.rawValue))]
            if let caughtUp = saved.caughtUp { answer.append(("caughtUp", .string(caughtUp.push.event.rawValue))) }
            return Self.json(.object(answer), status: .created)
        }
        client.post("/activities/{key}/listening") { request, context in
            let key = try activityKey(context)
            let body = try await request.decodeJSON(ChannelListenerBody.self, context: context)
            var registration = body.registration
            registration.bundleID = try Self.bodyApp(body.namedApp, context)
            registration.reportedBy = try Self.reportedBy(request)
            try await relay.registerChannelListener(key: key, registration)
            return Self.json(.object([("key", .string(key)), ("listening", .bool(true))]), status: .created)
        }
        client.post("/activities/{key}/ended") { request, context in
            let body = try await request.decodeJSON(EndedBody.self, context: context)
            var report = body.report
            report.bundleID = try Self.bodyApp(body.namedApp, context)
            return Self.json(.object([("recorded", .bool(try await relay.reportEnded(key: try activityKey(context), report)))]))
        }
    }
}
