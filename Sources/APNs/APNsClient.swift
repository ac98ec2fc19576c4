import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Synchronization

/// Sends Live Activity pushes, broadcasts and channel-management requests to APNs over HTTP/2
/// with token authentication. Connections open on first use and are replaced when they fail
/// or APNs retires them; every request has a deadline. Call `shutdown()` when done, or use
/// `withAPNsClient`.
public final class APNsClient: Sendable {
    public struct Configuration: Sendable {
        public var environment: APNsEnvironment
        public var signingKey: APNsSigningKey
        /// HTTP/2 connections per host: at least the lower bound once used, more as the load needs,
        /// up to the upper (`ConnectionPlan`). Each carries as many concurrent streams as APNs allows.
        public var connectionsPerHost: ClosedRange<Int>
        /// How long a request may take, connecting included, unless the call gives its own.
        public var requestTimeout: Duration
        /// How long a connection with requests in flight may send nothing before it is PINGed, and
        /// the PING go unanswered before the connection is taken for dead and its requests fail as
        /// `connectionClosed`; at least 10 of the connection's round trips (`ConnectionLiveness`).
        public var connectionPatience: Duration
        /// The wall clock provider tokens are dated with.
        public var now: @Sendable () -> Date

        public init(
            environment: APNsEnvironment, signingKey: APNsSigningKey, connectionsPerHost: ClosedRange<Int> = 1...1,
            requestTimeout: Duration = .seconds(10), connectionPatience: Duration = .seconds(1),
            now: @escaping @Sendable () -> Date = { Date() }
        ) {
            self.environment = environment
            self.signingKey = signingKey
            self.connectionsPerHost = connectionsPerHost
            self.requestTimeout = requestTimeout
            self.connectionPatience = connectionPatience
            self.now = now
        }
    }

    public let configuration: Configuration
    private let tokens: ProviderTokenCache
    let pushConnections: ConnectionPool
    private let managementConnections: ConnectionPool
    /// With one event loop for the push connections (at most one connection, or a group of one
    /// loop), an executor on it: tasks that send many pushes run cheapest there
    /// (`executorPreference:`), each request written and its answer read without a thread hop.
    public let pushExecutor: (any TaskExecutor)?
    private let logger: Logger

    public init(
        configuration: Configuration, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "liverelay.apns")
    ) throws {
        self.configuration = configuration
        self.logger = logger
        tokens = ProviderTokenCache(key: configuration.signingKey, now: configuration.now)
        let connections = configuration.connectionsPerHost
        let pushLoop = connections.upperBound <= 1 || eventLoopGroup is any EventLoop ? eventLoopGroup.next() : nil
        pushExecutor = pushLoop.map(EventLoopTaskExecutor.init)
        let patience = TimeAmount(configuration.connectionPatience)
        pushConnections = try ConnectionPool(
            endpoint: configuration.environment.push, connections: connections, patience: patience, group: pushLoop ?? eventLoopGroup)
        managementConnections = try ConnectionPool(
            endpoint: configuration.environment.channelManagement, connections: 1...1, patience: patience, group: eventLoopGroup)
    }

    /// Push connections open or opening now.
    public var pushConnectionCount: Int { pushConnections.count }

    /// Closes every connection; requests after this fail with `.shutdown`.
    public func shutdown() async {
        await pushConnections.shutdown()
        await managementConnections.shutdown()
    }

    // MARK: Pushes

    /// Sends a Live Activity push (start, update or end) to an update or push-to-start token.
    @discardableResult
    public func send(
        _ payload: LiveActivityPayload, to token: DeviceToken, topic: BundleID, options: PushOptions = .init(),
        timeout: Duration? = nil
    ) async throws -> APNsAccepted {
        try await accepted(execute(.liveActivity(payload, to: token, topic: topic, options: options), timeout: timeout))
    }

    /// Sends an update or end to every activity subscribed to a broadcast channel (iOS 18).
    @discardableResult
    public func broadcast(
        _ payload: LiveActivityPayload, channelID: String, bundleID: BundleID, options: BroadcastOptions,
        timeout: Duration? = nil
    ) async throws -> APNsAccepted {
        try await accepted(execute(.broadcast(payload, channelID: channelID, bundleID: bundleID, options: options), timeout: timeout))
    }

    // MARK: Channels

    /// A channel's configuration as APNs reports it.
    public struct ChannelConfiguration: Sendable, Hashable {
        public var channelID: String
        public var storagePolicy: MessageStoragePolicy?
        public var pushType: String?
    }

    /// Creates a broadcast channel and returns its id (random, base64, never reissued).
    public func createChannel(bundleID: BundleID, storagePolicy: MessageStoragePolicy, timeout: Duration? = nil) async throws -> String {
        let answer = try accepted(await execute(.createChannel(bundleID: bundleID, storagePolicy: storagePolicy), timeout: timeout))
        guard let id = answer.channelID else {
            throw APNsTransportError(.invalidAnswer, "APNs answered \(answer.status) to channel creation without apns-channel-id")
        }
        return id
    }

    public func readChannel(_ channelID: String, bundleID: BundleID, timeout: Duration? = nil) async throws -> ChannelConfiguration {
        let raw = try await execute(.readChannel(channelID, bundleID: bundleID), timeout: timeout)
        _ = try accepted(raw)
        // Apple documents kebab-case keys; camelCase has been reported too, so read both.
        let json = raw.body.flatMap { try? JSONValue(parsing: $0.readableBytesView) }
        let policy = (json?["message-storage-policy"] ?? json?["messageStoragePolicy"])?.doubleValue
        return ChannelConfiguration(
            channelID: channelID,
            storagePolicy: policy.flatMap { MessageStoragePolicy(rawValue: Int($0)) },
            pushType: (json?["push-type"] ?? json?["pushType"])?.stringValue)
    }

    /// Every channel id of the app in this environment.
    public func listChannels(bundleID: BundleID, timeout: Duration? = nil) async throws -> [String] {
        let raw = try await execute(.listChannels(bundleID: bundleID), timeout: timeout)
        _ = try accepted(raw)
        // Apple documents {"channels": [...]}; a bare array has been reported too.
        guard let json = raw.body.flatMap({ try? JSONValue(parsing: $0.readableBytesView) }) else { return [] }
        guard case .array(let ids) = json["channels"] ?? json else { return [] }
        return ids.compactMap(\.stringValue)
    }

    public func deleteChannel(_ channelID: String, bundleID: BundleID, timeout: Duration? = nil) async throws {
        _ = try accepted(await execute(.deleteChannel(channelID, bundleID: bundleID), timeout: timeout))
    }

    // MARK: Sending

    private func accepted(_ raw: APNsRawResponse) throws(APNsError) -> APNsAccepted {
        guard (200..<300).contains(raw.status) else { throw APNsError(raw) }
        return APNsAccepted(raw)
    }

    /// Sends `request` with a provider token and returns APNs' answer, whatever its status. On
    /// `ExpiredProviderToken` it makes a new token and retries once; a request APNs did not
    /// process (GOAWAY, a closing connection) is retried once on another connection. A request
    /// HTTP/2 would call malformed is not sent: its `malformation` is thrown.
    public func execute(_ request: APNsRequest, timeout: Duration? = nil) async throws -> APNsRawResponse {
        if let malformation = request.malformation { throw malformation }
        let deadline = NIODeadline.now() + TimeAmount(timeout ?? configuration.requestTimeout)
        let pool = request.service == .push ? pushConnections : managementConnections
        var tokenRefreshed = false
        var retriedElsewhere = false
        while true {
            let token = tokens.currentToken()
            let raw: APNsRawResponse
            do {
                raw = try await pool.send(
                    headers: request.headerFields(authority: pool.endpoint.authority, authorization: token),
                    body: request.body.map { ByteBuffer(bytes: $0) }, deadline: deadline)
            } catch let error as APNsTransportError where error.code == .notProcessed && !retriedElsewhere {
                retriedElsewhere = true
                logger.debug("retrying on a new connection", metadata: ["apns.error": "\(error)"])
                continue
            }
            if raw.status == 403, !tokenRefreshed, APNsError(raw).reason == .expiredProviderToken,
                tokens.rejectedAsExpired(token)
            {
                tokenRefreshed = true
                logger.info("provider token expired; retrying with a new one")
                continue
            }
            return raw
        }
    }
}

/// Runs `body` with a client and shuts it down afterwards, also when `body` throws.
public func withAPNsClient<Result: Sendable>(
    configuration: APNsClient.Configuration, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
    logger: Logger = Logger(label: "liverelay.apns"), _ body: (APNsClient) async throws -> Result
) async throws -> Result {
    let client = try APNsClient(configuration: configuration, eventLoopGroup: eventLoopGroup, logger: logger)
    do {
        let result = try await body(client)
        await client.shutdown()
        return result
    } catch {
        await client.shutdown()
        throw error
    }
}

/// Runs tasks on an event loop (`executorPreference:`): tasks that drive connections of that loop
/// then do so without a thread hop.
public final class EventLoopTaskExecutor: TaskExecutor {
    let loop: any EventLoop

    public init(_ loop: any EventLoop) {
        self.loop = loop
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

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
