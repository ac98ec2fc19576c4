import Foundation
import LiveRelay
import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A webhook receiver on loopback for `bench server --webhooks`: HTTP/1.1 with keep-alive, every
/// post's signature checked with the endpoint's secret, answered `204`, counted.
final class BenchWebhookReceiver: Sendable {
    struct Counts: Sendable {
        var verified = 0
        var refused = 0
        /// Event ids seen, to count the repeated ones.
        var ids = Set<String>()
        var repeated = 0
        var lastAt = ContinuousClock.now
    }

    let counts = Mutex(Counts())
    let secret = Mutex<WebhookSecret?>(nil)
    private let channel: any Channel

    var port: Int { channel.localAddress?.port ?? 0 }

    private init(channel: any Channel) {
        self.channel = channel
    }

    static func start() async throws -> BenchWebhookReceiver {
        let box = Box()
        let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                channel.pipeline.configureHTTPServerPipeline().flatMap { channel.pipeline.addHandler(Handler(box: box)) }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        let receiver = BenchWebhookReceiver(channel: channel)
        box.receiver.withLock { $0 = receiver }
        return receiver
    }

    func stop() async { try? await channel.close() }

    /// The handler finds its receiver through this (made after the channel is bound).
    final class Box: Sendable {
        let receiver = Mutex<BenchWebhookReceiver?>(nil)
    }

    /// One post: its head, then its body, then the answer.
    final class Handler: ChannelInboundHandler, @unchecked Sendable {
        typealias InboundIn = HTTPServerRequestPart
        typealias OutboundOut = HTTPServerResponsePart
        let box: Box
        var head: HTTPRequestHead?
        var body = ByteBuffer()

        init(box: Box) { self.box = box }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            switch unwrapInboundIn(data) {
            case .head(let head):
                self.head = head
                body.clear()
            case .body(var part):
                body.writeBuffer(&part)
            case .end:
                guard let head, let receiver = box.receiver.withLock({ $0 }) else { return }
                let id = head.headers.first(name: "webhook-id") ?? ""
                let timestamp = head.headers.first(name: "webhook-timestamp").flatMap { Int64($0) } ?? 0
                let signature = head.headers.first(name: "webhook-signature") ?? ""
                let expected = receiver.secret.withLock { $0 }?.signature(id: id, timestamp: timestamp, body: Array(body.readableBytesView))
                let verified = expected != nil && expected == signature
                receiver.counts.withLock { counts in
                    if verified { counts.verified += 1 } else { counts.refused += 1 }
                    if !counts.ids.insert(id).inserted { counts.repeated += 1 }
                    counts.lastAt = .now
                }
                var headers = HTTPHeaders()
                headers.add(name: "content-length", value: "0")
                let response = HTTPResponseHead(version: head.version, status: verified ? .noContent : .unauthorized, headers: headers)
                context.write(wrapOutboundOut(.head(response)), promise: nil)
                context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            }
        }
    }
}
