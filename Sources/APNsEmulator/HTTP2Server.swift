import APNs
import Foundation
import Logging
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization

/// A request as the server received it.
public struct ReceivedRequest: Sendable {
    public var connectionID: Int
    public var method: String
    public var path: String
    public var authority: String?
    /// Regular headers in arrival order, names lowercase.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

extension ReceivedRequest {
    /// The app an APNs request is for: the topic of a device push without its push-type suffix,
    /// or the bundle id in a broadcast or channel-management path.
    var bundleID: String? {
        if path.hasPrefix("/3/device/") {
            guard let topic = header("apns-topic") else { return nil }
            return topic.range(of: ".push-type.").map { String(topic[..<$0.lowerBound]) } ?? topic
        }
        let parts = path.split(separator: "/")
        // /4/broadcasts/apps/<bundle>, /1/apps/<bundle>/channels
        if parts.count >= 4, parts[0] == "4", parts[2] == "apps" { return String(parts[3]) }
        if parts.count >= 3, parts[0] == "1", parts[1] == "apps" { return String(parts[2]) }
        return nil
    }

    /// The token of a device push, in lowercase.
    var deviceToken: String? {
        path.hasPrefix("/3/device/") ? String(path.dropFirst("/3/device/".count)).lowercased() : nil
    }
}

extension ServerAnswer {
    /// Whether the stream counts as processed (a GOAWAY names it as such): all but a GOAWAY
    /// without an answer of its own, and a dropped connection.
    var processes: Bool {
        switch self {
        case .respond, .noAnswer, .resetStream: true
        case .delayed(_, let answer), .frozen(_, let answer): answer.processes
        case .goAway(let answer, _): answer != nil
        case .closeConnection: false
        }
    }

    /// The answer as APNs at a distance gives it: `delay` later (what never answers stays so).
    func after(_ delay: TimeAmount) -> ServerAnswer {
        switch self {
        case .noAnswer, .closeConnection: self
        default: .delayed(delay, self)
        }
    }
}

/// What the server does with one stream.
public indirect enum ServerAnswer: Sendable {
    /// HEADERS (with END_STREAM when there is no body), then DATA if there is a body.
    case respond(status: Int, headers: [(name: String, value: String)], body: [UInt8]?)
    /// Never answer: the stream stays open until the client gives up.
    case noAnswer
    /// RST_STREAM with the given error code.
    case resetStream(HTTP2ErrorCode)
    /// The same answer, written after a delay.
    case delayed(TimeAmount, ServerAnswer)
    /// The connection freezes for this long: this answer and everything else it would write
    /// meanwhile are held (`OutputFreeze`), then written together, as when a path congests or a
    /// server hangs and recovers.
    case frozen(TimeAmount, ServerAnswer)
    /// Write `answer` (if any; the stream then counts as processed), then GOAWAY naming the last
    /// processed stream, with `debugData`, and close the connection once the answers of processed
    /// streams still to come are written. Later streams stay unanswered.
    case goAway(answer: ServerAnswer?, debugData: [UInt8])
    /// Close the connection at once, answering nothing.
    case closeConnection
}

/// When a connection without requests is closed, and what its GOAWAY says.
public struct IdlePolicy: Sendable {
    public var timeout: TimeAmount
    public var debugData: [UInt8]

    public init(timeout: TimeAmount, debugData: [UInt8]) {
        self.timeout = timeout
        self.debugData = debugData
    }
}

/// Decides the answer to each request. Called on the connection's event loop: keep it fast.
public protocol RequestResponder: Sendable {
    /// What the responder remembers about one connection (APNs pins a team per connection and
    /// raises the stream limit after the first authenticated push).
    associatedtype Connection: ConnectionState = StreamLimit

    func makeConnection(id: Int) -> Connection
    func answer(_ request: ReceivedRequest, connection: inout Connection) -> ServerAnswer
    /// A stream HTTP/2 itself refused (RST_STREAM; RFC 9113 §8.1.1): upper-case header names,
    /// a missing pseudo-header, a body longer than its content-length. `request` holds what had
    /// arrived of it (nothing when its HEADERS were refused). The connection and its other
    /// streams go on.
    func malformed(_ request: ReceivedRequest, error: any Error, connection: inout Connection)
}

extension RequestResponder {
    public func malformed(_ request: ReceivedRequest, error: any Error, connection: inout Connection) {}
}

/// Per-connection state the server itself reads after every answer.
public protocol ConnectionState {
    /// `SETTINGS_MAX_CONCURRENT_STREAMS` this connection should advertise now; a change is sent
    /// to the client in a SETTINGS frame.
    var maxConcurrentStreams: Int { get }
}

/// A connection state that is only a fixed stream limit.
public struct StreamLimit: ConnectionState {
    public var maxConcurrentStreams: Int
    public init(_ maxConcurrentStreams: Int) { self.maxConcurrentStreams = maxConcurrentStreams }
}

extension RequestResponder where Connection == StreamLimit {
    public func makeConnection(id: Int) -> StreamLimit { StreamLimit(1000) }
}

/// An HTTP/2 server over TLS on one port. It speaks HTTP/2 whatever ALPN says, because APNs
/// does and some clients offer no ALPN at all.
public final class HTTP2TLSServer: Sendable {
    public let host: String
    public let port: Int
    private let channel: any Channel

    private init(host: String, port: Int, channel: any Channel) {
        self.host = host
        self.port = port
        self.channel = channel
    }

    /// Listens on `host:port` (port 0 picks a free one; read `port` afterwards). Every answer is
    /// written after `latency`'s delay at the time, each stream's on its own.
    public static func start(
        host: String = "127.0.0.1", port: Int = 0, certificates: EmulatorCertificates,
        responder: some RequestResponder, idle: IdlePolicy? = nil, latency: LatencySetting? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger = APNsEmulator.Configuration.defaultLogger
    ) async throws -> HTTP2TLSServer {
        let sslContext = try NIOSSLContext(configuration: certificates.serverTLSConfiguration())
        let connectionIDs = Atomic<Int>(0)
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(ChannelOptions.backlog, value: 256)
            .serverChannelOption(ChannelOptions.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(ChannelOptions.socketOption(.tcp_nodelay), value: 1)
            .childChannelInitializer { channel in
                let connectionID = connectionIDs.wrappingAdd(1, ordering: .relaxed).newValue
                let connection = responder.makeConnection(id: connectionID)
                return channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    let freeze = OutputFreeze()
                    try pipeline.addHandler(NIOSSLServerHandler(context: sslContext))
                    try pipeline.addHandler(freeze)
                    try pipeline.addHandler(
                        NIOHTTP2Handler(
                            mode: .server,
                            initialSettings: [
                                HTTP2Setting(parameter: .maxConcurrentStreams, value: connection.maxConcurrentStreams),
                                HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
                                HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                            ]))
                    try pipeline.addHandler(
                        ServerStreamsHandler(
                            connectionID: connectionID, responder: responder, connection: connection, freeze: freeze, idle: idle,
                            latency: latency, logger: logger))
                }
            }
            .bind(host: host, port: port)
            .get()
        guard let boundPort = channel.localAddress?.port else {
            throw HTTP2ServerError("the server socket has no port")
        }
        return HTTP2TLSServer(host: host, port: boundPort, channel: channel)
    }

    /// Stops listening. Open connections are closed with the event loop group.
    public func shutdown() async {
        try? await channel.close()
    }
}

public struct HTTP2ServerError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}

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
        guard waiting[millisecond] == nil else {
            waiting[millisecond]!.append((streamID, answer))
            return
        }
        waiting[millisecond] = [(streamID, answer)]
        let handler = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        context.eventLoop.assumeIsolated().scheduleTask(deadline: .uptimeNanoseconds(millisecond * 1_000_000)) {
            let (handler, context) = handler.value
            for (streamID, answer) in handler.waiting.removeValue(forKey: millisecond) ?? [] {
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

/// Answers every request as APNs answers a valid one: 200, HEADERS only, echoing `apns-id`
/// (device pushes) or `apns-request-id` (broadcasts), with a fresh `apns-unique-id`. No checks:
/// the reference endpoint of the client benchmark.
public struct AcceptAllResponder: RequestResponder {
    public init() {}

    public func answer(_ request: ReceivedRequest, connection: inout StreamLimit) -> ServerAnswer {
        answer(request)
    }

    public func answer(_ request: ReceivedRequest) -> ServerAnswer {
        let idHeader = request.path.hasPrefix("/4/") ? "apns-request-id" : "apns-id"
        let id = request.header(idHeader) ?? GeneratedUUID.string()
        return .respond(status: 200, headers: [(idHeader, id), ("apns-unique-id", GeneratedUUID.string())], body: nil)
    }
}

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
