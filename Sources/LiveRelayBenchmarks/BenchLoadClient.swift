import NIOCore
import NIOHTTP1
import NIOPosix

/// The load generator of `bench server`'s latency run: open-loop HTTP/1.1 POSTs on kept-alive
/// connections, one request at a time on each, at most `connectionsPerServer` to each server (a
/// request waits for one when all are busy, and its wait counts in its latency).
///
/// It runs on one event loop, which owns its connections: a timer there writes each request when
/// it is due, and the request's latency is taken where its answer is read. No task and no thread
/// hop per request, because it shares the machine with what it measures: a task and a timer per
/// request cost it about 200 µs of CPU a request, a fifth of a core at 1,000 requests/s, and it
/// was late by up to 2.6 ms at the 99th percentile (AsyncHTTPClient, before that, 300 µs).
final class BenchLoadClient: Sendable {
    /// What request `index` posts: prepared before the run, so that making it costs nothing then.
    struct Request: Sendable {
        var server: Int
        var path: String
        var bearer: String
        var body: [UInt8]
    }

    /// One answered (or failed) request: seconds from its due time to its answer, and how late the
    /// generator itself wrote it; `status` 0 when no answer came.
    struct Outcome: Sendable {
        var latency: Double
        var lag: Double
        var status: Int
    }

    private let servers: [(host: String, port: Int)]
    private let connectionsPerServer: Int
    private let loop: any EventLoop

    /// `baseURLs` as `http://host:port`.
    init(baseURLs: [String], connectionsPerServer: Int = 64, loop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()) throws {
        servers = try baseURLs.map { baseURL in
            let address = baseURL.replacing("http://", with: "").split(separator: ":")
            guard address.count == 2, let port = Int(address[1]) else { throw BenchLoadClientError("not an http://host:port address: \(baseURL)") }
            return (String(address[0]), port)
        }
        self.connectionsPerServer = connectionsPerServer
        self.loop = loop
    }

    /// Posts `requests[i]` at `i / rate` seconds from now, each answer awaited before its connection
    /// takes another; returns every request's outcome, in order, once all are answered.
    func run(_ requests: [Request], rate: Int) async throws -> (outcomes: [Outcome], seconds: Double) {
        let run = try await loop.submit {
            OpenLoop(
                requests: requests, interval: .nanoseconds(Int64(1_000_000_000 / rate)), servers: self.servers, limit: self.connectionsPerServer,
                loop: self.loop)
        }.get()
        return try await loop.flatSubmit { run.start() }.get()
    }
}

/// The run's state, touched only on its event loop.
private final class OpenLoop: @unchecked Sendable {
    private let requests: [BenchLoadClient.Request]
    private let interval: TimeAmount
    private let servers: [(host: String, port: Int)]
    private let limit: Int
    private let loop: any EventLoop
    private let done: EventLoopPromise<(outcomes: [BenchLoadClient.Outcome], seconds: Double)>

    private var startedAt = NIODeadline.now()
    private var next = 0
    private var answered = 0
    private var outcomes: [BenchLoadClient.Outcome]
    private var idle: [[any Channel]]
    private var open: [Int]
    /// Requests due but waiting for a connection to their server, oldest first.
    private var waiting: [[Int]]

    init(requests: [BenchLoadClient.Request], interval: TimeAmount, servers: [(host: String, port: Int)], limit: Int, loop: any EventLoop) {
        self.requests = requests
        self.interval = interval
        self.servers = servers
        self.limit = limit
        self.loop = loop
        done = loop.makePromise()
        outcomes = Array(repeating: .init(latency: 0, lag: 0, status: 0), count: requests.count)
        idle = Array(repeating: [], count: servers.count)
        open = Array(repeating: 0, count: servers.count)
        waiting = Array(repeating: [], count: servers.count)
    }

    func start() -> EventLoopFuture<(outcomes: [BenchLoadClient.Outcome], seconds: Double)> {
        startedAt = .now()
        if requests.isEmpty { done.succeed(([], 0)) } else { sendDue() }
        return done.futureResult
    }

    private func due(_ index: Int) -> NIODeadline { startedAt + interval * Int64(index) }

    /// Writes every request due by now, then sleeps until the next one is.
    private func sendDue() {
        let now = NIODeadline.now()
        while next < requests.count, due(next) <= now {
            send(next)
            next += 1
        }
        if next < requests.count {
            loop.scheduleTask(deadline: due(next)) { self.sendDue() }
        }
    }

    private func send(_ index: Int) {
        let server = requests[index].server
        // A connection the server closed while it rested is dropped here.
        while let channel = idle[server].last, !channel.isActive {
            idle[server].removeLast()
            open[server] -= 1
        }
        if let channel = idle[server].popLast() {
            write(index, on: channel)
        } else {
            waiting[server].append(index)
            connectForWaiting(server)
        }
    }

    /// Opens connections for the requests waiting for one, within the limit.
    private func connectForWaiting(_ server: Int) {
        while open[server] < min(limit, waiting[server].count + busy(server)) { connect(server) }
    }

    /// Connections of `server` open or opening and not resting.
    private func busy(_ server: Int) -> Int { open[server] - idle[server].count }

    private func write(_ index: Int, on channel: any Channel) {
        let request = requests[index]
        let (host, port) = servers[request.server]
        outcomes[index].lag = Double((NIODeadline.now() - due(index)).nanoseconds) / 1e9
        let head = HTTPRequestHead(
            version: .http1_1, method: .POST, uri: request.path,
            headers: [
                "host": "\(host):\(port)", "authorization": "Bearer \(request.bearer)", "content-type": "application/json",
                "content-length": String(request.body.count),
            ])
        do {
            try channel.pipeline.syncOperations.handler(type: AnswerReader.self).expect(index)
        } catch {
            channel.close(promise: nil)
            answer(index, status: 0, channel: nil, server: request.server)
            return
        }
        channel.write(HTTPClientRequestPart.head(head), promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(channel.allocator.buffer(bytes: request.body))), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
    }

    private func connect(_ server: Int) {
        open[server] += 1
        let (host, port) = servers[server]
        ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    try channel.pipeline.syncOperations.addHandler(
                        AnswerReader { index, status, usable in
                            self.answer(index, status: status, channel: usable ? channel : nil, server: server)
                        })
                }
            }
            .connect(host: host, port: port)
            .whenComplete { result in
                switch result {
                case .success(let channel): self.free(channel, server: server)
                case .failure:
                    self.open[server] -= 1
                    // The oldest waiting request fails, as it would on a connection that broke
                    // under it; the others try again (a server that is gone fails them all).
                    if !self.waiting[server].isEmpty { self.finish(self.waiting[server].removeFirst(), status: 0) }
                    self.connectForWaiting(server)
                }
            }
    }

    /// A request's answer (or its failure, `channel` nil): its connection takes the next waiting
    /// request of its server, or rests.
    private func answer(_ index: Int, status: Int, channel: (any Channel)?, server: Int) {
        finish(index, status: status)
        if let channel {
            free(channel, server: server)
        } else {
            open[server] -= 1
            connectForWaiting(server)
        }
    }

    private func free(_ channel: any Channel, server: Int) {
        if answered == requests.count {
            // One that connected for a request another connection took, after the last answer.
            channel.close(promise: nil)
        } else if waiting[server].isEmpty {
            idle[server].append(channel)
        } else {
            write(waiting[server].removeFirst(), on: channel)
        }
    }

    private func finish(_ index: Int, status: Int) {
        outcomes[index].latency = Double((NIODeadline.now() - due(index)).nanoseconds) / 1e9
        outcomes[index].status = status
        answered += 1
        guard answered == requests.count else { return }
        let seconds = Double((NIODeadline.now() - startedAt).nanoseconds) / 1e9
        for channel in idle.joined() { channel.close(promise: nil) }
        done.succeed((outcomes, seconds))
    }
}

/// Reports each request's status once its whole answer is read; a connection that fails or closes
/// under a request reports it with status 0, and is not used again.
private final class AnswerReader: ChannelInboundHandler {
    typealias InboundIn = HTTPClientResponsePart

    private let report: (_ index: Int, _ status: Int, _ usable: Bool) -> Void
    private var current: Int?
    private var status = 0

    init(report: @escaping (_ index: Int, _ status: Int, _ usable: Bool) -> Void) {
        self.report = report
    }

    func expect(_ index: Int) { current = index }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head): status = Int(head.status.code)
        case .body: break
        case .end:
            guard let index = current else { return }
            current = nil
            report(index, status, true)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
        fail()
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail()
    }

    private func fail() {
        guard let index = current else { return }
        current = nil
        report(index, 0, false)
    }
}

struct BenchLoadClientError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
