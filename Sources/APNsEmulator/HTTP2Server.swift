import APNs
import Foundation
import LiveActivityKit
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

    /// What a client may do before NIOHTTP2's denial-of-service heuristics end its connection. By
    /// default 200 stream resets or stream errors in 30 s, and 200 "glitches" over a connection's
    /// life, end it: a provider built on AsyncHTTPClient, which resets the streams whose answers
    /// it does not read, reached them within seconds and lost 107-270 pushes a connection, while
    /// Apple's APNs serves such libraries at volume. Here a client may reset or err on up to
    /// 100,000 streams a second, more than any client sends (ours: 41,500 pushes a second on one
    /// connection, measured on 2 cores), and glitches never end a connection.
    static let clientTolerance: NIOHTTP2Handler.Configuration = {
        var configuration = NIOHTTP2Handler.Configuration()
        configuration.connection.maximumConnectionGlitches = Int(Int32.max)
        configuration.connection.maximumRecentlyResetStreams = 1_000
        configuration.stream.streamResetFrameRateLimit.maximumCount = 100_000
        configuration.stream.streamResetFrameRateLimit.windowLength = .seconds(1)
        configuration.stream.streamErrorRateLimit.maximumCount = 100_000
        configuration.stream.streamErrorRateLimit.windowLength = .seconds(1)
        return configuration
    }()

    /// Listens on `host:port` (port 0 picks a free one; read `port` afterwards). Every answer is
    /// written after `latency`'s delay at the time, each stream's on its own.
    public static func start(
        host: String = "127.0.0.1", port: Int = 0, certificates: EmulatorCertificates,
        responder: some RequestResponder, idle: IdlePolicy? = nil, latency: LatencySetting? = nil,
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton, logger: Logger = APNsEmulator.Configuration.defaultLogger
    ) async throws -> HTTP2TLSServer {
        let sslContext = try NIOSSLContext(configuration: certificates.serverTLSConfiguration())
        let connectionIDs = Atomic<Int>(0)
        // An IP is bound as it is, a name resolved on NIO's thread pool: `bind(host:)` asks the
        // system's resolver on the caller's thread, a cooperative one, even for "127.0.0.1".
        let address =
            if let literal = try? SocketAddress(ipAddress: host, port: port) { literal } else {
                try await NIOThreadPool.singleton.runIfActive { try SocketAddress.makeAddressResolvingHost(host, port: port) }
            }
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
                    var settings = HTTP2TLSServer.clientTolerance
                    settings.connection.initialSettings = [
                        HTTP2Setting(parameter: .maxConcurrentStreams, value: connection.maxConcurrentStreams),
                        HTTP2Setting(parameter: .maxHeaderListSize, value: HPACKDecoder.defaultMaxHeaderListSize),
                        HTTP2Setting(parameter: .initialWindowSize, value: 1 << 20),
                    ]
                    try pipeline.addHandler(
                        NIOHTTP2Handler(mode: .server, connectionConfiguration: settings.connection, streamConfiguration: settings.stream))
                    try pipeline.addHandler(
                        ServerStreamsHandler(
                            connectionID: connectionID, responder: responder, connection: connection, freeze: freeze, idle: idle,
                            latency: latency, logger: logger))
                }
            }
            .bind(to: address)
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
