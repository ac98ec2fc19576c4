@testable import APNs
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@Suite struct FlushTests {
    /// Flushes of one event-loop tick reach the socket as one, but never more than `flushEvery`
    /// wait: otherwise both ends take turns at whole batches of hundreds.
    @Test func flushesOfOneTickAreCoalescedButAtMostFlushEveryAtATime() throws {
        let channel = EmbeddedChannel(handler: FlushCoalescingHandler())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        func writeAndFlush(_ count: Int) {
            for _ in 0..<count { channel.writeAndFlush(ByteBuffer(bytes: [1]), promise: nil) }
        }
        func flushedWrites() throws -> Int {
            var writes = 0
            while try channel.readOutbound(as: ByteBuffer.self) != nil { writes += 1 }
            return writes
        }

        writeAndFlush(FlushCoalescingHandler.flushEvery - 1)
        #expect(try flushedWrites() == 0)  // waiting for the end of the tick
        writeAndFlush(1)
        #expect(try flushedWrites() == FlushCoalescingHandler.flushEvery)
        writeAndFlush(10)
        #expect(try flushedWrites() == 0)
        channel.embeddedEventLoop.run()  // the end of the tick
        #expect(try flushedWrites() == 10)
        _ = try channel.finish()
    }

    /// Requests written in one tick leave with their DATA frames in stream order, so that APNs
    /// answers (and both ends close streams) oldest first. NIOHTTP2 alone would send the DATA
    /// frames buffered between two flushes in the order of a hash set.
    @Test func dataFramesOfOneTickLeaveInStreamOrder() throws {
        let channel = EmbeddedChannel()
        let ready = channel.eventLoop.makePromise(of: Void.self)
        try channel.pipeline.syncOperations.addHandlers([
            FlushCoalescingHandler(),
            NIOHTTP2Handler(mode: .client, initialSettings: []),
            APNsStreamsHandler(status: ConnectionStatus(), ready: ready),
        ])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        var responses: [EventLoopFuture<APNsRawResponse>] = []
        for _ in 0..<50 {
            let response = channel.eventLoop.makePromise(of: APNsRawResponse.self)
            responses.append(response.futureResult)
            let request = APNsStreamRequest(
                headers: HPACKHeaders([(":method", "POST"), (":scheme", "https"), (":authority", "apns"), (":path", "/3/device/ab")]),
                body: ByteBuffer(string: #"{"aps":{}}"#), deadline: .now() + .seconds(10), response: response)
            channel.write(request, promise: nil)
        }
        channel.embeddedEventLoop.run()

        var bytes = ByteBuffer()
        while var written = try channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&written) }
        bytes.moveReaderIndex(forwardBy: 24)  // the client connection preface
        var dataStreams: [UInt32] = []
        while bytes.readableBytes >= 9 {
            let header = bytes.readSlice(length: 9)!
            let length = Int(header.getInteger(at: 0, as: UInt32.self)! >> 8)
            let type = header.getInteger(at: 3, as: UInt8.self)!
            let streamID = header.getInteger(at: 5, as: UInt32.self)! & 0x7fff_ffff
            if type == 0 { dataStreams.append(streamID) }
            bytes.moveReaderIndex(forwardBy: length)
        }
        #expect(dataStreams.count == 50)
        #expect(dataStreams == dataStreams.sorted())

        ready.fail(CancellationError())
        _ = try? channel.finish()
        for response in responses { _ = try? response.wait() }
    }
}
