import APNs
import APNsEmulator
import AsyncHTTPClient
import Foundation
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import NIOHPACK
import NIOHTTP1
import NIOHTTP2
import NIOPosix
import NIOSSL
import Synchronization
import Testing

/// HTTP/2 keeps stream errors to their stream (RFC 9113 §5.4.2): a malformed request gets
/// RST_STREAM and the connection's other streams are answered. A connection error is answered
/// with GOAWAY and its code, and the connection ends (§5.4.1).
@Suite struct StreamErrorTests {
    static let bundle = "com.example.streams"
    static let token = String(repeating: "c3", count: 80)

    func withEmulator(_ body: @escaping @Sendable (APNsEmulator, TestSigningKey, String) async throws -> Void) async throws {
        // The full AsyncHTTPClient run (LIVERELAY_TEST_AHC_PUSHES) takes longer in a debug build.
        try await withDeadline(.seconds(120 + Self.asyncHTTPClientPushes / 50)) {
            let emulator = try await APNsEmulator.start(.init())
            let key = TestSigningKey()
            emulator.registry.register(EmulatorKey(keyID: key.signingKey.keyID, teamID: key.signingKey.teamID, publicKey: key.publicKey))
            emulator.registry.register(EmulatorToken(hex: Self.token, bundleID: Self.bundle, environment: .sandbox))
            let caFile = TestFiles.path("emulator-ca", pathExtension: "pem")
            try emulator.certificates.writeCertificateAuthority(to: caFile)
            defer { try? FileManager.default.removeItem(atPath: caFile) }
            do { try await body(emulator, key, caFile) } catch {
                await emulator.shutdown()
                throw error
            }
            await emulator.shutdown()
        }
    }

    /// A device push with one provider token per test (APNs refuses a new one within 20 minutes).
    static func push(_ providerToken: String, extra: [(String, String)] = []) -> HPACKHeaders {
        var headers = HPACKHeaders([
            (":method", "POST"), (":scheme", "https"), (":path", "/3/device/\(token)"), (":authority", "127.0.0.1"),
            ("authorization", "bearer \(providerToken)"), ("apns-push-type", "liveactivity"),
            ("apns-topic", "\(bundle).push-type.liveactivity"), ("apns-priority", "10"),
        ])
        for (name, value) in extra { headers.add(name: name, value: value) }
        return headers
    }

    static let body = ByteBuffer(string: #"{"aps":{"timestamp":1795000000,"event":"update","content-state":{"n":1}}}"#)

    /// A raw client on the sandbox's push port whose first push (stream 1) was answered, which
    /// raises the stream limit from 1; and the provider token for the rest.
    func withAuthenticatedClient(_ body: @escaping @Sendable (APNsEmulator, RawHTTP2Client, String) async throws -> Void) async throws {
        try await withEmulator { emulator, key, caFile in
            let client = try await RawHTTP2Client.connect(port: emulator.ports(.sandbox).push, caFile: caFile)
            let token = key.signingKey.makeProviderToken(issuedAt: Date())
            client.send(Self.push(token), body: Self.body, on: 1)
            try await client.waitFor { $0.status(of: 1) != nil }
            #expect(client.events.status(of: 1) == 200)
            try await body(emulator, client, token)
        }
    }

    @Test func aMalformedStreamIsResetAndItsNeighboursAreAnsweredOnTheSameConnection() async throws {
        try await withAuthenticatedClient { emulator, client, key in

            // One malformed stream among valid ones, written together: an upper-case header name
            // (RFC 9113 §8.2.1), then a body longer than its content-length (§8.1.1).
            client.send(Self.push(key), body: Self.body, on: 3)
            client.send(Self.push(key, extra: [("Apns-Collapse-Id", "x")]), body: Self.body, on: 5)
            client.send(Self.push(key), body: Self.body, on: 7)
            client.send(Self.push(key, extra: [("content-length", "3")]), body: Self.body, on: 9)
            client.send(Self.push(key), body: Self.body, on: 11)
            try await client.waitFor { events in
                [3, 7, 11].allSatisfy { events.status(of: $0) != nil } && [5, 9].allSatisfy { events.reset(of: $0) != nil }
            }
            #expect([3, 7, 11].map { client.events.status(of: $0) } == [200, 200, 200])
            #expect(client.events.reset(of: 5) == .protocolError)
            #expect(client.events.reset(of: 9) == .protocolError)
            #expect(client.events.goAway == nil)

            // The connection lives on.
            client.send(Self.push(key), body: Self.body, on: 13)
            try await client.waitFor { $0.status(of: 13) != nil }
            #expect(client.events.status(of: 13) == 200)
            #expect(client.events.closed == false)
            try await client.close()

            // Every stream is journaled, the malformed ones with what was wrong.
            #expect(emulator.journal.counts == ["Success": 5, "MalformedStream": 2])
            let malformed = emulator.journal.requests.filter { $0.streamError != nil }
            #expect(malformed.count == 2)
            #expect(malformed.contains { $0.path == "/3/device/\(Self.token)" && $0.streamError?.contains("ontent") == true })
        }
    }

    /// A client that resets its streams, as provider libraries built on AsyncHTTPClient do with
    /// requests they give up, keeps its connection: 300 pushes each reset after its head, then one
    /// answered on the same connection. (NIOHTTP2's defaults end a connection after 200 resets in
    /// 30 s: such a client lost 107-270 pushes a connection.)
    @Test func aClientResettingItsStreamsKeepsItsConnection() async throws {
        try await withAuthenticatedClient { _, client, token in
            // Each one's head sent, then given up: more resets than NIOHTTP2 allows by default.
            let streams = (1...300).map { 1 + 2 * $0 }
            for stream in streams {
                client.sendHead(Self.push(token), on: stream)
                client.reset(stream)
            }
            let last = streams.last! + 2
            client.send(Self.push(token), body: Self.body, on: last)
            try await client.waitFor { $0.status(of: last) != nil || $0.closed }
            #expect(client.events.status(of: last) == 200)
            #expect(client.events.goAway == nil && client.events.closed == false, "\(String(describing: client.events.goAway))")
            try await client.close()
        }
    }

    /// A client with a deadline gives a push up while its answer waits for the emulator's
    /// latency: the answer is dropped, and the connection and its other streams go on.
    @Test func aStreamResetWhileItsAnswerWaitsKeepsTheConnection() async throws {
        try await withAuthenticatedClient { emulator, client, token in
            emulator.latency(.sandbox).latency = try APNsLatency(parsing: "200")
            client.send(Self.push(token), body: Self.body, on: 3)
            client.send(Self.push(token), body: Self.body, on: 5)
            client.reset(3)
            try await client.waitFor { $0.status(of: 5) != nil || $0.closed }
            #expect(client.events.status(of: 5) == 200)
            #expect(client.events.status(of: 3) == nil)
            #expect(client.events.goAway == nil && client.events.closed == false, "\(String(describing: client.events.goAway))")
            try await client.close()
        }
    }

    @Test func aConnectionErrorIsAnsweredWithGoAwayAndItsCode() async throws {
        try await withEmulator { emulator, key, caFile in
            let client = try await RawHTTP2Client.connect(port: emulator.ports(.sandbox).push, caFile: caFile)
            client.send(Self.push(key.signingKey.makeProviderToken(issuedAt: Date())), body: Self.body, on: 1)
            try await client.waitFor { $0.status(of: 1) != nil }
            // A WINDOW_UPDATE of 0 on the connection is a connection error (RFC 9113 §6.9); our
            // own HTTP/2 layer would not send it, so its bytes go in beneath it.
            client.sendBytes([0, 0, 4, 0x08, 0, 0, 0, 0, 0, 0, 0, 0, 0])
            try await client.waitFor { $0.closed }
            #expect(client.events.goAway?.code == .protocolError)
            #expect(emulator.journal.counts == ["Success": 1])
        }
    }

    /// 200 in the suite (a debug build sends about 150 a second this way, and shares the
    /// machine with the other suites);
    /// `LIVERELAY_TEST_AHC_PUSHES=20000` for the full run.
    static let asyncHTTPClientPushes = ProcessInfo.processInfo.environment["LIVERELAY_TEST_AHC_PUSHES"].flatMap(Int.init) ?? 200

    /// The provider clients people use are built on AsyncHTTPClient: many pushes at once from the
    /// first one on (the emulator starts at one stream per connection, as APNs does).
    @Test func asyncHTTPClientSendsThousandsOfPushesWithAHundredInFlightWithoutAFailure() async throws {
        try await withEmulator { emulator, key, caFile in
            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(caFile)
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
            configuration.httpVersion = .automatic
            // Its own thread: on the shared event loops a debug build of this client starves the
            // other suites' connections.
            let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
            let client = HTTPClient(eventLoopGroupProvider: .shared(group), configuration: configuration)
            let total = Self.asyncHTTPClientPushes
            let inFlight = 100
            let providerToken = key.signingKey.makeProviderToken(issuedAt: Date())
            let body = Array(Self.body.readableBytesView)
            let port = emulator.ports(.sandbox).push
            var failures = 0
            do {
                failures = try await withThrowingTaskGroup(of: Int.self) { workers in
                    for worker in 0..<inFlight {
                        workers.addTask {
                            var failed = 0
                            for _ in stride(from: worker, to: total, by: inFlight) {
                                var request = HTTPClientRequest(url: "https://127.0.0.1:\(port)/3/device/\(Self.token)")
                                request.method = .POST
                                request.headers.add(name: "authorization", value: "bearer \(providerToken)")
                                request.headers.add(name: "apns-push-type", value: "liveactivity")
                                request.headers.add(name: "apns-topic", value: "\(Self.bundle).push-type.liveactivity")
                                request.body = .bytes(body)
                                do {
                                    let response = try await client.execute(request, timeout: .seconds(30))
                                    if response.status != .ok { failed += 1 }
                                    _ = try await response.body.collect(upTo: 4096)
                                } catch {
                                    failed += 1
                                }
                            }
                            return failed
                        }
                    }
                    return try await workers.reduce(0, +)
                }
            } catch {
                try await client.shutdown()
                try await group.shutdownGracefully()
                throw error
            }
            try await client.shutdown()
            try await group.shutdownGracefully()
            #expect(failures == 0)
            #expect(emulator.journal.counts == ["Success": total])
        }
    }
}

/// An HTTP/2 client that writes frames as given (no header validation), for sending what real
/// clients must not, and records what comes back per stream.
final class RawHTTP2Client: Sendable {
    struct Events: Sendable {
        var headers: [Int: HPACKHeaders] = [:]
        var resets: [Int: HTTP2ErrorCode] = [:]
        var goAway: (lastStream: Int, code: HTTP2ErrorCode)?
        var closed = false

        func status(of stream: Int) -> Int? { headers[stream]?.first(name: ":status").flatMap(Int.init) }
        func reset(of stream: Int) -> HTTP2ErrorCode? { resets[stream] }
    }

    private let channel: any Channel
    private let recorder: Recorder
    private let injector: ByteInjector

    private init(channel: any Channel, recorder: Recorder, injector: ByteInjector) {
        self.channel = channel
        self.recorder = recorder
        self.injector = injector
    }

    var events: Events { recorder.events.withLock { $0 } }

    static func connect(port: Int, caFile: String) async throws -> RawHTTP2Client {
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.trustRoots = .file(caFile)
        tls.applicationProtocols = ["h2"]
        let context = try NIOSSLContext(configuration: tls)
        let recorder = Recorder()
        let injector = ByteInjector()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let pipeline = channel.pipeline.syncOperations
                    try pipeline.addHandler(NIOSSLClientHandler(context: context, serverHostname: nil))
                    try pipeline.addHandler(injector)
                    try pipeline.addHandler(NIOHTTP2Handler(mode: .client, headerBlockValidation: .disabled, contentLengthValidation: .disabled))
                    try pipeline.addHandler(recorder)
                }
            }
            .connect(host: "127.0.0.1", port: port)
            .get()
        return RawHTTP2Client(channel: channel, recorder: recorder, injector: injector)
    }

    func send(_ headers: HPACKHeaders, body: ByteBuffer, on stream: Int) {
        let id = HTTP2StreamID(stream)
        channel.write(HTTP2Frame(streamID: id, payload: .headers(.init(headers: headers, endStream: false))), promise: nil)
        channel.writeAndFlush(HTTP2Frame(streamID: id, payload: .data(.init(data: .byteBuffer(body), endStream: true))), promise: nil)
    }

    /// Only the head of a request, its body to come.
    func sendHead(_ headers: HPACKHeaders, on stream: Int) {
        channel.writeAndFlush(HTTP2Frame(streamID: HTTP2StreamID(stream), payload: .headers(.init(headers: headers, endStream: false))), promise: nil)
    }

    /// Resets `stream` with `code`, as a client does that gives up a request.
    func reset(_ stream: Int, _ code: HTTP2ErrorCode = .cancel) {
        channel.writeAndFlush(HTTP2Frame(streamID: HTTP2StreamID(stream), payload: .rstStream(code)), promise: nil)
    }

    /// Bytes written beneath the HTTP/2 layer, as they are.
    func sendBytes(_ bytes: [UInt8]) {
        let injector = injector
        channel.eventLoop.execute { injector.write(bytes) }
    }

    func waitFor(_ condition: @Sendable (Events) -> Bool) async throws {
        try await eventually { condition(self.events) }
    }

    func close() async throws {
        try await channel.close()
    }

    /// Sits between TLS and HTTP/2, passing everything through, and writes raw bytes on request.
    private final class ByteInjector: ChannelDuplexHandler, @unchecked Sendable {
        typealias InboundIn = ByteBuffer
        typealias OutboundIn = ByteBuffer
        /// Touched on the channel's event loop only.
        private var context: ChannelHandlerContext?

        func handlerAdded(context: ChannelHandlerContext) { self.context = context }
        func handlerRemoved(context: ChannelHandlerContext) { self.context = nil }

        func write(_ bytes: [UInt8]) {
            context?.writeAndFlush(NIOAny(ByteBuffer(bytes: bytes)), promise: nil)
        }
    }

    private final class Recorder: ChannelInboundHandler, Sendable {
        typealias InboundIn = HTTP2Frame
        let events = Mutex(Events())

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let frame = unwrapInboundIn(data)
            let stream = Int(Int32(frame.streamID))
            events.withLock { events in
                switch frame.payload {
                case .headers(let headers): events.headers[stream] = headers.headers
                case .rstStream(let code): events.resets[stream] = code
                case .goAway(let last, let code, _): events.goAway = (Int(Int32(last)), code)
                default: break
                }
            }
        }

        func channelInactive(context: ChannelHandlerContext) {
            events.withLock { $0.closed = true }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {}
    }
}
