import Foundation
import LiveActivityKit
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// A request handed to a connection: header block, body, deadline, and where its answer goes
/// (called exactly once, by the streams handler).
struct APNsStreamRequest: Sendable {
    var headers: HPACKHeaders
    var body: ByteBuffer?
    var deadline: NIODeadline
    var answer: @Sendable (Result<APNsRawResponse, any Error>) -> Void
}

/// What the pool knows of a connection (`ConnectionPlan.Connection`): written by its handler on
/// the event loop and by the pool as it hands out and takes back streams; read by the pool.
final class ConnectionStatus: Sendable {
    private let usable = Atomic<Bool>(true)
    private let answered = Atomic<Bool>(false)
    private let limit = Atomic<Int>(1)
    private let open = Atomic<Int>(0)

    var isUsable: Bool { usable.load(ordering: .relaxed) }
    /// No new requests: APNs sent GOAWAY, or the connection failed or ran out of stream ids.
    func retire() { usable.store(false, ordering: .relaxed) }

    func announced(streamLimit: Int) { limit.store(streamLimit, ordering: .relaxed) }
    func answerCame() { if !answered.load(ordering: .relaxed) { answered.store(true, ordering: .relaxed) } }

    func streamTaken() { open.add(1, ordering: .relaxed) }
    func streamClosed() { open.subtract(1, ordering: .relaxed) }

    func planned(isConnecting: Bool) -> ConnectionPlan.Connection {
        .init(
            isConnecting: isConnecting, hasAnswered: answered.load(ordering: .relaxed),
            openStreams: open.load(ordering: .relaxed), streamLimit: limit.load(ordering: .relaxed))
    }
}

/// One HTTP/2 + TLS connection to APNs. Requests are multiplexed as streams written straight to
/// `NIOHTTP2Handler` (no child channel per stream). The pool hands a connection no more streams
/// than APNs advertises while another has room (`ConnectionPlan`); what goes beyond waits in
/// NIO's concurrent-stream buffer.
final class APNsConnection: Sendable {
    let channel: any Channel
    let status: ConnectionStatus
    private let streams: NIOLoopBound<APNsStreamsHandler>

    private init(channel: any Channel, status: ConnectionStatus, streams: NIOLoopBound<APNsStreamsHandler>) {
        self.channel = channel
        self.status = status
        self.streams = streams
    }

    var isUsable: Bool { status.isUsable && channel.isActive }

    /// Connects and completes once TLS is up with HTTP/2 agreed by ALPN, so that every failure to
    /// establish the connection (TCP, certificate, ALPN, or the deadline) is a `connectFailed`.
    static func connect(
        to endpoint: APNsEndpoint, sslContext: NIOSSLContext, group: any EventLoopGroup, timeout: TimeAmount,
        status: ConnectionStatus = ConnectionStatus()
    ) -> EventLoopFuture<APNsConnection> {
        let loop = group.next()
        let ready = loop.makePromise(of: Void.self)
        let deadline = loop.scheduleTask(in: timeout) {
            ready.fail(APNsTransportError(.connectFailed, "no TLS connection within \(timeout)"))
        }
        ready.futureResult.whenComplete { _ in deadline.cancel() }
        // SNI carries names only; for an IP address NIOSSL checks the certificate's IP entries.
        let serverName = isIPAddress(endpoint.host) ? nil : endpoint.host
        return ClientBootstrap(group: loop)
            .connectTimeout(timeout)
            .channelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture { () throws -> Void in
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(NIOSSLClientHandler(context: sslContext, serverHostname: serverName))
                    try pipeline.addHandler(FlushCoalescingHandler())
                    try pipeline.addHandler(NIOHTTP2Handler(
                        mode: .client,
                        initialSettings: [
                            HTTP2Setting(parameter: .enablePush, value: 0),
                            HTTP2Setting(parameter: .maxConcurrentStreams, value: 1000),
                            HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                        ],
                        // Requests are checked once by the client (`APNsRequest.malformation`);
                        // an answer is read for its status, headers and body only.
                        headerBlockValidation: .disabled, contentLengthValidation: .disabled))
                    try pipeline.addHandler(APNsStreamsHandler(status: status, ready: ready))
                }
            }
            .connect(host: endpoint.host, port: endpoint.port)
            .flatMap { channel in
                ready.futureResult
                    .flatMapThrowing {
                        let streams = try channel.pipeline.syncOperations.handler(type: APNsStreamsHandler.self)
                        return APNsConnection(channel: channel, status: status, streams: NIOLoopBound(streams, eventLoop: channel.eventLoop))
                    }
                    .flatMapErrorThrowing { error in
                        channel.close(promise: nil)
                        throw error
                    }
            }
            .flatMapErrorThrowing { error in
                ready.fail(error)
                if let error = error as? APNsTransportError { throw error }
                throw APNsTransportError(.connectFailed, "cannot connect to \(endpoint.authority): \(error)")
            }
    }

    /// Hands the request straight to the streams handler, on the event loop (without a hop when
    /// the task already runs there), and awaits the answer as a continuation: no write through the
    /// pipeline, and none of the two promises per push that it took.
    func send(headers: HPACKHeaders, body: ByteBuffer?, deadline: NIODeadline) async throws -> APNsRawResponse {
        let loop = channel.eventLoop
        return try await withUnsafeThrowingContinuation { task in
            let request = APNsStreamRequest(headers: headers, body: body, deadline: deadline, answer: { task.resume(with: $0) })
            if loop.inEventLoop {
                streams.value.send(request)
            } else {
                loop.execute { self.streams.value.send(request) }
            }
        }
    }

    func close() async {
        status.retire()
        try? await channel.close()
    }
}

private func isIPAddress(_ host: String) -> Bool {
    (try? SocketAddress(ipAddress: host, port: 0)) != nil
}

/// Turns requests into HTTP/2 streams and frames back into answers, on the event loop.
final class APNsStreamsHandler: ChannelDuplexHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct InFlight {
        var answer: @Sendable (Result<APNsRawResponse, any Error>) -> Void
        var deadline: NIODeadline
        var written: NIODeadline
        var status: Int?
        var headers: [(name: String, value: String)] = []
        var body: ByteBuffer?
    }

    private let status: ConnectionStatus
    /// Completed when TLS is up with HTTP/2, failed if the connection dies before.
    private let ready: EventLoopPromise<Void>
    private var nextStreamID = HTTP2StreamID(1)
    private var inFlight: [HTTP2StreamID: InFlight] = [:]
    private var goingAway = false
    private var receiveWindow = ConnectionReceiveWindow()
    /// One timer for the connection, due at the earliest deadline in flight (or earlier): a
    /// timer per stream cost a scheduling and a cancellation of NIO's task heap per push.
    private var deadlineCheck: (due: NIODeadline, task: Scheduled<Void>)?
    /// Why the connection failed, given to requests that fail because of it.
    private var failure: (any Error)?
    /// The handler's place in the pipeline, while it is in one: requests come from
    /// `APNsConnection.send`, not through the pipeline.
    private var context: ChannelHandlerContext?

    init(status: ConnectionStatus, ready: EventLoopPromise<Void>) {
        self.status = status
        self.ready = ready
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        self.context = nil
    }

    // MARK: Outbound

    /// Opens a stream for `request`, on the event loop.
    func send(_ request: APNsStreamRequest) {
        let now = NIODeadline.now()
        // The caller has given up and may retry: sending now could deliver the push twice.
        guard request.deadline > now else {
            request.answer(.failure(APNsTransportError(.deadlineExceeded, "the deadline passed before the request could be sent")))
            return
        }
        guard !goingAway, let context, context.channel.isActive else {
            let why = failure.map { ": \($0)" } ?? ""
            request.answer(.failure(APNsTransportError(.notProcessed, "the connection is closing\(why)")))
            return
        }
        let streamID = nextStreamID
        // Client streams are odd and increasing; stop well before the 2^31 limit.
        if streamID > HTTP2StreamID(Int32.max - 1000) {
            goingAway = true
            status.retire()
        } else {
            nextStreamID = streamID.advanced(by: 2)
        }

        inFlight[streamID] = InFlight(answer: request.answer, deadline: request.deadline, written: now)
        if deadlineCheck.map({ request.deadline < $0.due }) ?? true { checkDeadlines(at: request.deadline, context: context) }

        let headersWritten = context.eventLoop.makePromise(of: Void.self)
        headersWritten.futureResult.assumeIsolated().whenFailure { [self] error in
            self.fail(streamID, APNsTransportError(.notProcessed, "the stream could not be opened: \(error)"))
        }
        let hasBody = request.body != nil
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: request.headers, endStream: !hasBody)))),
            promise: headersWritten)
        if let body = request.body {
            context.write(
                wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(body), endStream: true)))),
                promise: nil)
        }
        // Flushed one by one so that NIOHTTP2 sends the DATA frames in stream order;
        // `FlushCoalescingHandler` makes one socket flush of them.
        context.flush()
    }

    /// Fails the streams whose deadline has passed at `due`, then looks again at the earliest
    /// deadline left. Answered streams leave the timer as it is: when it fires early, it only
    /// moves on to the next deadline.
    private func checkDeadlines(at due: NIODeadline, context: ChannelHandlerContext) {
        deadlineCheck?.task.cancel()
        let task = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            deadlineCheck = nil
            let now = NIODeadline.now()
            var next: NIODeadline?
            for (streamID, stream) in inFlight {
                if stream.deadline <= now {
                    timedOut(streamID, context: context)
                } else if next.map({ stream.deadline < $0 }) ?? true {
                    next = stream.deadline
                }
            }
            if let next { checkDeadlines(at: next, context: context) }
        }
        deadlineCheck = (due, task)
    }

    private func timedOut(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let stream = inFlight.removeValue(forKey: streamID) else { return }
        stream.answer(.failure(APNsTransportError(.deadlineExceeded, "no answer from APNs before the deadline")))
        guard context.channel.isActive else { return }
        context.writeAndFlush(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))), promise: nil)
    }

    // MARK: Inbound

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        if let update = receiveWindow.windowUpdate(after: frame) {
            context.writeAndFlush(wrapOutboundOut(update), promise: nil)
        }
        switch frame.payload {
        case .headers(let headers):
            guard var stream = inFlight[frame.streamID] else { return }
            if stream.status == nil {
                for header in headers.headers {
                    if header.name == ":status" {
                        stream.status = Int(header.value)
                    } else if !header.name.hasPrefix(":") {
                        stream.headers.append((header.name, header.value))
                    }
                }
            }
            inFlight[frame.streamID] = stream
            if headers.endStream { complete(frame.streamID) }
        case .data(let data):
            guard var stream = inFlight[frame.streamID] else { return }
            if case .byteBuffer(var buffer) = data.data, buffer.readableBytes > 0 {
                if stream.body == nil {
                    stream.body = buffer
                } else {
                    stream.body!.writeBuffer(&buffer)
                }
                inFlight[frame.streamID] = stream
            }
            if data.endStream { complete(frame.streamID) }
        case .rstStream(let code):
            fail(frame.streamID, APNsTransportError(.streamReset, "APNs reset the stream (\(code))"))
        case .goAway(let lastStreamID, let code, let debugData):
            goAway(lastStreamID: lastStreamID, code: code, debugData: debugData, context: context)
        case .settings(.settings(let settings)):
            // NIOHTTP2Handler acknowledges SETTINGS and holds streams beyond the limit; the pool
            // needs the limit to spread requests and to know when to open another connection.
            for setting in settings where setting.parameter == .maxConcurrentStreams {
                status.announced(streamLimit: setting.value)
            }
        default:
            break  // PING and WINDOW_UPDATE are answered by NIOHTTP2Handler.
        }
    }

    private func complete(_ streamID: HTTP2StreamID) {
        guard let stream = inFlight.removeValue(forKey: streamID) else { return }
        status.answerCame()
        guard let code = stream.status else {
            stream.answer(.failure(APNsTransportError(.invalidAnswer, "the answer had no :status")))
            return
        }
        let roundTrip = Duration.nanoseconds((NIODeadline.now() - stream.written).nanoseconds)
        stream.answer(.success(APNsRawResponse(status: code, headers: stream.headers, body: stream.body, roundTrip: roundTrip)))
    }

    private func fail(_ streamID: HTTP2StreamID, _ error: any Error) {
        guard let stream = inFlight.removeValue(forKey: streamID) else { return }
        stream.answer(.failure(error))
    }

    private func failAll(_ error: any Error) {
        let streams = inFlight
        inFlight.removeAll()
        deadlineCheck?.task.cancel()
        deadlineCheck = nil
        for stream in streams.values { stream.answer(.failure(error)) }
    }

    /// APNs will take no stream above `lastStreamID`: those were not processed and may be retried
    /// elsewhere. The others finish; then the connection closes.
    private func goAway(lastStreamID: HTTP2StreamID, code: HTTP2ErrorCode, debugData: ByteBuffer?, context: ChannelHandlerContext) {
        goingAway = true
        status.retire()
        var reason = "\(code)"
        if let debugData, let json = try? JSONValue(parsing: debugData.readableBytesView), let text = json["reason"]?.stringValue {
            reason = text
        }
        failure = APNsTransportError(.notProcessed, "APNs sent GOAWAY (\(reason))")
        for streamID in inFlight.keys where streamID > lastStreamID {
            fail(streamID, APNsTransportError(.notProcessed, "APNs sent GOAWAY (\(reason)) before processing the request"))
        }
        if inFlight.isEmpty { context.close(promise: nil) }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        if goingAway, inFlight.isEmpty, context.channel.isActive { context.close(promise: nil) }
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        // Requests are written only once `ready` succeeds, so a failure here has none in flight.
        if case TLSUserEvent.handshakeCompleted(let negotiated) = event {
            if negotiated == "h2" {
                ready.succeed()
            } else {
                ready.fail(APNsTransportError(.connectFailed, "the server did not agree to HTTP/2 (ALPN: \(negotiated ?? "none"))"))
                context.close(promise: nil)
            }
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if failure == nil { failure = error }
        ready.fail(APNsTransportError(.connectFailed, "TLS with APNs failed: \(error)"))
        status.retire()
        failAll(APNsTransportError(.connectionClosed, "connection failed: \(error)"))
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        ready.fail(APNsTransportError(.connectFailed, "the server closed the connection during set-up"))
        status.retire()
        let why = failure.map { ": \($0)" } ?? ""
        failAll(APNsTransportError(.connectionClosed, "the connection closed with the request in flight\(why)"))
        context.fireChannelInactive()
    }
}

@available(*, unavailable)
extension APNsStreamsHandler: Sendable {}
