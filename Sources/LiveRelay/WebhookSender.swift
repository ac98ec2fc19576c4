import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Posts the events to the webhook endpoints: woken by every change this process makes, and
/// once a second for what other instances wrote and for retries come due; rests while no endpoint
/// is enabled. Its HTTP client never follows a redirect.
package final class WebhookSender: Service {
    let relay: RelayService
    let client: HTTPClient

    package init(relay: RelayService) {
        self.relay = relay
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(
                connect: .milliseconds(Int64(relay.configuration.webhooks.connectTimeout * 1000)),
                read: .milliseconds(Int64(relay.configuration.webhooks.attemptTimeout * 1000))))
        configuration.httpVersion = .automatic
        configuration.decompression = .disabled
        client = HTTPClient(eventLoopGroupProvider: .shared(MultiThreadedEventLoopGroup.singleton), configuration: configuration)
    }

    package func run() async throws {
        var backoff = StoreBackoff(initial: .seconds(1), maximum: .seconds(30))
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            var wait = Duration.seconds(1)
            do {
                // At shutdown the posts in flight are dropped: their leases run out, and they are
                // posted again (the same event ids) by the next instance to claim them.
                let claimed = try await cancelWhenGracefulShutdown { [relay, client] in
                    try await relay.hasEnabledWebhooks() ? try await relay.postDueWebhooks(using: client) : 0
                }
                relay.logger.log(backoff.succeeded(), who: "the webhook sender")
                if claimed == relay.configuration.webhooks.batchSize { wait = .zero }
            } catch {
                if Task.isCancelled || Task.isShuttingDownGracefully { break }
                let failed = backoff.failed()
                wait = failed.wait
                relay.logger.log(failed.change, who: "the webhook sender", error: error)
                relay.metrics.count("liverelay_store_failures_total", ["loop": "webhooks"])
            }
            if wait > .zero {
                if backoff.isFailing {
                    guard await StoreBackoff.pause(for: wait) else { break }
                } else {
                    await relay.webhookSignal.wait(upTo: wait, thenClaim: false)
                }
            }
        }
        try? await client.shutdown()
    }

    /// Tests: posts everything due now, until nothing is.
    package func drain() async throws {
        while try await relay.postDueWebhooks(using: client) > 0 {}
    }

    /// Tests: stops the HTTP client (`run` does so itself when it ends).
    package func shutdown() async throws { try await client.shutdown() }
}
