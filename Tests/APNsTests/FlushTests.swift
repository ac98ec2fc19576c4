@testable import APNs
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Synchronization
import Testing

@Suite struct FlushTests {
    /// Flushes of one event-loop tick reach the socket as one, but never more than `flushEvery`
    /// wait: otherwise both ends take turns at whole batches of hundreds. What was written between
    /// two flushes goes down as one buffer, so that TLS seals it as one record.
    @Test func flushesOfOneTickAreCoalescedButAtMostFlushEveryAtATime() throws {
        let channel = EmbeddedChannel(handler: FlushCoalescingHandler())
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        var written: [EventLoopFuture<Void>] = []
        func writeAndFlush(_ count: Int) {
            for _ in 0..<count {
                let promise = channel.eventLoop.makePromise(of: Void.self)
                written.append(promise.futureResult)
                channel.write(ByteBuffer(bytes: [1]), promise: promise)
                channel.write(ByteBuffer(bytes: [2, 3]), promise: nil)
                channel.flush()
            }
        }
        /// The size of each buffer that reached the socket.
        func flushedWrites() throws -> [Int] {
            var sizes: [Int] = []
            while let buffer = try channel.readOutbound(as: ByteBuffer.self) { sizes.append(buffer.readableBytes) }
            return sizes
        }

        writeAndFlush(FlushCoalescingHandler.flushEvery - 1)
        #expect(try flushedWrites() == [])  // waiting for the end of the tick
        writeAndFlush(1)
        #expect(try flushedWrites() == [3 * FlushCoalescingHandler.flushEvery])
        writeAndFlush(10)
        #expect(try flushedWrites() == [])
        channel.embeddedEventLoop.run()  // the end of the tick
        #expect(try flushedWrites() == [3 * 10])
        #expect(written.allSatisfy { (try? $0.wait()) != nil })  // every write's promise, with its buffer's
        _ = try channel.finish()
    }

    /// Requests written in one tick leave with their DATA frames in stream order, so that APNs
    /// answers (and both ends close streams) oldest first. NIOHTTP2 alone would send the DATA
    /// frames buffered between two flushes in the order of a hash set.
    @Test func dataFramesOfOneTickLeaveInStreamOrder() throws {
        let channel = EmbeddedChannel()
        let ready = channel.eventLoop.makePromise(of: Void.self)
        let streams = APNsStreamsHandler(status: ConnectionStatus(), ready: ready)
        try channel.pipeline.syncOperations.addHandlers([
            FlushCoalescingHandler(),
            NIOHTTP2Handler(mode: .client, initialSettings: []),
            streams,
        ])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        let answers = Mutex(0)
        for _ in 0..<50 {
            streams.send(APNsStreamRequest(
                headers: HPACKHeaders([(":method", "POST"), (":scheme", "https"), (":authority", "apns"), (":path", "/3/device/ab")]),
                body: ByteBuffer(string: #"{"aps":{}}"#), deadline: .now() + .seconds(10),
                answer: { _ in answers.withLock { $0 += 1 } }))
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
        #expect(answers.withLock { $0 } == 50)  // each failed once, as the connection closed
    }
}
