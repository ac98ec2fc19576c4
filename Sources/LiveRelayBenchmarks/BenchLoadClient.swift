import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// The load generator of `bench server`'s latency run: HTTP/1.1 POSTs on kept-alive connections,
/// one request at a time on each, at most `connections` of them (as many as AsyncHTTPClient was
/// allowed; a request waits for one when all are busy, and its wait counts in its latency). It
/// does nothing else, because it shares the machine with what it measures: AsyncHTTPClient spent
/// 0.3 ms of CPU a request (tracing, redirects, its pool's tasks), a third of a core at 1,000
/// requests/s.
final class BenchLoadClient: Sendable {
    private let host: String
    private let port: Int
    private let connections: Int
    private let pool = Mutex(Pool())

    private struct Pool {
        var idle: [any Channel] = []
        var open = 0
        var waiting: [CheckedContinuation<Lease, any Error>] = []
    }

    private enum Lease {
        case channel(any Channel)
        case connect
    }

    /// `baseURL` as `http://host:port`.
    init(baseURL: String, connections: Int = 64) throws {
        let address = baseURL.replacing("http://", with: "").split(separator: ":")
        guard address.count == 2, let port = Int(address[1]) else { throw BenchLoadClientError("not an http://host:port address: \(baseURL)") }
        (host, self.port, self.connections) = (String(address[0]), port, connections)
    }

    /// The answer's status, or an error when the connection failed.
    func post(_ path: String, bearer: String, body: [UInt8]) async throws -> Int {
        let channel: any Channel
        switch try await lease() {
        case .channel(let free): channel = free
        case .connect:
            do { channel = try await connect() } catch {
                giveBack(nil)
                throw error
            }
        }
        let answer = channel.eventLoop.makePromise(of: Int.self)
        let head = HTTPRequestHead(
            version: .http1_1, method: .POST, uri: path,
            headers: [
                "host": "\(host):\(port)", "authorization": "Bearer \(bearer)", "content-type": "application/json",
                "content-length": String(body.count),
            ])
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
            giveBack(channel)
            return status
        } catch {
            try? await channel.close()
            giveBack(nil)
            throw error
        }
    }

    func close() async {
        for channel in pool.withLock({ pool in defer { pool.idle = [] }; return pool.idle }) { try? await channel.close() }
    }

    /// A free connection, or the right to open one, or a wait for either.
    private func lease() async throws -> Lease {
        try await withCheckedThrowingContinuation { waiter in
            let now: Lease? = pool.withLock { pool in
                if let free = pool.idle.popLast() { return .channel(free) }
                if pool.open < connections {
                    pool.open += 1
                    return .connect
                }
                pool.waiting.append(waiter)
                return nil
            }
            if let now { waiter.resume(returning: now) }
        }
    }

    /// A connection done with its request, or (nil) one that failed or never opened: the next
    /// waiter takes it, or the right to open another.
    private func giveBack(_ channel: (any Channel)?) {
        let (waiter, lease): (CheckedContinuation<Lease, any Error>?, Lease) = pool.withLock { pool in
            let waiter = pool.waiting.isEmpty ? nil : pool.waiting.removeFirst()
            if let channel {
                if waiter == nil { pool.idle.append(channel) }
                return (waiter, .channel(channel))
            }
            if waiter == nil { pool.open -= 1 }
            return (waiter, .connect)
        }
        waiter?.resume(returning: lease)
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
