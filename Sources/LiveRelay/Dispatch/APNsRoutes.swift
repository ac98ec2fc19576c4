import APNs
import Foundation
import LiveActivityKit
import LiveRelayStore
import NIOCore
import NIOPosix
import Synchronization

/// How the relay reaches APNs: where each environment it serves is, and one client per
/// (credentials, environment), made when an app first needs it, with its own connections (Apple
/// serves the environments on other host names, and a connection is bound to one team's key):
/// one at first, more as the pushes in flight need, up to `maximumConnections`.
/// Apps that share a key share its clients. Every client runs on one event loop, so the
/// dispatcher's workers send through any of them without a thread hop.
package final class APNsRoutes: Sendable {
    private struct Route: Hashable {
        var teamID: String
        var keyID: String
        /// Sealed: one app's key, re-sealed, makes a new client (only a rotation or a restart does).
        var sealedSigningKey: String
        var environment: PushEnvironment
    }

    private let endpoints: [PushEnvironment: APNsHosts]
    private let now: @Sendable () -> Date
    private let eventLoop: any EventLoop
    private let clients = Mutex<[Route: APNsClient]>([:])
    /// The most connections each client opens.
    package let maximumConnections: Int

    /// What `maximumConnections` may be set to.
    package static let allowedConnections = 1...64
    /// Where the dispatcher's workers run cheapest: the clients' event loop.
    let pushExecutor: any TaskExecutor

    package init(
        endpoints: [PushEnvironment: APNsHosts], now: @escaping @Sendable () -> Date = { Date() },
        maximumConnections: Int = 16, eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()
    ) {
        self.endpoints = endpoints
        self.maximumConnections = maximumConnections
        self.now = now
        self.eventLoop = eventLoop
        self.pushExecutor = EventLoopTaskExecutor(eventLoop)
    }

    /// The environments served.
    package var environments: Set<PushEnvironment> { Set(endpoints.keys) }

    /// The client that sends for `app` in `environment`; nil when that environment is not served.
    /// `open` gives the app's key's PEM, when a client is made. Throws when the key cannot sign.
    package func client(for app: AppRecord, in environment: PushEnvironment, open: (AppRecord) throws -> String) throws -> APNsClient? {
        guard let endpoint = endpoints[environment] else { return nil }
        let route = Route(teamID: app.teamID, keyID: app.keyID, sealedSigningKey: app.sealedSigningKey, environment: environment)
        if let client = clients.withLock({ $0[route] }) { return client }
        let key = try APNsSigningKey(pem: try open(app), keyID: app.keyID, teamID: app.teamID)
        let made = try APNsClient(
            configuration: .init(environment: endpoint, signingKey: key, connectionsPerHost: 1...maximumConnections, now: now),
            eventLoopGroup: eventLoop)
        let (client, spare) = clients.withLock { clients in
            if let existing = clients[route] { return (existing, Optional(made)) }
            clients[route] = made
            return (made, nil)
        }
        // Made twice at once: the spare never opened a connection, but is closed all the same.
        if let spare { Task { await spare.shutdown() } }
        return client
    }

    /// Push connections open or opening now, of every client.
    package var pushConnectionCount: Int {
        clients.withLock { Array($0.values) }.reduce(0) { $0 + $1.pushConnectionCount }
    }

    /// Closes every client's connections.
    package func shutdown() async {
        for client in clients.withLock({ Array($0.values) }) { await client.shutdown() }
    }
}
