@testable import APNs
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

/// Requests written in one event-loop tick go out in one flush, but never more than
/// `flushEvery` wait: otherwise both ends take turns at whole batches of hundreds.
@Suite struct StreamsHandlerFlushTests {
    @Test func requestsOfOneTickAreFlushedTogetherButAtMostFlushEveryAtATime() throws {
        let channel = EmbeddedChannel()
        let ready = channel.eventLoop.makePromise(of: Void.self)
        try channel.pipeline.syncOperations.addHandler(APNsStreamsHandler(health: ConnectionHealth(), ready: ready))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        var responses: [EventLoopFuture<APNsRawResponse>] = []
        func write(_ count: Int) {
            for _ in 0..<count {
                let response = channel.eventLoop.makePromise(of: APNsRawResponse.self)
                responses.append(response.futureResult)
                let request = APNsStreamRequest(
                    headers: HPACKHeaders([(":method", "POST"), (":path", "/3/device/ab")]), body: nil,
                    deadline: .now() + .seconds(10), response: response)
                channel.write(request, promise: nil)
            }
        }
        func flushedFrames() throws -> Int {
            var frames = 0
            while try channel.readOutbound(as: HTTP2Frame.self) != nil { frames += 1 }
            return frames
        }

        write(APNsStreamsHandler.flushEvery - 1)
        #expect(try flushedFrames() == 0)  // waiting for the end of the tick
        write(1)
        #expect(try flushedFrames() == APNsStreamsHandler.flushEvery)
        write(10)
        #expect(try flushedFrames() == 0)
        channel.embeddedEventLoop.run()  // the end of the tick
        #expect(try flushedFrames() == 10)

        ready.fail(CancellationError())
        _ = try? channel.finish()
        for response in responses { _ = try? response.wait() }
    }
}
