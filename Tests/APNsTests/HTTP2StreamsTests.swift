import Foundation
import NIOCore
import NIOEmbedded
import NIOHPACK
import Synchronization
import Testing

@testable import APNs

/// The client's own HTTP/2: HPACK against RFC 7541's examples and NIOHPACK's decoder, and the
/// streams handler against frames written by hand, as a server could send them.
@Suite struct HTTP2StreamsTests {
    // MARK: HPACK

    func hex(_ bytes: ByteBuffer) -> String {
        bytes.readableBytesView.map { String(format: "%02x", $0) }.joined()
    }

    /// RFC 7541 C.3: three requests on one connection, without Huffman coding.
    @Test func requestsAreEncodedAsRFC7541sExamplesWithoutHuffmanCoding() {
        var encoder = HPACKRequestEncoder()
        func encode(_ fields: [(String, String)]) -> String {
            var bytes = ByteBuffer()
            encoder.encode(fields.map { APNsRequest.Header($0.0, $0.1) }, to: &bytes)
            return hex(bytes)
        }
        #expect(
            encode([(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")])
                == "828684410f7777772e6578616d706c652e636f6d")
        #expect(
            encode([(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com"), ("cache-control", "no-cache")])
                == "828684be58086e6f2d6361636865")
        #expect(
            encode([
                (":method", "GET"), (":scheme", "https"), (":path", "/index.html"), (":authority", "www.example.com"), ("custom-key", "custom-value"),
            ])
                == "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565")
    }

    /// Whatever the table keeps and evicts, an independent decoder reads every block back; fields
    /// that are not indexable stay out of its table.
    @Test func anIndependentDecoderReadsEveryBlockThroughEvictionsAndASmallerTable() throws {
        var encoder = HPACKRequestEncoder()
        var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
        for round in 0..<300 {
            if round == 150 {
                encoder.peerAllowsTableSize(256)
                decoder.maxDynamicTableLength = 256
            }
            let fields = [
                APNsRequest.Header(":method", "POST"), APNsRequest.Header(":scheme", "https"),
                APNsRequest.Header(":authority", "api.push.apple.com"),
                APNsRequest.Header(":path", "/3/device/\(String(repeating: "ab", count: 32))\(round)", indexable: false),
                APNsRequest.Header("authorization", "bearer token-\(round / 50)-" + String(repeating: "x", count: 150)),
                APNsRequest.Header("apns-topic", "com.example.app\(round % 7).push-type.liveactivity"),
                APNsRequest.Header("apns-id", "id-\(round)", indexable: false),
            ]
            var bytes = ByteBuffer()
            encoder.encode(fields, to: &bytes)
            let decoded = try decoder.decodeHeaders(from: &bytes)
            #expect(decoded.map { [$0.name, $0.value] } == fields.map { [$0.name, $0.value] }, "round \(round)")
            #expect(bytes.readableBytes == 0)
        }
        #expect(decoder.allowedDynamicTableLength == 256)  // the encoder said so at the start of a block
    }

    /// §4.2: after the peer lowers SETTINGS_HEADER_TABLE_SIZE, the next block starts by saying
    /// the new size (a strict decoder refuses it otherwise); the blocks after it do not.
    @Test func aSmallerTableIsAnnouncedAtTheStartOfTheNextBlock() {
        var encoder = HPACKRequestEncoder()
        func encode() -> String {
            var bytes = ByteBuffer()
            encoder.encode([APNsRequest.Header(":method", "POST")], to: &bytes)
            return hex(bytes)
        }
        #expect(encode() == "83")
        encoder.peerAllowsTableSize(256)
        #expect(encode() == "3fe10183")
        #expect(encode() == "83")
        encoder.peerAllowsTableSize(65_536)  // more than this encoder uses: back to its 4,096
        #expect(encode() == "3fe11f83")
    }

    @Test func integersUseTheirPrefixAndContinuationBytes() {
        // RFC 7541 C.1.
        var bytes = ByteBuffer()
        HPACKRequestEncoder.writeInteger(10, prefixBits: 5, flags: 0, to: &bytes)
        HPACKRequestEncoder.writeInteger(1337, prefixBits: 5, flags: 0, to: &bytes)
        HPACKRequestEncoder.writeInteger(42, prefixBits: 8, flags: 0, to: &bytes)
        #expect(hex(bytes) == "0a1f9a0a2a")
    }

    // MARK: The streams handler

    /// A client connection on an embedded channel, with what a server would do written by hand.
    final class Connection {
        let channel = EmbeddedChannel()
        let handler: APNsStreamsHandler
        let ready: EventLoopPromise<Void>
        final class Answers: Sendable {
            let byStream = Mutex<[UInt32: Result<APNsRawResponse, any Error>]>([:])
        }
        let answers = Answers()
        var serverEncoder = HPACKEncoder(allocator: ByteBufferAllocator())
        var serverDecoder = HPACKDecoder(allocator: ByteBufferAllocator(), maxDynamicTableSize: 4_096, maxHeaderListSize: 1 << 20)
        var sent = 0

        /// `serverSettings`: the server's first SETTINGS frame, if it has come. `patience`: an hour
        /// unless the test is about liveness, so that moving the time does not PING.
        init(serverSettings: [(HTTP2Wire.Setting, UInt32)]? = [], patience: TimeAmount = .hours(1)) throws {
            ready = channel.eventLoop.makePromise()
            handler = APNsStreamsHandler(status: ConnectionStatus(), ready: ready, patience: patience)
            try channel.pipeline.syncOperations.addHandler(handler)
            try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
            if let serverSettings { try settings(serverSettings) }
        }

        /// Sends a request; its answer is kept under the stream id it will have (1, 3, 5, …).
        /// `timeout`: from the embedded event loop's time, which the test moves.
        func send(
            body: [UInt8] = Array(#"{"aps":{}}"#.utf8), path: String = "/3/device/ab", extra: [APNsRequest.Header] = [],
            timeout: TimeAmount = .seconds(60)
        ) {
            let streamID = UInt32(2 * sent + 1)
            sent += 1
            handler.send(
                APNsStreamRequest(
                    headers: [
                        .init(":method", "POST"), .init(":scheme", "https"), .init(":authority", "apns"),
                        .init(":path", path, indexable: false),
                    ] + extra,
                    body: body.isEmpty ? nil : ByteBuffer(bytes: body), deadline: channel.eventLoop.now + timeout,
                    answer: { [answers] result in answers.byStream.withLock { $0[streamID] = result } }))
        }

        func answer(_ streamID: UInt32) -> Result<APNsRawResponse, any Error>? { answers.byStream.withLock { $0[streamID] } }

        func status(_ streamID: UInt32) -> Int? { try? answer(streamID)?.get().status }

        func error(_ streamID: UInt32) -> APNsTransportError? {
            guard case .failure(let error) = answer(streamID) else { return nil }
            return error as? APNsTransportError
        }

        /// Every frame the client has written since last asked, the preface skipped.
        func written() throws -> [(header: HTTP2Wire.FrameHeader, payload: ByteBuffer)] {
            var bytes = ByteBuffer()
            while var chunk = try channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&chunk) }
            if bytes.readableBytesView.starts(with: "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8) { bytes.moveReaderIndex(forwardBy: 24) }
            var frames: [(HTTP2Wire.FrameHeader, ByteBuffer)] = []
            while let frame = try HTTP2Wire.readFrame(from: &bytes, maxFrameSize: 1 << 24) { frames.append(frame) }
            #expect(bytes.readableBytes == 0)
            return frames
        }

        /// How many writes reached the socket since last asked.
        func writes() throws -> Int {
            var count = 0
            while try channel.readOutbound(as: ByteBuffer.self) != nil { count += 1 }
            return count
        }

        func frame(_ type: HTTP2Wire.FrameType, flags: UInt8 = 0, stream: UInt32, _ payload: [UInt8] = []) throws {
            var bytes = ByteBuffer()
            HTTP2Wire.writeFrameHeader(length: payload.count, type: type, flags: flags, streamID: stream, to: &bytes)
            bytes.writeBytes(payload)
            try channel.writeInbound(bytes)
            channel.pipeline.fireChannelReadComplete()
        }

        func headerBlock(_ fields: [(String, String)]) throws -> [UInt8] {
            var bytes = ByteBuffer()
            try serverEncoder.encode(headers: HPACKHeaders(fields), to: &bytes)
            return Array(bytes.readableBytesView)
        }

        func settings(_ settings: [(HTTP2Wire.Setting, UInt32)]) throws {
            var bytes = ByteBuffer()
            HTTP2Wire.writeSettings(settings, to: &bytes)
            try channel.writeInbound(bytes)
            channel.pipeline.fireChannelReadComplete()
        }

        func finish() {
            ready.fail(CancellationError())
            _ = try? channel.finish()
        }
    }

    func u32(_ value: UInt32) -> [UInt8] { withUnsafeBytes(of: value.bigEndian, Array.init) }

    @Test func theConnectionStartsWithThePrefaceSettingsAndALargerWindow() throws {
        let connection = try Connection(serverSettings: nil)
        defer { connection.finish() }
        var bytes = ByteBuffer()
        while var chunk = try connection.channel.readOutbound(as: ByteBuffer.self) { bytes.writeBuffer(&chunk) }
        #expect(bytes.readString(length: 24) == "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        let (settings, payload) = try #require(try HTTP2Wire.readFrame(from: &bytes, maxFrameSize: 16_384))
        #expect(settings.type == HTTP2Wire.FrameType.settings.rawValue && settings.streamID == 0)
        #expect(Array(payload.readableBytesView) == [0, 2] + u32(0) + [0, 3] + u32(1000) + [0, 4] + u32(1 << 20))
        let (update, increment) = try #require(try HTTP2Wire.readFrame(from: &bytes, maxFrameSize: 16_384))
        #expect(update.type == HTTP2Wire.FrameType.windowUpdate.rawValue)
        #expect(increment.getInteger(at: increment.readerIndex, as: UInt32.self) == UInt32(ConnectionReceiveWindow.targetSize - 65_535))
    }

    @Test func settingsAreAcknowledgedAndStreamsBeyondTheLimitWaitForOneToClose() throws {
        let connection = try Connection(serverSettings: nil)
        defer { connection.finish() }
        _ = try connection.written()
        try connection.settings([(.maxConcurrentStreams, 1)])
        #expect(try connection.written().map(\.header.flags) == [HTTP2Wire.Flag.ack])

        connection.send()
        connection.send()
        connection.channel.embeddedEventLoop.run()
        #expect(try connection.written().map(\.header.streamID) == [1, 1])  // HEADERS and DATA of stream 1 only
        try connection.frame(
            .headers, flags: HTTP2Wire.Flag.endHeaders | HTTP2Wire.Flag.endStream, stream: 1,
            connection.headerBlock([(":status", "200"), ("apns-id", "one")]))
        #expect(connection.status(1) == 200)
        #expect(try connection.answer(1)?.get().headers.first?.value == "one")
        connection.channel.embeddedEventLoop.run()
        #expect(try connection.written().map(\.header.streamID) == [3, 3])
        #expect(connection.answer(3) == nil)
    }

    @Test func aBodyLargerThanTheWindowWaitsForWindowUpdates() throws {
        let connection = try Connection()
        defer { connection.finish() }
        _ = try connection.written()
        try connection.settings([(.initialWindowSize, 10)])
        _ = try connection.written()

        connection.send(body: Array(repeating: 7, count: 25))
        connection.channel.embeddedEventLoop.run()
        let first = try connection.written()
        #expect(first.map(\.header.type) == [1, 0])
        #expect(first[1].header.length == 10 && !first[1].header.has(HTTP2Wire.Flag.endStream))

        try connection.frame(.windowUpdate, stream: 1, u32(10))
        connection.channel.embeddedEventLoop.run()
        #expect(try connection.written().map(\.header.length) == [10])
        // The peer may also raise every stream's window with SETTINGS.
        try connection.settings([(.initialWindowSize, 100)])
        connection.channel.embeddedEventLoop.run()
        let last = try connection.written().filter { $0.header.type == 0 }
        #expect(last.map(\.header.length) == [5])
        #expect(last.first?.header.has(HTTP2Wire.Flag.endStream) == true)
    }

    /// Until the server's first SETTINGS frame, one stream, and its body waits: APNs announces one
    /// stream until it accepts a provider token, and the stream window is not known before. A
    /// SETTINGS frame without a limit means none.
    @Test func beforeTheServersSettingsOneStreamOpensAndItsBodyWaits() throws {
        let connection = try Connection(serverSettings: nil)
        defer { connection.finish() }
        _ = try connection.written()
        for _ in 0..<3 { connection.send() }
        connection.channel.embeddedEventLoop.run()
        #expect(try connection.written().map(\.header.type) == [HTTP2Wire.FrameType.headers.rawValue])
        try connection.settings([(.initialWindowSize, 70_000)])
        connection.channel.embeddedEventLoop.run()
        // The acknowledgement, stream 1's body, then the two others.
        #expect(try connection.written().map(\.header.streamID) == [0, 1, 3, 3, 5, 5])
    }

    /// A server that lowers the stream window (nghttpd to 16,383) gets no more than that on a
    /// stream opened before its SETTINGS arrived.
    @Test func aBodySentBeforeTheServersSettingsKeepsToTheWindowTheyAnnounce() throws {
        let connection = try Connection(serverSettings: nil)
        defer { connection.finish() }
        _ = try connection.written()
        connection.send(body: Array(repeating: 7, count: 70_000))
        connection.channel.embeddedEventLoop.run()
        #expect(try connection.written().filter { $0.header.type == HTTP2Wire.FrameType.data.rawValue }.isEmpty)
        try connection.settings([(.initialWindowSize, 16_383)])
        connection.channel.embeddedEventLoop.run()
        let data = try connection.written().filter { $0.header.type == HTTP2Wire.FrameType.data.rawValue }
        #expect(data.map(\.header.length).reduce(0, +) == 16_383)
    }

    @Test func pingIsAnsweredWithItsPayload() throws {
        let connection = try Connection()
        defer { connection.finish() }
        _ = try connection.written()
        try connection.frame(.ping, stream: 0, [1, 2, 3, 4, 5, 6, 7, 8])
        let frames = try connection.written()
        #expect(frames.map(\.header.type) == [HTTP2Wire.FrameType.ping.rawValue])
        #expect(frames.first?.header.flags == HTTP2Wire.Flag.ack)
        #expect(frames.first.map { Array($0.payload.readableBytesView) } == [1, 2, 3, 4, 5, 6, 7, 8])
    }

    @Test func anAnswerInContinuationFramesAndPaddedDataIsReadWhole() throws {
        let connection = try Connection()
        defer { connection.finish() }
        connection.send()
        let block = try connection.headerBlock([(":status", "400"), ("apns-id", "two"), ("content-type", "application/json")])
        // HEADERS, padded and with a priority, then the rest of the block in CONTINUATION.
        try connection.frame(
            .headers, flags: HTTP2Wire.Flag.padded | HTTP2Wire.Flag.priority, stream: 1,
            [3] + [0, 0, 0, 0, 16] + Array(block.prefix(4)) + [0, 0, 0])
        #expect(connection.answer(1) == nil)
        try connection.frame(.continuation, flags: HTTP2Wire.Flag.endHeaders, stream: 1, Array(block.dropFirst(4)))
        let body = Array(#"{"reason":"BadDeviceToken"}"#.utf8)
        try connection.frame(.data, flags: HTTP2Wire.Flag.padded, stream: 1, [2] + body.prefix(10) + [0, 0])
        try connection.frame(.data, flags: HTTP2Wire.Flag.endStream, stream: 1, Array(body.dropFirst(10)))
        let answer = try #require(try connection.answer(1)?.get())
        #expect(answer.status == 400)
        #expect(answer.headers.map(\.value) == ["two", "application/json"])
        #expect(answer.body.map { Array($0.readableBytesView) } == body)
    }

    /// TLS hands over bytes as they come: frames cut anywhere are read whole.
    @Test func framesArrivingAByteAtATimeAreReadWhole() throws {
        let connection = try Connection()
        defer { connection.finish() }
        connection.send()
        connection.send()
        var bytes = ByteBuffer()
        for streamID: UInt32 in [1, 3] {
            let block = try connection.headerBlock([(":status", "410"), ("apns-id", "id-\(streamID)")])
            HTTP2Wire.writeFrameHeader(length: block.count, type: .headers, flags: HTTP2Wire.Flag.endHeaders, streamID: streamID, to: &bytes)
            bytes.writeBytes(block)
            HTTP2Wire.writeFrameHeader(length: 2, type: .data, flags: HTTP2Wire.Flag.endStream, streamID: streamID, to: &bytes)
            bytes.writeString("{}")
        }
        while let byte = bytes.readSlice(length: 1) { try connection.channel.writeInbound(byte) }
        #expect(try connection.answer(1)?.get().headers.first?.value == "id-1")
        #expect(try connection.answer(3)?.get().body.map { String(buffer: $0) } == "{}")
        #expect(connection.status(3) == 410)
    }

    @Test func aHeaderBlockLargerThanAFrameContinuesInContinuationFrames() throws {
        let connection = try Connection()
        defer { connection.finish() }
        _ = try connection.written()
        let large = String(repeating: "v", count: 40_000)
        connection.send(extra: [.init("x-large", large, indexable: false)])
        connection.channel.embeddedEventLoop.run()
        let frames = try connection.written()
        #expect(frames.map(\.header.type) == [1, 9, 9, 0])
        #expect(frames.map { $0.header.has(HTTP2Wire.Flag.endHeaders) } == [false, false, true, false])
        #expect(frames.allSatisfy { $0.header.length <= 16_384 && $0.header.streamID == 1 })
        var block = ByteBuffer()
        for frame in frames.dropLast() {
            var payload = frame.payload
            block.writeBuffer(&payload)
        }
        let fields = try connection.serverDecoder.decodeHeaders(from: &block)
        #expect(fields.first(name: "x-large") == large)
    }

    @Test func goAwayFailsTheStreamsAboveItsLastOnesAsNotProcessedAndLetsTheOthersFinish() throws {
        let connection = try Connection()
        defer { connection.finish() }
        try connection.settings([(.maxConcurrentStreams, 3)])
        for _ in 0..<4 { connection.send() }  // streams 1, 3 and 5 open; the fourth waits
        try connection.frame(.goAway, stream: 0, u32(1) + u32(0) + Array(#"{"reason":"Shutdown"}"#.utf8))
        #expect(connection.error(3)?.code == .notProcessed)
        #expect(connection.error(5)?.code == .notProcessed)
        #expect(connection.error(7)?.code == .notProcessed)
        #expect(connection.error(3)?.message.contains("Shutdown") == true)
        #expect(connection.answer(1) == nil)
        #expect(connection.channel.isActive)
        try connection.frame(
            .headers, flags: HTTP2Wire.Flag.endHeaders | HTTP2Wire.Flag.endStream, stream: 1,
            connection.headerBlock([(":status", "200")]))
        #expect(connection.status(1) == 200)
        #expect(!connection.channel.isActive)  // closed once its last stream ended
    }

    /// A request that waits for a stream ends at its deadline without being sent (the caller has
    /// given up and may send it again); the streams open meanwhile go on to theirs.
    @Test func aRequestWaitingForAStreamEndsUnsentAtItsDeadline() throws {
        let connection = try Connection(serverSettings: [(.maxConcurrentStreams, 1)])
        defer { connection.finish() }
        connection.send(timeout: .seconds(10))
        connection.send(timeout: .seconds(1))  // waits behind the first
        connection.channel.embeddedEventLoop.run()
        _ = try connection.written()
        connection.channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(connection.error(3)?.code == .deadlineExceeded)
        #expect(connection.answer(1) == nil)
        #expect(try connection.written().isEmpty)  // stream 3 was never opened
        connection.channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        #expect(connection.error(1)?.code == .deadlineExceeded)
        #expect(try connection.written().map(\.header.type) == [HTTP2Wire.FrameType.rstStream.rawValue])
    }

    @Test func aConnectionSilentWithRequestsInFlightIsPingedThenTakenForDeadWithThem() throws {
        let connection = try Connection(patience: .seconds(1))
        defer { connection.finish() }
        connection.send()
        connection.send()
        connection.channel.embeddedEventLoop.run()
        _ = try connection.written()
        connection.channel.embeddedEventLoop.advanceTime(by: .milliseconds(999))
        #expect(try connection.written().isEmpty)
        connection.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        let ping = try connection.written()
        #expect(ping.map(\.header.type) == [HTTP2Wire.FrameType.ping.rawValue] && ping.first?.header.flags == 0)
        #expect(ping.first?.payload.readableBytes == 8)
        connection.channel.embeddedEventLoop.advanceTime(by: .milliseconds(999))
        #expect(connection.answer(1) == nil && connection.channel.isActive)
        connection.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(connection.error(1)?.code == .connectionClosed && connection.error(3)?.code == .connectionClosed)
        #expect(connection.error(1)?.message.contains("PING") == true)
        #expect(try connection.written().map(\.header.type) == [HTTP2Wire.FrameType.goAway.rawValue])
        #expect(!connection.channel.isActive)
        connection.send()
        #expect(connection.error(5)?.code == .notProcessed, "nothing more is sent on it")
    }

    @Test func aPingAnsweredKeepsTheConnectionAndItsRequestsAndAnIdleOneIsNotPinged() throws {
        let connection = try Connection(patience: .seconds(1))
        defer { connection.finish() }
        connection.send()
        connection.channel.embeddedEventLoop.run()
        _ = try connection.written()
        connection.channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        let ping = try #require(try connection.written().first)
        try connection.frame(.ping, flags: HTTP2Wire.Flag.ack, stream: 0, Array(ping.payload.readableBytesView))
        connection.channel.embeddedEventLoop.advanceTime(by: .milliseconds(1500))
        #expect(connection.answer(1) == nil && connection.channel.isActive, "a slow answer on a live connection waits")
        #expect(try connection.written().map(\.header.type) == [HTTP2Wire.FrameType.ping.rawValue], "silent again: another PING")
        try connection.frame(
            .headers, flags: HTTP2Wire.Flag.endHeaders | HTTP2Wire.Flag.endStream, stream: 1, connection.headerBlock([(":status", "200")]))
        #expect(connection.status(1) == 200)
        connection.channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(try connection.written().isEmpty, "no PING while nothing is owed")
        #expect(connection.channel.isActive)
    }

    @Test func aResetStreamFailsWithItsCode() throws {
        let connection = try Connection()
        defer { connection.finish() }
        connection.send()
        try connection.frame(.rstStream, stream: 1, u32(7))
        #expect(connection.error(1)?.code == .streamReset)
        #expect(connection.error(1)?.message.contains("REFUSED_STREAM") == true)
    }

    @Test func aFrameInTheMiddleOfAHeaderBlockEndsTheConnectionWithAProtocolError() throws {
        let connection = try Connection()
        defer { connection.finish() }
        connection.send()
        connection.channel.embeddedEventLoop.run()
        _ = try connection.written()
        let block = try connection.headerBlock([(":status", "200")])
        try connection.frame(.headers, stream: 1, block)  // no END_HEADERS
        try connection.frame(.ping, stream: 0, Array(repeating: 0, count: 8))
        let frames = try connection.written()
        #expect(frames.map(\.header.type) == [HTTP2Wire.FrameType.goAway.rawValue])
        #expect(frames.first.flatMap { $0.payload.getInteger(at: $0.payload.readerIndex + 4, as: UInt32.self) } == 1)
        #expect(connection.error(1)?.code == .connectionClosed)
        #expect(!connection.channel.isActive)
    }

    @Test func aFrameLargerThanAllowedEndsTheConnectionWithAFrameSizeError() throws {
        let connection = try Connection()
        defer { connection.finish() }
        _ = try connection.written()
        try connection.frame(.data, stream: 1, Array(repeating: 0, count: 16_385))
        let frames = try connection.written()
        #expect(frames.map(\.header.type) == [HTTP2Wire.FrameType.goAway.rawValue])
        #expect(frames.first.flatMap { $0.payload.getInteger(at: $0.payload.readerIndex + 4, as: UInt32.self) } == 6)
    }

    /// Requests of one event-loop tick go to the socket as one write, but never more than
    /// `flushEvery` wait: otherwise both ends take turns at whole batches of hundreds. DATA
    /// frames leave in stream order, so APNs answers (and both ends close streams) oldest first.
    @Test func requestsOfOneTickAreWrittenTogetherButAtMostFlushEveryAtATime() throws {
        let connection = try Connection()
        defer { connection.finish() }
        _ = try connection.writes()
        for _ in 0..<(APNsStreamsHandler.flushEvery - 1) { connection.send() }
        #expect(try connection.writes() == 0)  // waiting for the end of the tick
        connection.send()
        #expect(try connection.writes() == 1)
        for _ in 0..<10 { connection.send() }
        #expect(try connection.writes() == 0)
        connection.channel.embeddedEventLoop.run()  // the end of the tick
        #expect(try connection.writes() == 1)

        for _ in 0..<50 { connection.send() }
        connection.channel.embeddedEventLoop.run()
        let dataStreams = try connection.written().filter { $0.header.type == 0 }.map(\.header.streamID)
        #expect(dataStreams.count == 50 && dataStreams == dataStreams.sorted())
    }
}
