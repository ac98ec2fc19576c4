@testable import APNs
import Foundation
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import Testing

/// Tasks that send many pushes can run on the push connection's event loop: no thread hop per push.
@Suite struct PushExecutorTests {
    let bundle = try! BundleID("com.example.apple-samplecode.Emoji-Rangers")
    let payload = try! LiveActivityPayload.update(
        content: ActivityContent(state: ["eventDescription": "Power Panda found a sword!"], staleDate: nil),
        timestamp: Date(timeIntervalSince1970: 1_795_000_000))

    func withServer(connections: Int, _ body: @escaping @Sendable (APNsClient) async throws -> Void) async throws {
        try await withDeadline {
            let server = try await ScriptedAPNsServer.start(maxConcurrentStreams: 1000)
            let configuration = APNsClient.Configuration(
                environment: server.environment, signingKey: TestSigningKey().signingKey, connectionsPerHost: connections...connections)
            do {
                try await withAPNsClient(configuration: configuration, body)
                await server.shutdown()
            } catch {
                await server.shutdown()
                throw error
            }
        }
    }

    @Test func aTaskOnThePushExecutorSendsAndResumesOnTheConnectionsEventLoop() async throws {
        try await withServer(connections: 1) { [payload, bundle] client in
            let executor = try #require(client.pushExecutor as? EventLoopTaskExecutor)
            let loop: any EventLoop = executor.loop
            let sending = Task(executorPreference: executor) { () async throws -> [Bool] in
                let before = loop.inEventLoop
                let accepted = try await client.send(payload, to: liveActivityToken(), topic: bundle)
                return [before, accepted.status == 200, loop.inEventLoop]
            }
            #expect(try await sending.value == [true, true, true])
            // The connection itself lives on that loop, so the write needed no hop either.
            let connection = try await client.pushConnections.connection(deadline: .now() + .seconds(5))
            connection.status.streamClosed()
            #expect(connection.channel.eventLoop === loop)
        }
    }

    @Test func severalConnectionsSpreadOverTheLoopsAndOfferNoExecutor() async throws {
        try await withServer(connections: 2) { client in
            #expect(client.pushExecutor == nil)
        }
    }
}
