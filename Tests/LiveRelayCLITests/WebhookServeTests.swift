import Foundation
import LiveActivityKit
import LiveRelayTesting
import NIOHTTP1
import Testing

/// Webhooks from `liverelay serve` as a user runs it, to a receiver that verifies every delivery
/// with the Standard Webhooks library.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct WebhookServeTests {
    /// Killed while its posts wait for their answers, `serve` loses nothing: started again, it
    /// posts them again, each with the same `webhook-id`, for the receiver to de-duplicate.
    @Test(.enabled(if: WebhookReceiver.isAvailable || TestRequirement.isCI, Comment(rawValue: WebhookReceiver.skipNote)))
    func serveKilledWhileDeliveringLosesNothingAndRepeatsTheSameEventIDs() async throws {
        let directory = try TestFiles.folder("serve-webhooks")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let arguments = ["serve", "--data-dir", directory + "/data", "--http-port", "0"]
        try await withDeadline(.seconds(120)) {
            var server = try await ServeProcess.start(arguments)
            let keys = try initialKeys(dataDir: directory + "/data")
            let port = try freeLoopbackPort()
            // The demo allows an endpoint on this machine.
            let made = try await server.call(
                .POST, "/v1/webhooks", key: keys.server, body: .object([("url", .string("http://127.0.0.1:\(port)/hooks"))]))
            #expect(made.status == 201, "\(made.json)")
            let endpoint = try #require(made.json["id"]?.stringValue)
            let secret = try #require(made.json["secret"]?.stringValue)
            // A slow receiver: it logs each request, then answers 30 s later.
            let slow = try await WebhookReceiver.start(secret: secret, port: port, delay: 30)
            var sent: [String] = []
            for _ in 0..<6 {
                let test = try await server.call(.POST, "/v1/webhooks/\(endpoint)/test", key: keys.server, body: .object([]))
                sent.append(try #require(test.json["eventID"]?.stringValue))
            }
            try await eventually(every: .milliseconds(50)) { try slow.received().count == 6 }
            await server.kill()
            await slow.stop()

            let prompt = try await WebhookReceiver.start(secret: secret, port: port, log: slow.log)
            do {
                server = try await ServeProcess.start(arguments)
                try await eventually(every: .milliseconds(50)) { try prompt.received().count >= 12 }
                let received = try prompt.received()
                #expect(received.count == 12 && received.allSatisfy { $0.verified })
                let ids = received.compactMap(\.id)
                #expect(Set(ids) == Set(sent) && sent.allSatisfy { id in ids.filter { $0 == id }.count == 2 }, "each twice, the same id")
                let shown = try await server.call(.GET, "/v1/webhooks/\(endpoint)", key: keys.server).json
                #expect(shown["deliveries"]?.arrayElements?.map { $0["status"] } == Array(repeating: .string("delivered"), count: 6))
                #expect(await server.stop() == 0)
            } catch {
                await prompt.stop()
                throw error
            }
            await prompt.stop()
        }
    }
}
