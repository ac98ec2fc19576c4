import Foundation
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import NIOPosix
import Testing

@testable import APNs

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

    /// A refused connection fails the push sent from its own event loop, and the pool forgets it:
    /// the next push tries a new one.
    @Test func aConnectionRefusedOnTheWorkersOwnLoopFailsThePushAndTheNextTriesAgain() async throws {
        try await withDeadline(.seconds(20)) { [payload, bundle] in
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let closed = try await ServerBootstrap(group: group).bind(host: "127.0.0.1", port: 0).get()
            let port = try #require(closed.localAddress?.port)
            try await closed.close()
            let configuration = APNsClient.Configuration(
                environment: .custom(host: "127.0.0.1", port: port, channelManagementPort: port, caFile: nil),
                signingKey: TestSigningKey().signingKey, connectionsPerHost: 1...4)
            let client = try APNsClient(configuration: configuration, eventLoopGroup: group.next())
            let executor = try #require(client.pushExecutor)
            for _ in 0..<3 {
                let failure = await Task(executorPreference: executor) {
                    try await client.send(payload, to: liveActivityToken(), topic: bundle)
                }.result
                guard case .failure(let error as APNsTransportError) = failure else {
                    Issue.record("expected a transport error, got \(failure)")
                    break
                }
                #expect(error.code == .connectFailed)
                #expect(client.pushConnectionCount == 0, "the refused connection is forgotten")
            }
            await client.shutdown()
            try await group.shutdownGracefully()
        }
    }

    @Test func severalConnectionsSpreadOverTheLoopsAndOfferNoExecutor() async throws {
        try await withServer(connections: 2) { client in
            #expect(client.pushExecutor == nil)
        }
    }
}
