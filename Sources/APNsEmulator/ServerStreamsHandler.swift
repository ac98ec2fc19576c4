import APNs
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// Gathers each stream's HEADERS and DATA into a request, asks the responder, writes the answer.
/// Answers written while reading are flushed once per read burst.
final class ServerStreamsHandler<Responder: RequestResponder>: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private let connectionID: Int
    private let responder: Responder
    private var connection: Responder.Connection
    private let idle: IdlePolicy?
    private let latency: LatencySetting?
    private var random = LatencyRandom()
    private var advertisedStreamLimit: Int
    private var partial: [HTTP2StreamID: ReceivedRequest] = [:]
    private var needsFlush = false
    private var receiveWindow = ConnectionReceiveWindow()
    /// The highest stream answered or being answered: what a GOAWAY names as processed.
    private var lastProcessedStream = HTTP2StreamID.rootStream
    /// Set once the connection closes (dropped, or after GOAWAY once its answers are written):
    /// nothing more is read or written.
    private var isClosing = false
    /// The GOAWAY sent: no new streams; the connection closes once the answers waiting are written.
    private var goneAway: HTTP2Frame?
    private var goingAway: Bool { goneAway != nil }
    /// Holds everything the connection writes while it is frozen (`ServerAnswer.frozen`).
    private let freeze: OutputFreeze
    /// Answers waiting for their time, by the millisecond they are due (`later`).
    private var waiting: [UInt64: [(HTTP2StreamID, ServerAnswer)]] = [:]
    /// The streams whose answer waits for its time, and those of them the client reset meanwhile
    /// (as clients with a deadline do): their answer is dropped, since a frame written to a
    /// closed stream is an error of this end that would end the whole connection.
    private var answersDue: Set<HTTP2StreamID> = []
    private var resetWhileDue: Set<HTTP2StreamID> = []
    private var idleCheck: Scheduled<Void>?
    private var lastRequestTime = NIODeadline.uptimeNanoseconds(0)
    /// Stream errors NIOHTTP2 reported, and the streams reset with an error code, since the last
    /// read was handled. NIOHTTP2 answers a stream error with RST_STREAM and a connection error
    /// with GOAWAY (and its code) by itself; the error and the closing of the stream it reset
    /// come in the same read, in either order.
    private var streamErrors: [any Error] = []
    private var streamsReset: [HTTP2StreamID] = []
    /// Each connection this end closes, and why.
    private let logger: Logger

    init(
        connectionID: Int, responder: Responder, connection: Responder.Connection, freeze: OutputFreeze, idle: IdlePolicy?,
        latency: LatencySetting? = nil, logger: Logger = APNsEmulator.Configuration.defaultLogger
    ) {
        self.logger = logger
        self.connectionID = connectionID
        self.responder = responder
        self.connection = connection
        self.freeze = freeze
        self.idle = idle
        self.latency = latency
        self.advertisedStreamLimit = connection.maxConcurrentStreams
    }

    func handlerAdded(context: ChannelHandlerContext) {
        lastRequestTime = context.eventLoop.now
        if idle != nil { scheduleIdleCheck(context: context) }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        isClosing = true
        idleCheck?.cancel()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !isClosing, !goingAway else { return }
        let frame = unwrapInboundIn(data)
        if let update = receiveWindow.windowUpdate(after: frame) {
            context.write(wrapOutboundOut(update), promise: nil)
            needsFlush = true
        }
        switch frame.payload {
        case .headers(let headers):
            if partial[frame.streamID] == nil {
                var request = ReceivedRequest(connectionID: connectionID, method: "", path: "", authority: nil, headers: [], body: [])
                for header in headers.headers {
                    switch header.name {
                    case ":method": request.method = header.value
                    case ":path": request.path = header.value
                    case ":authority": request.authority = header.value
                    case ":scheme": break
                    default: request.headers.append((header.name, header.value))
                    }
                }
                partial[frame.streamID] = request
            }
            if headers.endStream { dispatch(frame.streamID, context: context) }
        case .data(let data):
            if case .byteBuffer(let buffer) = data.data, buffer.readableBytes > 0 {
                partial[frame.streamID]?.body.append(contentsOf: buffer.readableBytesView)
            }
            if data.endStream { dispatch(frame.streamID, context: context) }
        case .rstStream:
            partial.removeValue(forKey: frame.streamID)
            if answersDue.contains(frame.streamID) { resetWhileDue.insert(frame.streamID) }
        default:
            break
        }
    }

    private func dispatch(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let request = partial.removeValue(forKey: streamID) else { return }
        lastRequestTime = context.eventLoop.now
        var answer = responder.answer(request, connection: &connection)
        if let latency = latency?.latency, !latency.isZero { answer = answer.after(latency.sample(using: &random)) }
        if connection.maxConcurrentStreams != advertisedStreamLimit {
            advertisedStreamLimit = connection.maxConcurrentStreams
            let settings = HTTP2Frame.FramePayload.settings(.settings([HTTP2Setting(parameter: .maxConcurrentStreams, value: advertisedStreamLimit)]))
            context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: settings)), promise: nil)
            needsFlush = true
        }
        perform(answer, on: streamID, context: context)
    }

    private func perform(_ answer: ServerAnswer, on streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard !isClosing else { return }
        switch answer {
        case .respond(let status, let headers, let body):
            lastProcessedStream = max(lastProcessedStream, streamID)
            var block = HPACKHeaders()
            block.reserveCapacity(headers.count + 1)
            block.add(name: ":status", value: String(status))
            for header in headers { block.add(name: header.name, value: header.value) }
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: block, endStream: body == nil)))),
                promise: nil)
            if let body {
                context.write(
                    wrapOutboundOut(
                        HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(ByteBuffer(bytes: body)), endStream: true)))),
                    promise: nil)
            }
        case .noAnswer:
            lastProcessedStream = max(lastProcessedStream, streamID)
            return
        case .resetStream(let code):
            lastProcessedStream = max(lastProcessedStream, streamID)
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(code))), promise: nil)
        case .delayed(let delay, let answer):
            // Counts as processed now: a GOAWAY sent meanwhile must not invite a retry of it.
            if answer.processes { lastProcessedStream = max(lastProcessedStream, streamID) }
            later(answer, on: streamID, at: context.eventLoop.now + delay, context: context)
            return
        case .frozen(let duration, let answer):
            freeze.freeze(for: duration)
            perform(answer, on: streamID, context: context)
            return
        case .goAway(let answer, let debugData):
            if let answer { perform(answer, on: streamID, context: context) }
            goAway(debugData: debugData, context: context)
            return
        case .closeConnection:
            isClosing = true
            logger.info("connection dropped: a fault", metadata: ["connection": "\(connectionID)"])
            context.close(promise: nil)
            return
        }
        needsFlush = true
    }

    /// Performs `answer` at `deadline` (rounded up to the millisecond), holding nothing else back.
    /// Answers due in the same millisecond share one timer: with a timer for each answer, a latency
    /// cost the emulator 8 to 18 µs more a push at 15,000 pushes a second; now 2 to 5.
    private func later(_ answer: ServerAnswer, on streamID: HTTP2StreamID, at deadline: NIODeadline, context: ChannelHandlerContext) {
        let millisecond = (deadline.uptimeNanoseconds + 999_999) / 1_000_000
        answersDue.insert(streamID)
        guard waiting[millisecond] == nil else {
            waiting[millisecond]!.append((streamID, answer))
            return
        }
        waiting[millisecond] = [(streamID, answer)]
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.assumeIsolated().scheduleTask(deadline: .uptimeNanoseconds(millisecond * 1_000_000)) {
            let (handler, context) = handler.value
            for (streamID, answer) in handler.waiting.removeValue(forKey: millisecond) ?? [] {
                handler.answersDue.remove(streamID)
                if handler.resetWhileDue.remove(streamID) != nil { continue }
                handler.perform(answer, on: streamID, context: context)
            }
            handler.flushIfNeeded(context: context)
            handler.closeIfGoneAway(context: context)
        }
    }

    /// GOAWAY naming the last stream processed; those are still answered (a latency or a delay
    /// may hold their answers), later ones never. Then the connection closes.
    private func goAway(debugData: [UInt8], context: ChannelHandlerContext) {
        guard !isClosing, !goingAway else { return }
        let frame = HTTP2Frame(
            streamID: .rootStream,
            payload: .goAway(
                lastStreamID: lastProcessedStream, errorCode: .noError, opaqueData: ByteBuffer(bytes: debugData)))
        goneAway = frame
        logger.info(
            "connection going away: GOAWAY NO_ERROR",
            metadata: [
                "connection": "\(connectionID)", "last.stream": "\(lastProcessedStream)", "debug": "\(String(decoding: debugData, as: UTF8.self))",
            ])
        if waiting.isEmpty {
            closeIfGoneAway(context: context)
        } else {
            context.write(wrapOutboundOut(frame), promise: nil)
            needsFlush = true
            flushIfNeeded(context: context)
        }
    }

    /// Once gone away with nothing left to answer: GOAWAY (again, as RFC 9113 §6.8 allows), and
    /// the connection closes when it is written, after everything before it.
    private func closeIfGoneAway(context: ChannelHandlerContext) {
        guard let goneAway, !isClosing, waiting.isEmpty else { return }
        isClosing = true
        needsFlush = false
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(goneAway)).whenComplete { _ in channel.close(promise: nil) }
    }

    private func scheduleIdleCheck(context: ChannelHandlerContext) {
        guard let idle else { return }
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        idleCheck = context.eventLoop.assumeIsolated().scheduleTask(deadline: lastRequestTime + idle.timeout) {
            let (handler, context) = handler.value
            guard !handler.isClosing else { return }
            if !handler.partial.isEmpty {
                handler.lastRequestTime = context.eventLoop.now  // a request is still arriving: not idle
            } else if context.eventLoop.now >= handler.lastRequestTime + idle.timeout {
                handler.goAway(debugData: idle.debugData, context: context)
                return
            }
            handler.scheduleIdleCheck(context: context)
        }
    }

    private func flushIfNeeded(context: ChannelHandlerContext) {
        if needsFlush {
            needsFlush = false
            context.flush()
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if streamErrors.isEmpty { streamsReset.removeAll() }  // a client's own resets
        flushIfNeeded(context: context)
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Kept until the read is handled: with a stream error, it is NIOHTTP2's RST_STREAM for it.
        if let closed = event as? StreamClosedEvent, let reason = closed.reason, reason != .cancel {
            streamsReset.append(closed.streamID)
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard !isClosing else { return }
        guard Self.streamError(error) != nil else {
            // A connection error: NIOHTTP2 has written GOAWAY with its code; the connection ends.
            logger.warning("connection ended: an HTTP/2 connection error", metadata: ["connection": "\(connectionID)", "error": "\(error)"])
            isClosing = true
            context.close(promise: nil)
            return
        }
        if streamErrors.isEmpty {
            let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
            context.eventLoop.assumeIsolated().execute {
                let (handler, _) = handler.value
                handler.journalStreamErrors()
            }
        }
        streamErrors.append(error)
    }

    /// Where in a stream NIOHTTP2 refused it.
    enum StreamErrorPlace {
        /// At its HEADERS: the request never reached this handler.
        case head
        /// After its HEADERS: what had arrived is in `partial`.
        case body
    }

    /// The errors NIOHTTP2 answers with RST_STREAM alone (RFC 9113 §8.1.1, §8.2), and where:
    /// a header block HTTP/2 forbids, a body that disagrees with its content-length, trailers
    /// without END_STREAM. Nil for a connection error.
    static func streamError(_ error: any Error) -> StreamErrorPlace? {
        switch error {
        case is NIOHTTP2Errors.InvalidHTTP2HeaderFieldName, is NIOHTTP2Errors.InvalidHTTP2HeaderFieldValue,
            is NIOHTTP2Errors.ForbiddenHeaderField, is NIOHTTP2Errors.MissingPseudoHeader, is NIOHTTP2Errors.DuplicatePseudoHeader,
            is NIOHTTP2Errors.PseudoHeaderAfterRegularHeader, is NIOHTTP2Errors.UnknownPseudoHeader, is NIOHTTP2Errors.UnsupportedPseudoHeader,
            is NIOHTTP2Errors.InvalidPseudoHeaders, is NIOHTTP2Errors.InvalidPseudoHeaderValue, is NIOHTTP2Errors.EmptyPathHeader,
            is NIOHTTP2Errors.ContentLengthHeadersMismatch:
            .head
        case is NIOHTTP2Errors.StreamError, is NIOHTTP2Errors.ContentLengthViolated, is NIOHTTP2Errors.TrailersWithoutEndStream:
            .body
        default:
            nil
        }
    }

    /// Each refused stream goes to the journal; the connection and its other streams go on. One
    /// refused at its HEADERS is known only by what NIOHTTP2 says of it; one refused later is
    /// journaled with what had arrived of it.
    private func journalStreamErrors() {
        var reset = streamsReset
        for error in streamErrors {
            var known: HTTP2StreamID?
            if Self.streamError(error) == .body, let index = reset.firstIndex(where: { partial[$0] != nil }) {
                known = reset.remove(at: index)
            }
            let request =
                known.flatMap { partial.removeValue(forKey: $0) }
                ?? ReceivedRequest(connectionID: connectionID, method: "", path: "", authority: nil, headers: [], body: [])
            responder.malformed(request, error: error, connection: &connection)
        }
        streamErrors = []
        streamsReset = []
    }
}

@available(*, unavailable)
extension ServerStreamsHandler: Sendable {}

extension ConnectionReceiveWindow {
    /// The WINDOW_UPDATE to send for this inbound frame, if any.
    mutating func windowUpdate(after frame: HTTP2Frame) -> HTTP2Frame? {
        var bytes = 0
        if case .data(let data) = frame.payload {
            // Flow control counts the padding and its length byte too.
            bytes = data.data.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0)
        }
        return increment(receiving: bytes).map { HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: $0)) }
    }
}
