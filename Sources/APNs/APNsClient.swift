import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOHPACK
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
        /// HTTP/2 connections per host; each carries as many concurrent streams as APNs allows.
        public var connectionsPerHost: Int
        /// How long a request may take, connecting included, unless the call gives its own.
        public var requestTimeout: Duration
        /// The wall clock provider tokens are dated with.
        public var now: @Sendable () -> Date

        public init(
            environment: APNsEnvironment, signingKey: APNsSigningKey, connectionsPerHost: Int = 1,
            requestTimeout: Duration = .seconds(10), now: @escaping @Sendable () -> Date = { Date() }
        ) {
            self.environment = environment
            self.signingKey = signingKey
            self.connectionsPerHost = connectionsPerHost
            self.requestTimeout = requestTimeout
            self.now = now
        }
    }

    public let configuration: Configuration
    private let tokens: ProviderTokenCache
    let pushConnections: ConnectionPool
    private let managementConnections: ConnectionPool
    /// With one push connection, an executor on its event loop: tasks that send many pushes run
    /// cheapest there (`executorPreference:`), each request written and its answer read without
    /// a thread hop.
    public let pushExecutor: (any TaskExecutor)?
    private let logger: Logger

    public init(
        configuration: Configuration, eventLoopGroup: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton,
        logger: Logger = Logger(label: "liverelay.apns")
    ) throws {
        self.configuration = configuration
        self.logger = logger
        tokens = ProviderTokenCache(key: configuration.signingKey, now: configuration.now)
        let count = max(1, configuration.connectionsPerHost)
        let pushLoop = count == 1 ? eventLoopGroup.next() : nil
        pushExecutor = pushLoop.map(EventLoopTaskExecutor.init)
        pushConnections = try ConnectionPool(endpoint: configuration.environment.push, size: count, group: pushLoop ?? eventLoopGroup)
        managementConnections = try ConnectionPool(endpoint: configuration.environment.channelManagement, size: 1, group: eventLoopGroup)
    }

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
    /// process (GOAWAY, a closing connection) is retried once on another connection.
    public func execute(_ request: APNsRequest, timeout: Duration? = nil) async throws -> APNsRawResponse {
        let deadline = NIODeadline.now() + TimeAmount(timeout ?? configuration.requestTimeout)
        let pool = request.service == .push ? pushConnections : managementConnections
        var tokenRefreshed = false
        var retriedElsewhere = false
        while true {
            let token = tokens.currentToken()
            let raw: APNsRawResponse
            do {
                let connection = try await pool.connection(deadline: deadline)
                raw = try await connection.send(
                    headers: Self.headerBlock(request, authority: pool.endpoint.authority, token: token),
                    body: request.body.map { ByteBuffer(bytes: $0) }, deadline: deadline)
            } catch let error as APNsTransportError where error.code == .notProcessed && !retriedElsewhere {
                retriedElsewhere = true
                logger.debug("retrying on a new connection", metadata: ["apns.error": "\(error)"])
                continue
            }
            if raw.status == 403, !tokenRefreshed, APNsError(raw).reason == .expiredProviderToken,
               tokens.rejectedAsExpired(token) {
                tokenRefreshed = true
                logger.info("provider token expired; retrying with a new one")
                continue
            }
            return raw
        }
    }

    private static func headerBlock(_ request: APNsRequest, authority: String, token: String) -> HPACKHeaders {
        var headers = HPACKHeaders()
        let fields = request.headerFields(authority: authority, authorization: token)
        headers.reserveCapacity(fields.count)
        for field in fields {
            headers.add(name: field.name, value: field.value, indexing: field.indexable ? .indexable : .nonIndexable)
        }
        return headers
    }
}

/// Runs `body` with a client and shuts it down afterwards, also when `body` throws.
public func withAPNsClient<Result: Sendable>(
    configuration: APNsClient.Configuration, logger: Logger = Logger(label: "liverelay.apns"),
    _ body: (APNsClient) async throws -> Result
) async throws -> Result {
    let client = try APNsClient(configuration: configuration, logger: logger)
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

/// The connections to one endpoint, opened lazily and used in turn.
final class ConnectionPool: Sendable {
    private enum Slot {
        case empty
        case connecting(EventLoopFuture<APNsConnection>)
        case ready(APNsConnection)
    }

    private struct State {
        var slots: [Slot]
        var next = 0
        var isShutDown = false
    }

    let endpoint: APNsEndpoint
    let group: any EventLoopGroup
    private let sslContext: NIOSSLContext
    private let state: Mutex<State>

    init(endpoint: APNsEndpoint, size: Int, group: any EventLoopGroup) throws {
        self.endpoint = endpoint
        self.group = group
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
        state = Mutex(State(slots: Array(repeating: .empty, count: size)))
    }

    func connection(deadline: NIODeadline) async throws -> APNsConnection {
        enum Answer {
            case ready(APNsConnection)
            case pending(EventLoopFuture<APNsConnection>)
        }
        let answer: Answer = try state.withLock { state in
            guard !state.isShutDown else { throw APNsTransportError(.shutdown, "the APNs client was shut down") }
            let index = state.next
            state.next = (state.next + 1) % state.slots.count
            switch state.slots[index] {
            case .ready(let connection) where connection.isUsable:
                // Straight back: a future would cost a hop through an event loop per request.
                return .ready(connection)
            case .connecting(let future):
                return .pending(future)
            case .ready, .empty:
                let timeout = max(.milliseconds(1), deadline - .now())
                let future = APNsConnection.connect(to: endpoint, sslContext: sslContext, group: group, timeout: timeout)
                state.slots[index] = .connecting(future)
                future.whenComplete { [weak self] result in
                    self?.state.withLock { state in
                        guard case .connecting(let current) = state.slots[index], current === future else { return }
                        switch result {
                        case .success(let connection) where !state.isShutDown: state.slots[index] = .ready(connection)
                        case .success(let connection):
                            state.slots[index] = .empty
                            connection.channel.close(promise: nil)
                        case .failure: state.slots[index] = .empty
                        }
                    }
                }
                return .pending(future)
            }
        }
        switch answer {
        case .ready(let connection): return connection
        case .pending(let future): return try await future.get()
        }
    }

    func shutdown() async {
        let slots = state.withLock { state in
            state.isShutDown = true
            defer { state.slots = state.slots.map { _ in .empty } }
            return state.slots
        }
        for slot in slots {
            switch slot {
            case .ready(let connection): await connection.close()
            case .connecting(let future): if let connection = try? await future.get() { await connection.close() }
            case .empty: break
            }
        }
    }
}
