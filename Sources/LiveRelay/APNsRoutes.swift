import APNs
import Foundation
import LiveActivityKit
import NIOCore
import NIOPosix

/// The APNs clients the relay sends through: one per environment it serves, each with its own
/// connections (Apple serves the environments on other host names), opened when first used. A
/// token of an environment with no client is refused when it is registered.
public struct APNsRoutes: Sendable {
    private let clients: [PushEnvironment: APNsClient]

    public init(_ clients: [PushEnvironment: APNsClient]) {
        self.clients = clients
    }

    /// A client per environment, signing with `signingKey` (one key works in both), all on one
    /// event loop so that the dispatcher's workers send to either without a thread hop.
    public init(
        signingKey: APNsSigningKey, endpoints: [PushEnvironment: APNsEnvironment], now: @escaping @Sendable () -> Date = { Date() },
        eventLoop: any EventLoop = MultiThreadedEventLoopGroup.singleton.next()
    ) throws {
        var clients: [PushEnvironment: APNsClient] = [:]
        for (environment, endpoint) in endpoints {
            clients[environment] = try APNsClient(
                configuration: .init(environment: endpoint, signingKey: signingKey, now: now), eventLoopGroup: eventLoop)
        }
        self.clients = clients
    }

    /// The environments served.
    public var environments: Set<PushEnvironment> { Set(clients.keys) }

    public func client(_ environment: PushEnvironment) -> APNsClient? { clients[environment] }

    /// Where the dispatcher's workers run cheapest: the first client's push connection's event
    /// loop. Clients made on one event loop (as `serve` makes them) share it, so no push hops threads.
    var pushExecutor: (any TaskExecutor)? {
        PushEnvironment.allCases.lazy.compactMap { self.clients[$0]?.pushExecutor }.first
    }

    /// Closes every client's connections.
    public func shutdown() async {
        for client in clients.values { await client.shutdown() }
    }
}
