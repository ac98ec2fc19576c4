import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// The connections to one endpoint: opened as the load needs them (`ConnectionPlan`), each given no
/// more streams than APNs announces while another has room, and forgotten once they fail or APNs
/// retires them.
final class ConnectionPool: Sendable {
    private enum Link {
        case connecting(EventLoopFuture<APNsConnection>)
        case ready(APNsConnection)
    }

    private struct Entry {
        var link: Link
        let status: ConnectionStatus
    }

    private struct State {
        var entries: [Entry] = []
        var isShutDown = false
    }

    let endpoint: APNsEndpoint
    let group: any EventLoopGroup
    let plan: ConnectionPlan
    /// `APNsClient.Configuration.connectionPatience`.
    let patience: TimeAmount
    private let sslContext: NIOSSLContext
    private let state = Mutex(State())

    init(endpoint: APNsEndpoint, connections: ClosedRange<Int>, patience: TimeAmount, group: any EventLoopGroup) throws {
        self.endpoint = endpoint
        self.group = group
        self.patience = patience
        self.plan = ConnectionPlan(connections: max(1, connections.lowerBound)...max(1, connections.upperBound))
        var tls = TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.applicationProtocols = ["h2"]
        if case .caFile(let path) = endpoint.trustRoots {
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw APNsConfigurationError(field: "ca-file", message: "cannot be read at \(path)")
            }
            tls.trustRoots = .file(path)
        }
        do {
            sslContext = try NIOSSLContext(configuration: tls)
        } catch {
            throw APNsConfigurationError(field: "ca-file", message: "is not a usable PEM CA certificate: \(error)")
        }
    }

    /// Connections open or opening now.
    var count: Int {
        state.withLock { state in
            state.entries.count { entry in
                if case .ready(let connection) = entry.link { return connection.isUsable }
                return true
            }
        }
    }

    /// Sends one request on the connection the plan chooses, counting its stream there until the
    /// answer (or the failure) comes.
    func send(headers: [APNsRequest.Header], body: ByteBuffer?, deadline: NIODeadline) async throws -> APNsRawResponse {
        let connection = try await connection(deadline: deadline)
        defer { connection.status.streamClosed() }
        return try await connection.send(headers: headers, body: body, deadline: deadline)
    }

    /// A connection with one stream taken on it for the caller, who gives it back with
    /// `status.streamClosed()`.
    func connection(deadline: NIODeadline) async throws -> APNsConnection {
        enum Answer {
            case ready(APNsConnection)
            case pending(EventLoopFuture<APNsConnection>, ConnectionStatus)
            case opening(EventLoopFuture<APNsConnection>, ConnectionStatus)
        }
        let answer: Answer = try state.withLock { state in
            guard !state.isShutDown else { throw APNsTransportError(.shutdown, "the APNs client was shut down") }
            state.entries.removeAll { entry in
                if case .ready(let connection) = entry.link { return !connection.isUsable }
                return false
            }
            // Lazily: an array per request would cost an allocation per push.
            let choice = plan.choose(
                among: state.entries.lazy.map { entry in
                    if case .connecting = entry.link { return entry.status.planned(isConnecting: true) }
                    return entry.status.planned(isConnecting: false)
                })
            switch choice {
            case .use(let index):
                let entry = state.entries[index]
                entry.status.streamTaken()
                switch entry.link {
                // Straight back: a future would cost a hop through an event loop per request.
                case .ready(let connection): return .ready(connection)
                case .connecting(let future): return .pending(future, entry.status)
                }
            case .open:
                let status = ConnectionStatus()
                status.streamTaken()
                let timeout = max(.milliseconds(1), deadline - .now())
                let future = APNsConnection.connect(
                    to: endpoint, sslContext: sslContext, group: group, timeout: timeout, patience: patience, status: status)
                state.entries.append(Entry(link: .connecting(future), status: status))
                return .opening(future, status)
            }
        }
        switch answer {
        case .ready(let connection): return connection
        case .opening(let future, let status):
            // Outside the lock: NIO runs the callback of a future already complete at once when
            // on its event loop, as the dispatcher's workers are, and it takes the lock.
            future.whenComplete { [weak self] result in
                self?.state.withLock { state in
                    guard let index = state.entries.firstIndex(where: { $0.status === status }) else { return }
                    switch result {
                    case .success(let connection) where !state.isShutDown: state.entries[index].link = .ready(connection)
                    case .success(let connection):
                        state.entries.remove(at: index)
                        connection.channel.close(promise: nil)
                    case .failure: state.entries.remove(at: index)
                    }
                }
            }
            return try await Self.connected(future, status)
        case .pending(let future, let status):
            return try await Self.connected(future, status)
        }
    }

    /// The connection once made; the stream taken on it is given back if it is not.
    private static func connected(_ future: EventLoopFuture<APNsConnection>, _ status: ConnectionStatus) async throws -> APNsConnection {
        do {
            return try await future.get()
        } catch {
            status.streamClosed()
            throw error
        }
    }

    func shutdown() async {
        let entries = state.withLock { state in
            state.isShutDown = true
            defer { state.entries.removeAll() }
            return state.entries
        }
        for entry in entries {
            switch entry.link {
            case .ready(let connection): await connection.close()
            case .connecting(let future): if let connection = try? await future.get() { await connection.close() }
            }
        }
    }
}
