import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The load generator of `bench server`'s latency run: HTTP/1.1 POSTs on kept-alive connections,
/// one request at a time on each, a connection opened whenever none is free. It does nothing
/// else, because it shares the machine with what it measures: AsyncHTTPClient spent 0.3 ms of CPU
/// a request (tracing, redirects, its pool's tasks), a third of a core at 1,000 requests/s.
final class BenchLoadClient: Sendable {
    private let host: String
    private let port: Int
    private let idle = Mutex<[any Channel]>([])

    /// `baseURL` as `http://host:port`.
    init(baseURL: String) throws {
        let address = baseURL.replacing("http://", with: "").split(separator: ":")
        guard address.count == 2, let port = Int(address[1]) else { throw BenchLoadClientError("not an http://host:port address: \(baseURL)") }
        (host, self.port) = (String(address[0]), port)
    }

    /// The answer's status, or an error when the connection failed.
    func post(_ path: String, bearer: String, body: [UInt8]) async throws -> Int {
        let channel: any Channel
        if let free = idle.withLock({ $0.popLast() }) { channel = free } else { channel = try await connect() }
        let answer = channel.eventLoop.makePromise(of: Int.self)
        var head = HTTPRequestHead(version: .http1_1, method: .POST, uri: path)
        head.headers.add(name: "host", value: "\(host):\(port)")
        head.headers.add(name: "authorization", value: "Bearer \(bearer)")
        head.headers.add(name: "content-type", value: "application/json")
        head.headers.add(name: "content-length", value: String(body.count))
        let buffer = channel.allocator.buffer(bytes: body)
        channel.eventLoop.execute {
            do {
                try channel.pipeline.syncOperations.handler(type: AnswerReader.self).expect(answer)
                channel.write(HTTPClientRequestPart.head(head), promise: nil)
                channel.write(HTTPClientRequestPart.body(.byteBuffer(buffer)), promise: nil)
                channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
            } catch {
                answer.fail(error)
            }
        }
        do {
            let status = try await answer.futureResult.get()
            idle.withLock { $0.append(channel) }
            return status
        } catch {
            try? await channel.close()
            throw error
        }
    }

    func close() async {
        for channel in idle.withLock({ channels in defer { channels = [] }; return channels }) { try? await channel.close() }
    }

    private func connect() async throws -> any Channel {
        try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(AnswerReader())
                }
            }
            .connect(host: host, port: port).get()
    }
}

/// Completes each request's promise with its answer's status once the whole answer is read.
private final class AnswerReader: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private var waiting: EventLoopPromise<Int>?
    private var status = 0

    func expect(_ promise: EventLoopPromise<Int>) { waiting = promise }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): status = Int(head.status.code)
        case .body: break
        case .end:
            waiting?.succeed(status)
            waiting = nil
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        waiting?.fail(error)
        waiting = nil
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        waiting?.fail(BenchLoadClientError("the server closed the connection"))
        waiting = nil
    }
}

struct BenchLoadClientError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
