import Foundation
import LiveActivityKit
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// A request handed to a connection: header fields, body, deadline, and where its answer goes
/// (called exactly once, by the streams handler).
package struct APNsStreamRequest: Sendable {
    var headers: [APNsRequest.Header]
    var body: ByteBuffer?
    var deadline: NIODeadline
    var answer: @Sendable (Result<APNsRawResponse, any Error>) -> Void

    package init(
        headers: [APNsRequest.Header], body: ByteBuffer?, deadline: NIODeadline,
        answer: @escaping @Sendable (Result<APNsRawResponse, any Error>) -> Void
    ) {
        self.headers = headers
        self.body = body
        self.deadline = deadline
        self.answer = answer
    }
}

/// What the pool knows of a connection (`ConnectionPlan.Connection`): written by its handler on
/// the event loop and by the pool as it hands out and takes back streams; read by the pool.
package final class ConnectionStatus: Sendable {
    private let usable = Atomic<Bool>(true)
    private let answered = Atomic<Bool>(false)
    private let limit = Atomic<Int>(1)
    private let open = Atomic<Int>(0)

    package init() {}

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

/// One HTTP/2 + TLS connection to APNs, its streams run by `APNsStreamsHandler`. The pool hands a
/// connection no more streams than APNs advertises while another has room (`ConnectionPlan`);
/// what goes beyond waits in the handler until a stream closes.
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
        patience: TimeAmount, status: ConnectionStatus = ConnectionStatus()
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
                    try pipeline.addHandler(APNsStreamsHandler(status: status, ready: ready, patience: patience))
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
    func send(headers: [APNsRequest.Header], body: ByteBuffer?, deadline: NIODeadline) async throws -> APNsRawResponse {
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
