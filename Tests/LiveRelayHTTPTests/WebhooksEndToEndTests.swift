import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import SimulatedDevices
import Testing

/// Webhooks from a real server to a real receiver that verifies every delivery with the Standard
/// Webhooks specification's Python library (`standardwebhooks`, from PyPI).
struct WebhooksEndToEndTests {
    /// Python receivers started on a machine busy with every other test, and a down one's connect
    /// timeouts: more than the usual minute.
    static let deadline = Duration.seconds(150)

    /// The harness allows loopback endpoints, as the demo does.
    static func allowingLoopback(_ configuration: inout RelayConfiguration, _: inout RelayAPIConfiguration) {
        configuration.webhooks.addresses = .loopback
    }

    func makeEndpoint(_ relay: RelayHarness, port: Int, types: [String]? = nil) async throws -> (id: String, secret: String) {
        var body: JSONValue.Members = [("url", .string("http://127.0.0.1:\(port)/hooks"))]
        if let types { body.append(("eventTypes", .array(types.map(JSONValue.string)))) }
        let made = try await relay.post("/v1/webhooks", .object(body))
        #expect(made.status == 201, "\(made.json)")
        return (try #require(made.json["id"]?.stringValue), try #require(made.json["secret"]?.stringValue))
    }

    func dismiss(_ relay: RelayHarness, on device: String) throws {
        let activity = try #require(try relay.activity(on: device))
        try relay.emulator.devices.withDevice(device) { device, now in ((), device.dismissByPerson(activityID: activity.id, at: now)) }
    }

    func log(_ relay: RelayHarness, _ query: String) async throws -> [JSONValue] {
        try await relay.get("/v1/events?" + query).json["events"]?.arrayElements ?? []
    }

    @Test(.enabled(if: WebhookReceiver.isAvailable || TestRequirement.isCI, Comment(rawValue: WebhookReceiver.skipNote)))
    func aBackendVerifiesEverySignedEventWithTheStandardWebhooksLibrary() async throws {
        try await withRelayHarness(configure: Self.allowingLoopback, deadline: Self.deadline) { relay in
            let port = try freeLoopbackPort()
            let endpoint = try await makeEndpoint(relay, port: port)
            let receiver = try await WebhookReceiver.start(secret: endpoint.secret, port: port)
            // Another endpoint, for ends only, whose receiver holds another secret.
            let otherPort = try freeLoopbackPort()
            let other = try await makeEndpoint(relay, port: otherPort, types: ["activity.ended"])
            let impostor = try await WebhookReceiver.start(secret: WebhookSecret.generate().text, port: otherPort)
            do {
                try await relay.startActivity("order-1", on: ["iphone-1"])
                try dismiss(relay, on: "iphone-1")
                try await relay.eventually { try await self.log(relay, "key=order-1").count == 3 }
                let test = try await relay.post("/v1/webhooks/\(endpoint.id)/test", .object([]))
                #expect(test.status == 202)
                try await relay.postWebhooks()

                let received = try receiver.received()
                let errors = received.compactMap { $0.error }
                #expect(errors.isEmpty && !received.isEmpty, "\(errors)")
                // Each event exactly as the log has it, the webhook-id its id, in order.
                let heard = try await log(relay, "key=order-1")
                #expect(received.filter { $0.event?["key"] == .string("order-1") }.map(\.event) == heard.map { $0 })
                #expect(received.map(\.id) == received.map { $0.event?["id"]?.stringValue })
                let types = received.map { $0.event?["type"]?.stringValue ?? "" }
                #expect(types.sorted() == ["activity.ended", "activity.ended", "activity.started", "webhook.test"])
                #expect(received.first { $0.event?["type"] == .string("activity.ended") }?.event?["data"]?["cause"] == .string("dismissed"))
                #expect(received.first { $0.id == test.json["eventID"]?.stringValue }?.event?["type"] == .string("webhook.test"))

                // The library refuses what another secret signed: the endpoint shows why, and will retry.
                // The key's second end waits behind its first.
                let refused = try impostor.received()
                #expect(refused.count == 1 && refused.first?.verified == false, "\(refused.map { $0.error ?? "verified" })")
                let shown = try await relay.get("/v1/webhooks/\(other.id)")
                let deliveries = shown.json["deliveries"]?.arrayElements ?? []
                #expect(deliveries.map { $0["status"] } == [.string("pending"), .string("pending")], "\(shown.json)")
                let attempted = deliveries.filter { $0["attempts"] == .integer(1) }
                #expect(attempted.count == 1 && deliveries.filter { $0["attempts"] == .integer(0) }.count == 1)
                #expect(
                    attempted.first?["lastAttempt"]?["status"] == .integer(401) && attempted.first?["lastAttempt"]?["error"] == .string("HTTP 401"))
                #expect(shown.json["failingSince"] != nil && shown.json["secret"] == nil)
                let good = try await relay.get("/v1/webhooks/\(endpoint.id)").json
                #expect((good["deliveries"]?.arrayElements ?? []).map { $0["status"] } == Array(repeating: .string("delivered"), count: 4))
            } catch {
                await receiver.stop()
                await impostor.stop()
                throw error
            }
            await receiver.stop()
            await impostor.stop()
        }
    }

    /// The receiver is down for a minute while events happen: afterwards every one arrives, once,
    /// in order per key (a key's next event waits for the one before it).
    @Test(.enabled(if: WebhookReceiver.isAvailable || TestRequirement.isCI, Comment(rawValue: WebhookReceiver.skipNote)))
    func theReceiverDownForAMinuteGetsEveryEventOnceInOrderPerKey() async throws {
        try await withRelayHarness(configure: Self.allowingLoopback, deadline: Self.deadline) { relay in
            let port = try freeLoopbackPort()
            let endpoint = try await makeEndpoint(relay, port: port)
            let first = try await WebhookReceiver.start(secret: endpoint.secret, port: port)
            await first.stop()

            // Three keys, each on an iPhone of its own.
            for number in 1...3 { try await relay.addRegisteredDevice("iphone-\(number)") }
            for number in 1...3 {
                let audience = JSONValue.object([("devices", .array([.string("iphone-\(number)")]))])
                _ = try await relay.post("/v1/activities/order-\(number)/start", startBody(key: "order-\(number)", audience: audience))
                try await relay.dispatch()
                try await relay.waitForToken("order-\(number)", device: "iphone-\(number)")
            }
            for number in 1...2 { try dismiss(relay, on: "iphone-\(number)") }
            try await relay.eventually { try await self.log(relay, "").count == 7 }
            try await relay.postWebhooks()
            for _ in 0..<12 {
                try await relay.advance(by: 5)
                try await relay.postWebhooks()
            }
            let waiting = try await relay.get("/v1/webhooks/\(endpoint.id)").json
            let tried = waiting["deliveries"]?.arrayElements?.filter { $0["lastAttempt"] != nil } ?? []
            #expect(tried.count == 3, "each key's first event only: \(waiting)")
            #expect(tried.allSatisfy { $0["attempts"] == .integer(2) && $0["lastAttempt"]?["error"] == .string("connection refused") })

            let back = try await WebhookReceiver.start(secret: endpoint.secret, port: port, log: first.log)
            do {
                try await relay.advance(by: 330)
                try await relay.postWebhooks()
                let received = try back.received()
                let errors = received.compactMap { $0.error }
                #expect(received.count == 7 && errors.isEmpty, "\(errors)")
                #expect(Set(received.compactMap(\.id)).count == 7, "each once")
                for number in 1...3 {
                    let key = JSONValue.string("order-\(number)")
                    let inLog = try await log(relay, "key=order-\(number)").map { $0["id"] }
                    #expect(received.filter { $0.event?["key"] == key }.map { $0.event?["id"] } == inLog, "order-\(number) in order")
                }
            } catch {
                await back.stop()
                throw error
            }
            await back.stop()
        }
    }

    /// The failures nobody else reports reach the backend, signed: a start the iPhone dropped
    /// without a word (its push-to-start token killed by an iOS update), and a dead token.
    @Test(.enabled(if: WebhookReceiver.isAvailable || TestRequirement.isCI, Comment(rawValue: WebhookReceiver.skipNote)))
    func theBackendHearsAStartThatNeverArrivedAndADeadToken() async throws {
        try await withRelayHarness(configure: Self.allowingLoopback, deadline: Self.deadline) { relay in
            let port = try freeLoopbackPort()
            let endpoint = try await makeEndpoint(relay, port: port, types: ["activity.start_unconfirmed", "token.invalidated"])
            let receiver = try await WebhookReceiver.start(secret: endpoint.secret, port: port)
            do {
                for device in ["iphone-1", "iphone-2"] { try await relay.addRegisteredDevice(device) }
                try relay.emulator.devices.perform(.updateOS(), on: "iphone-1")
                let toOne = JSONValue.object([("devices", .array([.string("iphone-1")]))])
                #expect(try await relay.post("/v1/activities/order-1/start", startBody(key: "order-1", audience: toOne)).status == 201)
                let toTwo = JSONValue.object([("devices", .array([.string("iphone-2")]))])
                #expect(try await relay.post("/v1/activities/order-2/start", startBody(key: "order-2", audience: toTwo)).status == 201)
                try await relay.dispatch()
                try await relay.waitForToken("order-2", device: "iphone-2")
                _ = relay.emulator.faults.add(EmulatorFault(EmulatorFault.respond(.unregistered)))
                #expect(try await relay.post("/v1/activities/order-2/update", .object([("contentState", content("late", 40))])).status == 200)
                try await relay.dispatch()
                try await relay.advance(by: 121)
                try await relay.postWebhooks()

                let received = try receiver.received()
                let errors = received.compactMap { $0.error }
                #expect(errors.isEmpty && received.count == 2, "\(received.map { $0.event?["type"] ?? .null }) \(errors)")
                let unconfirmed = received.first { $0.event?["type"] == .string("activity.start_unconfirmed") }?.event
                #expect(unconfirmed?["key"] == .string("order-1") && unconfirmed?["deviceID"] == .string("iphone-1"))
                let dead = received.first { $0.event?["type"] == .string("token.invalidated") }?.event
                #expect(dead?["key"] == .string("order-2") && dead?["data"]?["reason"] == .string("Unregistered"))
            } catch {
                await receiver.stop()
                throw error
            }
            await receiver.stop()
        }
    }

    /// A redirect is an answer that fails, never followed: a key holder cannot bounce the server's
    /// posts to an address it would refuse.
    @Test(.enabled(if: WebhookReceiver.isAvailable || TestRequirement.isCI, Comment(rawValue: WebhookReceiver.skipNote)))
    func aRedirectIsNotFollowed() async throws {
        try await withRelayHarness(configure: Self.allowingLoopback, deadline: Self.deadline) { relay in
            let target = try await WebhookReceiver.start(secret: WebhookSecret.generate().text)
            let port = try freeLoopbackPort()
            let endpoint = try await makeEndpoint(relay, port: port)
            let bouncer = try await WebhookReceiver.start(secret: endpoint.secret, port: port, redirect: target.url)
            do {
                #expect(try await relay.post("/v1/webhooks/\(endpoint.id)/test", .object([])).status == 202)
                try await relay.postWebhooks()
                #expect(try bouncer.received().count == 1)
                #expect(try target.received().isEmpty, "the redirect was followed")
                let shown = try await relay.get("/v1/webhooks/\(endpoint.id)").json["deliveries"]?[0]
                #expect(shown?["status"] == .string("pending") && shown?["lastAttempt"]?["status"] == .integer(307))
                #expect(
                    shown?["lastAttempt"]?["error"]?.stringValue?.contains("a redirect to \(target.url), not followed") == true, "\(shown ?? .null)")
            } catch {
                await bouncer.stop()
                await target.stop()
                throw error
            }
            await bouncer.stop()
            await target.stop()
        }
    }

    /// What the API refuses, naming the field, and what each key may do.
    @Test func endpointsAreCheckedAndKeptPerApp() async throws {
        try await withRelayHarness { relay in
            let loopback = try await relay.post("/v1/webhooks", .object([("url", .string("http://127.0.0.1:9/hooks"))]))
            #expect(loopback.status == 400 && loopback.json["error"]?["field"] == .string("url"), "\(loopback.json)")
            #expect(loopback.json["error"]?["message"]?.stringValue?.contains("--webhook-addresses") == true)
            let metadata = try await relay.post("/v1/webhooks", .object([("url", .string("http://169.254.169.254/latest/meta-data"))]))
            #expect(metadata.status == 400)
            for (body, field) in [
                (#"{"url": "ftp://hooks.example.com"}"#, "url"), (#"{"url": "https://hooks.example.com", "eventTypes": ["nope"]}"#, "eventTypes"),
                (#"{"url": "https://hooks.example.com", "eventTypes": []}"#, "eventTypes"), (#"{"eventTypes": null}"#, "url"),
            ] {
                let refused = try await relay.call(.POST, "/v1/webhooks", raw: body)
                #expect(refused.status == 400 && refused.json["error"]?["field"] == .string(field), "\(body): \(refused.json)")
            }
            #expect(try await relay.post("/v1/webhooks", json(#"{"url": "https://hooks.example.com"}"#), scope: .client).status == 403)
            let unnamed = try await relay.post("/v1/webhooks", json(#"{"url": "https://hooks.example.com"}"#), scope: .admin)
            #expect(unnamed.status == 400 && unnamed.json["error"]?["field"] == .string("bundleID"))

            let made = try await relay.post(
                "/v1/webhooks", json(#"{"url": "https://hooks.example.com/liverelay", "eventTypes": ["activity.ended", "push.failed"]}"#))
            #expect(made.status == 201 && made.json["secret"]?.stringValue?.hasPrefix("whsec_") == true, "\(made.json)")
            let id = try #require(made.json["id"]?.stringValue)
            let listed = try await relay.get("/v1/webhooks").json["webhooks"]?.arrayElements ?? []
            #expect(listed.map { $0["id"] } == [.string(id)] && listed.first?["secret"] == nil)
            #expect(listed.first?["eventTypes"] == json(#"["activity.ended", "push.failed"]"#))

            let disabled = try await relay.call(.PATCH, "/v1/webhooks/\(id)", json(#"{"enabled": false, "eventTypes": null}"#))
            #expect(disabled.json["enabled"] == .bool(false) && disabled.json["disabledReason"] == .string("disabled by its owner"))
            #expect(disabled.json["eventTypes"] == .null)
            let test = try await relay.post("/v1/webhooks/\(id)/test", .object([]))
            #expect(test.status == 409 && test.json["error"]?["code"] == .string("webhook_disabled"))
            let enabled = try await relay.call(.PATCH, "/v1/webhooks/\(id)", json(#"{"enabled": true}"#))
            #expect(enabled.json["enabled"] == .bool(true) && enabled.json["disabledReason"] == nil)
            #expect(try await relay.post("/v1/webhooks/\(id)/test", .object([])).status == 202)
            let unknown = try await relay.post("/v1/webhooks/\(id)/redeliver", json(#"{"eventID": "evt_none"}"#))
            #expect(unknown.status == 404 && unknown.json["error"]?["field"] == .string("eventID"))

            // Twenty endpoints an app at most.
            for number in 2...RelayService.maximumWebhooksPerApp {
                #expect(try await relay.post("/v1/webhooks", json(#"{"url": "https://hooks.example.com/\#(number)"}"#)).status == 201)
            }
            let tooMany = try await relay.post("/v1/webhooks", json(#"{"url": "https://hooks.example.com/21"}"#))
            #expect(tooMany.status == 409 && tooMany.json["error"]?["code"] == .string("too_many_webhooks"))

            #expect(try await relay.call(.DELETE, "/v1/webhooks/\(id)").status == 200)
            #expect(try await relay.get("/v1/webhooks/\(id)").status == 404)
            #expect(try await relay.call(.DELETE, "/v1/webhooks/\(id)").status == 404)
        }
    }
}
