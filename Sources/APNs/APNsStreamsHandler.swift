import LiveActivityKit
import NIOCore
import NIOHPACK
import NIOTLS

/// HTTP/2 (RFC 9113) for one connection to APNs, on its event loop, straight over TLS: requests
/// become streams, frames become answers. It does what a provider's connection needs and no more:
/// the client opens every stream, sends one request on it and reads one answer; no server push,
/// no priorities. Answers are decoded with NIOHPACK's decoder; requests are encoded by
/// `HPACKRequestEncoder`. Going without NIOHTTP2's frame values and state machines took the
/// client from 15–17 µs of CPU a push to 6–10. What NIOHTTP2 did for us is here: SETTINGS,
/// PING, GOAWAY, RST_STREAM, CONTINUATION, flow control both ways, the peer's stream limit.
///
/// Frames are written to one buffer, which goes to TLS every `flushEvery` requests and at the end
/// of each event-loop tick: one TLS record and one system call for many requests, no delay when
/// idle, and never so many waiting that both ends take turns at whole batches.
///
/// A connection that owes answers and stays silent is PINGed, and taken for dead when the PING
/// goes unanswered too (`ConnectionLiveness`): its requests fail as `connectionClosed` then,
/// not at their deadline.
package final class APNsStreamsHandler: ChannelDuplexHandler {
    package typealias InboundIn = ByteBuffer
    package typealias OutboundIn = ByteBuffer
    package typealias OutboundOut = ByteBuffer

    static let flushEvery = 32
    /// The window each stream starts with for answers (SETTINGS_INITIAL_WINDOW_SIZE).
    static let streamReceiveWindow = 1 << 20
    static let concurrentStreamsAllowed = 1_000

    private struct Stream {
        var answer: @Sendable (Result<APNsRawResponse, any Error>) -> Void
        var deadline: NIODeadline
        var written: NIODeadline
        /// How much DATA the peer allows on this stream now.
        var sendWindow: Int
        var status: Int?
        var headers: [(name: String, value: String)] = []
        var body: ByteBuffer?
        /// DATA received since the stream's window was last given back.
        var received = 0
    }

    private let status: ConnectionStatus
    /// Completed when TLS is up with HTTP/2, failed if the connection dies before.
    private let ready: EventLoopPromise<Void>
    private var context: ChannelHandlerContext?

    private var nextStreamID: UInt32 = 1
    private var streams: [UInt32: Stream] = [:]
    /// Requests beyond the peer's stream limit, opened as streams close.
    private var waiting = CircularBuffer<APNsStreamRequest>()
    /// Request bodies, or what is left of them, waiting for flow-control window.
    private var blockedData = CircularBuffer<(streamID: UInt32, data: ByteBuffer)>()
    private var goingAway = false
    /// Why the connection failed, given to requests that fail because of it.
    private var failure: (any Error)?

    // What the peer announced (SETTINGS) and allows (WINDOW_UPDATE).
    /// One stream until the peer's first SETTINGS frame says how many (APNs announces one until a
    /// request with a valid provider token is accepted), then what it announced, unlimited if
    /// nothing (§6.5.2). Requests sent beyond a limit not yet read made the emulator end the
    /// connection with PROTOCOL_ERROR.
    private var peerStreamLimit = 1
    private var peerSettingsRead = false
    private var peerInitialWindow = HTTP2Wire.defaultWindowSize
    private var peerMaxFrameSize = HTTP2Wire.defaultMaxFrameSize
    private var connectionSendWindow = HTTP2Wire.defaultWindowSize

    private var receiveWindow = ConnectionReceiveWindow()
    private var encoder = HPACKRequestEncoder()
    private var decoder = HPACKDecoder(allocator: ByteBufferAllocator())
    /// Bytes read and not yet a whole frame.
    private var unread: ByteBuffer?
    /// A header block whose CONTINUATION frames are still to come.
    private var headerBlock: (streamID: UInt32, endStream: Bool, fragments: ByteBuffer)?

    /// Frames written since the last flush.
    private var output = ByteBuffer()
    private var requestsSinceFlush = 0
    private var flushScheduled = false

    /// One timer for the connection, due at the earliest deadline in flight (or earlier): a
    /// timer per stream cost a scheduling and a cancellation of NIO's task heap per push.
    private var deadlineCheck: (due: NIODeadline, task: Scheduled<Void>)?

    private var liveness: ConnectionLiveness
    private var livenessCheck: Scheduled<Void>?
    private var pingsSent: UInt64 = 0
    /// When the connection started, for the round trip its TLS handshake took.
    private var startedAt: NIODeadline?

    /// `patience`: how long the connection may owe answers in silence before it is PINGed, and
    /// the PING go unanswered before it is taken for dead, at the least (`ConnectionLiveness`).
    package init(status: ConnectionStatus, ready: EventLoopPromise<Void>, patience: TimeAmount = ConnectionLiveness.defaultPatience) {
        self.status = status
        self.ready = ready
        self.liveness = ConnectionLiveness(minimumPatience: patience, now: .uptimeNanoseconds(0))
    }

    package func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        output = context.channel.allocator.buffer(capacity: 16_384)
        if context.channel.isActive { start(context: context) }
    }

    package func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    package func channelActive(context: ChannelHandlerContext) {
        start(context: context)
        context.fireChannelActive()
    }

    /// The connection preface (§3.4): the client's magic, its SETTINGS, and a connection window
    /// grown to `ConnectionReceiveWindow.targetSize`. TLS holds them until its handshake is done.
    private func start(context: ChannelHandlerContext) {
        startedAt = context.eventLoop.now
        output.writeStaticString(HTTP2Wire.clientPreface)
        HTTP2Wire.writeSettings(
            [
                (.enablePush, 0),
                (.maxConcurrentStreams, UInt32(Self.concurrentStreamsAllowed)),
                (.initialWindowSize, UInt32(Self.streamReceiveWindow)),
            ], to: &output)
        if let increment = receiveWindow.increment(receiving: 0) {
            HTTP2Wire.writeWindowUpdate(streamID: 0, increment: increment, to: &output)
        }
        flushNow(context: context)
    }

    // MARK: Requests

    /// Opens a stream for `request`, on the event loop, or keeps it until the peer's stream limit
    /// lets it open. Time is the event loop's (`EventLoop.now`), which tests can move.
    package func send(_ request: APNsStreamRequest) {
        guard !goingAway, let context, context.channel.isActive else {
            let why = failure.map { ": \($0)" } ?? ""
            request.answer(.failure(APNsTransportError(.notProcessed, "the connection is closing\(why)")))
            return
        }
        guard !hasExpired(request, now: context.eventLoop.now) else { return }
        if deadlineCheck.map({ request.deadline < $0.due }) ?? true { checkDeadlines(at: request.deadline, context: context) }
        guard streams.count < peerStreamLimit, waiting.isEmpty else {
            waiting.append(request)
            return
        }
        open(request, context: context)
    }

    private func open(_ request: APNsStreamRequest, context: ChannelHandlerContext) {
        let streamID = nextStreamID
        // Client streams are odd and increasing; stop well before the 2^31 limit.
        if streamID > UInt32(Int32.max) - 1000 {
            goingAway = true
            status.retire()
        } else {
            nextStreamID = streamID + 2
        }
        let body = request.body.flatMap { $0.readableBytes > 0 ? $0 : nil }
        writeHeaders(request.headers, streamID: streamID, endStream: body == nil)
        let now = context.eventLoop.now
        if streams.isEmpty {
            let firstCheck = liveness.owesAnswers(from: now)
            if livenessCheck == nil { checkLiveness(at: firstCheck, context: context) }
        }
        streams[streamID] = Stream(answer: request.answer, deadline: request.deadline, written: now, sendWindow: peerInitialWindow)
        if let body {
            if blockedData.isEmpty {
                writeData(streamID: streamID, body)
            } else {
                blockedData.append((streamID, body))  // behind the others, in order
            }
        }
        requestsSinceFlush += 1
        if requestsSinceFlush >= Self.flushEvery {
            flushNow(context: context)
        } else {
            scheduleFlush(context: context)
        }
    }

    /// HEADERS, and CONTINUATION frames for what does not fit in the peer's largest frame.
    private func writeHeaders(_ fields: [APNsRequest.Header], streamID: UInt32, endStream: Bool) {
        let start = output.writerIndex
        output.writeRepeatingByte(0, count: HTTP2Wire.frameHeaderSize)  // the frame header, once the length is known
        encoder.encode(fields, to: &output)
        let length = output.writerIndex - start - HTTP2Wire.frameHeaderSize
        let flags = endStream ? HTTP2Wire.Flag.endStream : 0
        if length <= peerMaxFrameSize {
            HTTP2Wire.setFrameHeader(
                length: length, type: .headers, flags: flags | HTTP2Wire.Flag.endHeaders, streamID: streamID, at: start, in: &output)
            return
        }
        var block = output.getSlice(at: start + HTTP2Wire.frameHeaderSize, length: length)!
        output.moveWriterIndex(to: start)
        var type = HTTP2Wire.FrameType.headers
        var frameFlags = flags
        while block.readableBytes > 0 {
            var fragment = block.readSlice(length: min(block.readableBytes, peerMaxFrameSize))!
            if block.readableBytes == 0 { frameFlags |= HTTP2Wire.Flag.endHeaders }
            HTTP2Wire.writeFrameHeader(length: fragment.readableBytes, type: type, flags: frameFlags, streamID: streamID, to: &output)
            output.writeBuffer(&fragment)
            type = .continuation
            frameFlags = 0
        }
    }

    /// Writes as much of `data` as both windows allow, and keeps the rest in `blockedData`. Nothing
    /// before the server's first SETTINGS: its stream window is not known until then, and a server
    /// that lowers it (nghttpd) does not count what was sent under the default as the RFC says it
    /// must (a stall or a FLOW_CONTROL_ERROR reset, seen under load).
    private func writeData(streamID: UInt32, _ data: ByteBuffer) {
        guard var stream = streams[streamID] else { return }  // reset meanwhile: nothing to send
        var data = data
        while data.readableBytes > 0, peerSettingsRead {
            let size = min(data.readableBytes, connectionSendWindow, stream.sendWindow, peerMaxFrameSize)
            guard size > 0 else { break }
            var chunk = data.readSlice(length: size)!
            let flags = data.readableBytes == 0 ? HTTP2Wire.Flag.endStream : 0
            HTTP2Wire.writeFrameHeader(length: size, type: .data, flags: flags, streamID: streamID, to: &output)
            output.writeBuffer(&chunk)
            connectionSendWindow -= size
            stream.sendWindow -= size
        }
        streams[streamID] = stream
        if data.readableBytes > 0 { blockedData.append((streamID, data)) }
    }

    /// Sends the bodies that waited for window, oldest first, as far as the windows now allow.
    private func writeBlockedData(context: ChannelHandlerContext) {
        guard !blockedData.isEmpty else { return }
        let blocked = blockedData
        blockedData.removeAll(keepingCapacity: true)
        for (streamID, data) in blocked {
            writeData(streamID: streamID, data)
        }
        scheduleFlush(context: context)
    }

    // MARK: Flushing

    private func flushNow(context: ChannelHandlerContext) {
        requestsSinceFlush = 0
        if output.readableBytes > 0 {
            context.write(wrapOutboundOut(output), promise: nil)
            // TLS has sealed the bytes by now, so the storage is ours again and is reused.
            output.clear()
        }
        context.flush()
    }

    private func scheduleFlush(context: ChannelHandlerContext) {
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            if output.readableBytes > 0, let context = self.context { flushNow(context: context) }
        }
    }

    // MARK: Deadlines

    /// Fails the requests whose deadline has passed at `due`, waiting or in flight, then looks
    /// again at the earliest deadline left. Answered streams leave the timer as it is: when it
    /// fires early, it only moves on to the next deadline.
    private func checkDeadlines(at due: NIODeadline, context: ChannelHandlerContext) {
        deadlineCheck?.task.cancel()
        let task = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            deadlineCheck = nil
            let now = context.eventLoop.now
            // The waiting first: a stream that times out lets the next of them open.
            waiting = CircularBuffer(waiting.filter { !hasExpired($0, now: now) })
            for (streamID, stream) in streams where stream.deadline <= now {
                timedOut(streamID, context: context)
            }
            let next = [streams.values.lazy.map(\.deadline).min(), waiting.lazy.map(\.deadline).min()].compactMap { $0 }.min()
            if let next { checkDeadlines(at: next, context: context) }
        }
        deadlineCheck = (due, task)
    }

    /// Whether `request`'s deadline has passed before it was sent; if so it is answered so. The
    /// caller has given up and may retry: sending it now could deliver the push twice.
    private func hasExpired(_ request: APNsStreamRequest, now: NIODeadline) -> Bool {
        guard request.deadline <= now else { return false }
        request.answer(.failure(APNsTransportError(.deadlineExceeded, "the deadline passed before the request could be sent")))
        return true
    }

    private func timedOut(_ streamID: UInt32, context: ChannelHandlerContext) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        stream.answer(.failure(APNsTransportError(.deadlineExceeded, "no answer from APNs before the deadline")))
        guard context.channel.isActive else { return }
        HTTP2Wire.writeRSTStream(streamID: streamID, code: .cancel, to: &output)
        streamClosed(context: context)
        scheduleFlush(context: context)
    }

    // MARK: Liveness

    private func checkLiveness(at due: NIODeadline, context: ChannelHandlerContext) {
        livenessCheck = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            livenessCheck = nil
            switch liveness.check(at: context.eventLoop.now, owesAnswers: !streams.isEmpty) {
            case .stop:
                break
            case .checkAt(let next):
                checkLiveness(at: next, context: context)
            case .ping(let next):
                pingsSent += 1
                HTTP2Wire.writeFrameHeader(length: 8, type: .ping, streamID: 0, to: &output)
                output.writeInteger(pingsSent)
                flushNow(context: context)
                checkLiveness(at: next, context: context)
            case .dead(let silence):
                end(
                    APNsTransportError(
                        .connectionClosed,
                        "APNs sent nothing for \(silence.nanoseconds / 1_000_000) ms with requests in flight, nor answered a PING: the connection was taken for dead"
                    ),
                    goAway: .noError, context: context)
            }
        }
    }

    // MARK: Frames read

    package func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        liveness.heard(at: context.eventLoop.now)
        var bytes = unwrapInboundIn(data)
        if unread != nil {
            unread!.writeBuffer(&bytes)
        } else {
            unread = bytes
        }
        do throws(HTTP2Wire.ConnectionError) {
            while let (header, payload) = try HTTP2Wire.readFrame(from: &unread!, maxFrameSize: HTTP2Wire.defaultMaxFrameSize) {
                try read(header, payload, context: context)
                guard self.context != nil, unread != nil else { return }
            }
        } catch {
            connectionError(error, context: context)
            return
        }
        if unread!.readableBytes == 0 {
            unread = nil
        } else {
            // Part of a frame is left: moved to the front, so that the buffer does not grow by
            // every read that ends inside a frame.
            unread!.discardReadBytes()
        }
    }

    package func channelReadComplete(context: ChannelHandlerContext) {
        if output.readableBytes > 0 { flushNow(context: context) }
        if goingAway, streams.isEmpty, context.channel.isActive { context.close(promise: nil) }
        context.fireChannelReadComplete()
    }

    private func read(_ header: HTTP2Wire.FrameHeader, _ payload: ByteBuffer, context: ChannelHandlerContext) throws(HTTP2Wire.ConnectionError) {
        // §6.10: nothing may come between a HEADERS frame and the end of its header block.
        if let block = headerBlock, header.type != HTTP2Wire.FrameType.continuation.rawValue || header.streamID != block.streamID {
            throw .init(.protocolError, "a frame came in the middle of the header block of stream \(block.streamID)")
        }
        switch HTTP2Wire.FrameType(rawValue: header.type) {
        case .data:
            try readData(header, payload, context: context)
        case .headers:
            guard header.streamID != 0 else { throw .init(.protocolError, "HEADERS on stream 0") }
            var block = try HTTP2Wire.unpadded(payload, header)
            if header.has(HTTP2Wire.Flag.priority) {
                guard block.readableBytes >= 5 else { throw .init(.frameSizeError, "HEADERS too short for its priority") }
                block.moveReaderIndex(forwardBy: 5)
            }
            if header.has(HTTP2Wire.Flag.endHeaders) {
                try readHeaderBlock(&block, streamID: header.streamID, endStream: header.has(HTTP2Wire.Flag.endStream), context: context)
            } else {
                headerBlock = (header.streamID, header.has(HTTP2Wire.Flag.endStream), block)
            }
        case .continuation:
            guard var block = headerBlock else { throw .init(.protocolError, "CONTINUATION without HEADERS") }
            var fragment = payload
            block.fragments.writeBuffer(&fragment)
            if header.has(HTTP2Wire.Flag.endHeaders) {
                headerBlock = nil
                try readHeaderBlock(&block.fragments, streamID: block.streamID, endStream: block.endStream, context: context)
            } else {
                headerBlock = block
            }
        case .rstStream:
            guard header.length == 4 else { throw .init(.frameSizeError, "RST_STREAM of \(header.length) bytes") }
            let code = payload.getInteger(at: payload.readerIndex, as: UInt32.self)!
            fail(header.streamID, APNsTransportError(.streamReset, "APNs reset the stream (\(HTTP2Wire.ErrorCode.name(code)))"))
            streamClosed(context: context)
        case .settings:
            try readSettings(header, payload, context: context)
        case .pushPromise:
            throw .init(.protocolError, "PUSH_PROMISE, which this client disabled")
        case .ping:
            guard header.length == 8 else { throw .init(.frameSizeError, "PING of \(header.length) bytes") }
            guard !header.has(HTTP2Wire.Flag.ack) else { return }
            var opaque = payload
            HTTP2Wire.writeFrameHeader(length: 8, type: .ping, flags: HTTP2Wire.Flag.ack, streamID: 0, to: &output)
            output.writeBuffer(&opaque)
        case .goAway:
            guard header.length >= 8 else { throw .init(.frameSizeError, "GOAWAY of \(header.length) bytes") }
            var payload = payload
            let lastStreamID = payload.readInteger(as: UInt32.self)! & 0x7FFF_FFFF
            let code = payload.readInteger(as: UInt32.self)!
            goAway(lastStreamID: lastStreamID, code: code, debugData: payload, context: context)
        case .windowUpdate:
            try readWindowUpdate(header, payload, context: context)
        case .priority, nil:
            break  // priorities are advice; unknown frame types are ignored (§5.5)
        }
    }

    private func readData(_ header: HTTP2Wire.FrameHeader, _ payload: ByteBuffer, context: ChannelHandlerContext) throws(HTTP2Wire.ConnectionError) {
        guard header.streamID != 0 else { throw .init(.protocolError, "DATA on stream 0") }
        // Flow control counts the whole frame, padding included, on streams closed or not.
        if let increment = receiveWindow.increment(receiving: header.length) {
            HTTP2Wire.writeWindowUpdate(streamID: 0, increment: increment, to: &output)
        }
        var data = try HTTP2Wire.unpadded(payload, header)
        guard var stream = streams[header.streamID] else { return }
        if data.readableBytes > 0 {
            if stream.body == nil {
                stream.body = data
            } else {
                stream.body!.writeBuffer(&data)
            }
        }
        stream.received += header.length
        if !header.has(HTTP2Wire.Flag.endStream), stream.received >= Self.streamReceiveWindow / 2 {
            HTTP2Wire.writeWindowUpdate(streamID: header.streamID, increment: stream.received, to: &output)
            stream.received = 0
        }
        streams[header.streamID] = stream
        if header.has(HTTP2Wire.Flag.endStream) { complete(header.streamID, context: context) }
    }

    private func readHeaderBlock(
        _ block: inout ByteBuffer, streamID: UInt32, endStream: Bool, context: ChannelHandlerContext
    ) throws(HTTP2Wire.ConnectionError) {
        // Decoded even for a stream already closed: the decoder's table must follow the peer's.
        let fields: HPACKHeaders
        do {
            fields = try decoder.decodeHeaders(from: &block)
        } catch {
            throw .init(.compressionError, "a header block that cannot be decoded: \(error)")
        }
        guard var stream = streams[streamID] else { return }
        if stream.status == nil {
            for field in fields {
                if field.name == ":status" {
                    stream.status = Int(field.value)
                } else if !field.name.hasPrefix(":") {
                    stream.headers.append((field.name, field.value))
                }
            }
        }
        streams[streamID] = stream
        if endStream { complete(streamID, context: context) }
    }

    private func readSettings(_ header: HTTP2Wire.FrameHeader, _ payload: ByteBuffer, context: ChannelHandlerContext) throws(HTTP2Wire
        .ConnectionError)
    {
        guard header.streamID == 0 else { throw .init(.protocolError, "SETTINGS on stream \(header.streamID)") }
        if header.has(HTTP2Wire.Flag.ack) {
            guard header.length == 0 else { throw .init(.frameSizeError, "a SETTINGS acknowledgement with a payload") }
            return
        }
        guard header.length % 6 == 0 else { throw .init(.frameSizeError, "SETTINGS of \(header.length) bytes") }
        if !peerSettingsRead {
            peerSettingsRead = true
            peerStreamLimit = .max
        }
        var payload = payload
        while let identifier = payload.readInteger(as: UInt16.self), let value = payload.readInteger(as: UInt32.self) {
            switch HTTP2Wire.Setting(rawValue: identifier) {
            case .headerTableSize:
                encoder.peerAllowsTableSize(Int(value))
            case .maxConcurrentStreams:
                peerStreamLimit = Int(value)
                // The pool needs the limit to spread requests and to know when to open another connection.
                status.announced(streamLimit: Int(value))
            case .initialWindowSize:
                guard value <= HTTP2Wire.maxWindowSize else {
                    throw .init(.flowControlError, "an initial window of \(value), above 2^31-1")
                }
                let change = Int(value) - peerInitialWindow
                peerInitialWindow = Int(value)
                for index in streams.values.indices { streams.values[index].sendWindow += change }
            case .maxFrameSize:
                guard (HTTP2Wire.defaultMaxFrameSize...16_777_215).contains(Int(value)) else {
                    throw .init(.protocolError, "a maximum frame size of \(value)")
                }
                peerMaxFrameSize = Int(value)
            case .enablePush, .maxHeaderListSize, nil:
                break
            }
        }
        HTTP2Wire.writeFrameHeader(length: 0, type: .settings, flags: HTTP2Wire.Flag.ack, streamID: 0, to: &output)
        writeBlockedData(context: context)
        openWaiting(context: context)
    }

    private func readWindowUpdate(_ header: HTTP2Wire.FrameHeader, _ payload: ByteBuffer, context: ChannelHandlerContext) throws(HTTP2Wire
        .ConnectionError)
    {
        guard header.length == 4 else { throw .init(.frameSizeError, "WINDOW_UPDATE of \(header.length) bytes") }
        let increment = Int(payload.getInteger(at: payload.readerIndex, as: UInt32.self)! & 0x7FFF_FFFF)
        if header.streamID == 0 {
            guard increment > 0 else { throw .init(.protocolError, "a WINDOW_UPDATE of 0 for the connection") }
            connectionSendWindow += increment
            guard connectionSendWindow <= HTTP2Wire.maxWindowSize else {
                throw .init(.flowControlError, "the connection's window above 2^31-1")
            }
        } else if var stream = streams[header.streamID] {
            stream.sendWindow += increment
            guard increment > 0, stream.sendWindow <= HTTP2Wire.maxWindowSize else {
                // A stream error (§6.9): this stream ends, the connection goes on.
                fail(header.streamID, APNsTransportError(.streamReset, "APNs broke the flow control of the stream"))
                HTTP2Wire.writeRSTStream(streamID: header.streamID, code: .flowControlError, to: &output)
                streamClosed(context: context)
                return
            }
            streams[header.streamID] = stream
        }
        writeBlockedData(context: context)
    }

    // MARK: Streams ending

    private func complete(_ streamID: UInt32, context: ChannelHandlerContext) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        status.answerCame()
        streamClosed(context: context)
        guard let code = stream.status else {
            stream.answer(.failure(APNsTransportError(.invalidAnswer, "the answer had no :status")))
            return
        }
        let took = context.eventLoop.now - stream.written
        liveness.measured(answer: took)
        let roundTrip = Duration.nanoseconds(took.nanoseconds)
        stream.answer(.success(APNsRawResponse(status: code, headers: stream.headers, body: stream.body, roundTrip: roundTrip)))
    }

    private func fail(_ streamID: UInt32, _ error: any Error) {
        guard let stream = streams.removeValue(forKey: streamID) else { return }
        stream.answer(.failure(error))
    }

    /// A stream closed: a request kept back by the peer's limit may open.
    private func streamClosed(context: ChannelHandlerContext) {
        if !waiting.isEmpty { openWaiting(context: context) }
    }

    private func openWaiting(context: ChannelHandlerContext) {
        while streams.count < peerStreamLimit, !goingAway, let request = waiting.popFirst() {
            if !hasExpired(request, now: context.eventLoop.now) { open(request, context: context) }
        }
    }

    private func failAll(_ error: any Error) {
        let open = streams
        let notSent = waiting
        streams.removeAll()
        waiting.removeAll()
        blockedData.removeAll()
        deadlineCheck?.task.cancel()
        deadlineCheck = nil
        livenessCheck?.cancel()
        livenessCheck = nil
        for stream in open.values { stream.answer(.failure(error)) }
        for request in notSent {
            request.answer(.failure(APNsTransportError(.notProcessed, "the connection closed before the request was sent")))
        }
    }

    /// APNs will take no stream above `lastStreamID`: those were not processed and may be retried
    /// elsewhere. The others finish; then the connection closes.
    private func goAway(lastStreamID: UInt32, code: UInt32, debugData: ByteBuffer, context: ChannelHandlerContext) {
        goingAway = true
        status.retire()
        var reason = HTTP2Wire.ErrorCode.name(code)
        if let json = try? JSONValue(parsing: debugData.readableBytesView), let text = json["reason"]?.stringValue {
            reason = text
        }
        failure = APNsTransportError(.notProcessed, "APNs sent GOAWAY (\(reason))")
        for streamID in streams.keys where streamID > lastStreamID {
            fail(streamID, APNsTransportError(.notProcessed, "APNs sent GOAWAY (\(reason)) before processing the request"))
        }
        let notSent = waiting
        waiting.removeAll()
        for request in notSent {
            request.answer(.failure(APNsTransportError(.notProcessed, "APNs sent GOAWAY (\(reason)) before the request was sent")))
        }
        if streams.isEmpty { context.close(promise: nil) }
    }

    /// The peer broke the protocol: GOAWAY with the code, and the connection closes (§5.4.1).
    private func connectionError(_ error: HTTP2Wire.ConnectionError, context: ChannelHandlerContext) {
        end(APNsTransportError(.connectionClosed, "APNs broke HTTP/2: \(error)"), goAway: error.code, context: context)
    }

    /// Ends the connection from this side: nothing more is read or sent, GOAWAY with `code`, every
    /// request still here fails with `error` (those not sent yet as not processed), and it closes.
    private func end(_ error: APNsTransportError, goAway code: HTTP2Wire.ErrorCode, context: ChannelHandlerContext) {
        unread = nil
        failure = error
        goingAway = true
        status.retire()
        HTTP2Wire.writeGoAway(lastStreamID: 0, code: code, to: &output)
        flushNow(context: context)
        failAll(error)
        context.close(promise: nil)
    }

    // MARK: The connection's life

    package func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Requests are written only once `ready` succeeds, so a failure here has none in flight.
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            if let startedAt { liveness.measured(handshake: context.eventLoop.now - startedAt) }
            if negotiated == "h2" {
                ready.succeed()
            } else {
                ready.fail(APNsTransportError(.connectFailed, "the server did not agree to HTTP/2 (ALPN: \(negotiated ?? "none"))"))
                context.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    package func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil { failure = error }
        ready.fail(APNsTransportError(.connectFailed, "TLS with APNs failed: \(error)"))
        status.retire()
        failAll(APNsTransportError(.connectionClosed, "connection failed: \(error)"))
        context.close(promise: nil)
    }

    package func channelInactive(context: ChannelHandlerContext) {
        ready.fail(APNsTransportError(.connectFailed, "the server closed the connection during set-up"))
        status.retire()
        let why = failure.map { ": \($0)" } ?? ""
        failAll(APNsTransportError(.connectionClosed, "the connection closed with the request in flight\(why)"))
        context.fireChannelInactive()
    }
}

@available(*, unavailable)
extension APNsStreamsHandler: Sendable {}
