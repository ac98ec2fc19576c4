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
        public var environment: APNsHosts
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
            environment: APNsHosts, signingKey: APNsSigningKey, connectionsPerHost: ClosedRange<Int> = 1...1,
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

    /// Tells one device that the app's widgets (with its widget token) or a control (with the
    /// control's token) have new content (iOS 26).
    @discardableResult
    public func reload(
        _ type: ReloadPushType, to token: DeviceToken, topic: BundleID, options: PushOptions = .init(), timeout: Duration? = nil
    ) async throws -> APNsAccepted {
        try await accepted(execute(.reload(type, to: token, topic: topic, options: options), timeout: timeout))
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
