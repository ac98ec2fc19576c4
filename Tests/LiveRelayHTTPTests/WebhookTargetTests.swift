import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import Synchronization
import Testing

/// What an endpoint's URL can do to the server that posts to it: nothing but be posted to, at the
/// address that was checked.
struct WebhookTargetTests {
    static func allowingLoopback(_ configuration: inout RelayConfiguration, _: inout RelayAPIConfiguration) {
        configuration.webhooks.addresses = .loopback
    }

    /// A port out of range is refused by POST and by PATCH, naming the field; one already kept (by
    /// an older release, or written in the database) fails its attempt and the server goes on.
    /// (It trapped in the HTTP client, and the server died again at every restart.)
    @Test func aURLThatCannotBePostedIsRefusedAndOneKeptFailsItsAttemptWithoutHarm() async throws {
        try await withRelayHarness(configure: Self.allowingLoopback) { relay in
            for url in ["http://127.0.0.1:99999/", "http://[::1]:70000/hooks", "http://hooks.example.com/a\u{0}b"] {
                let refused = try await relay.post("/v1/webhooks", .object([("url", .string(url))]))
                #expect(refused.status == 400 && refused.json["error"]?["field"] == .string("url"), "\(url): \(refused.json)")
            }
            let made = try await relay.post("/v1/webhooks", .object([("url", .string("http://127.0.0.1:9/hooks"))]))
            #expect(made.status == 201, "\(made.json)")
            let id = try #require(made.json["id"]?.stringValue)
            let patched = try await relay.call(.PATCH, "/v1/webhooks/\(id)", .object([("url", .string("http://127.0.0.1:70000/"))]))
            #expect(patched.status == 400 && patched.json["error"]?["field"] == .string("url"), "\(patched.json)")

            var kept = try #require(try await relay.store.webhookEndpoint(id: id))
            kept.url = "http://127.0.0.1:99999/"
            #expect(try await relay.store.updateWebhookEndpoint(kept))
            #expect(try await relay.post("/v1/webhooks/\(id)/test", .object([])).status == 202)
            try await relay.postWebhooks()
            let shown = try await relay.get("/v1/webhooks/\(id)")
            let attempt = shown.json["deliveries"]?.arrayElements?.first?["lastAttempt"]
            #expect(attempt?["error"]?.stringValue?.contains("the port must be 1 to 65535") == true, "\(shown.json)")
            #expect(try await relay.get("/v1/health", scope: nil).status == 200)
        }
    }

    /// A name is resolved once per attempt, and the attempt connects to the address that was
    /// checked: here a name only this server's resolver knows (the system's cannot resolve it, so
    /// a client that resolved again would fail). A name that resolves to a loopback address a
    /// moment later can no longer carry a post past the check.
    @Test(.enabled(if: WebhookReceiver.isAvailable || TestRequirement.isCI, Comment(rawValue: WebhookReceiver.skipNote)))
    func anAttemptConnectsToTheAddressItChecked() async throws {
        try await withRelayHarness(configure: Self.allowingLoopback, deadline: .seconds(120)) { relay in
            let port = try freeLoopbackPort()
            let made = try await relay.post("/v1/webhooks", .object([("url", .string("http://receiver.liverelay.invalid:\(port)/hooks"))]))
            #expect(made.status == 201, "\(made.json)")
            let id = try #require(made.json["id"]?.stringValue)
            let receiver = try await WebhookReceiver.start(secret: try #require(made.json["secret"]?.stringValue), port: port)
            do {
                let asked = Counter()
                try await WebhookAddresses.$resolver.withValue({ name in
                    // The first answer is checked and connected to; later ones would be refused.
                    asked.add()
                    return name == "receiver.liverelay.invalid" && asked.value == 1 ? [[127, 0, 0, 1]] : [[192, 0, 2, 1]]
                }) {
                    #expect(try await relay.post("/v1/webhooks/\(id)/test", .object([])).status == 202)
                    try await relay.postWebhooks()
                }
                let received = try receiver.received()
                #expect(received.count == 1 && received.first?.verified == true, "\(received.map { $0.error ?? "verified" })")
                #expect(asked.value == 1)

                // Asked again, the name resolves elsewhere: refused before anything is sent.
                try await WebhookAddresses.$resolver.withValue({ _ in [[192, 0, 2, 1]] }) {
                    #expect(try await relay.post("/v1/webhooks/\(id)/test", .object([])).status == 202)
                    try await relay.postWebhooks()
                }
                #expect(try receiver.received().count == 1)
                let shown = try await relay.get("/v1/webhooks/\(id)")
                let errors = (shown.json["deliveries"]?.arrayElements ?? []).compactMap { $0["lastAttempt"]?["error"]?.stringValue }
                #expect(errors.contains { $0.contains("resolves to 192.0.2.1, a private address") }, "\(shown.json)")
            } catch {
                await receiver.stop()
                throw error
            }
            await receiver.stop()
        }
    }

    /// The built-in emulator's control API answers anyone on loopback without a key: a server key
    /// could drive it through a webhook. Its port is never an endpoint's.
    @Test func theServersOwnKeylessListenerIsNeverAnEndpoint() async throws {
        try await withRelayHarness(configure: Self.allowingLoopback) { relay in
            let control = try freeLoopbackPort()
            relay.relay.keepWebhooksOff(loopbackPort: control)
            for host in ["127.0.0.1", "localhost", "[::1]", "localhost."] {
                let refused = try await relay.post("/v1/webhooks", .object([("url", .string("http://\(host):\(control)/devices"))]))
                #expect(refused.status == 400 && refused.json["error"]?["message"]?.stringValue?.contains("own") == true, "\(refused.json)")
            }
        }
    }
}

private final class Counter: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}
