import AsyncHTTPClient
import Foundation
import LiveRelayStore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// Posts the events to the webhook endpoints: woken by every change this process makes, by each
/// post that ends, and once a second for what other instances wrote and for retries come due;
/// rests while no endpoint is enabled. Posts overlap: a slow endpoint holds only its own posts
/// (up to the attempt's timeout), never the others', and room is claimed as posts end. Each post
/// has a connection of its own (`RelayService.post`).
package final class WebhookSender: Service {
    let relay: RelayService
    /// Attempts ended and not recorded yet.
    private let ended = Mutex<[(ClaimedWebhookDelivery, WebhookAttempt)]>([])
    private let posting = Atomic<Int>(0)

    package init(relay: RelayService) {
        self.relay = relay
    }

    package func run() async throws {
        let limit = relay.configuration.webhooks.batchSize
        // Discarding: a group keeps each finished child until it is awaited, and a sender posts
        // for months (20,000 posts kept 300 MB).
        await withDiscardingTaskGroup { posts in
            var backoff = StoreBackoff(initial: .seconds(1), maximum: .seconds(30))
            while !Task.isShuttingDownGracefully, !Task.isCancelled {
                var wait = Duration.seconds(1)
                let done = ended.withLock { ended in
                    defer { ended.removeAll() }
                    return ended
                }
                do {
                    try await relay.recordWebhookAttempts(done)
                    let room = limit - posting.load(ordering: .relaxed)
                    if room > 0, try await relay.hasEnabledWebhooks() {
                        let claimed = try await relay.claimDueWebhooks(limit: room)
                        for delivery in claimed {
                            posting.add(1, ordering: .relaxed)
                            posts.addTask { [self] in
                                let attempt = await relay.post(delivery)
                                ended.withLock { $0.append((delivery, attempt)) }
                                posting.subtract(1, ordering: .relaxed)
                                relay.webhookSignal.signal()
                            }
                        }
                        if claimed.count == room { wait = .zero }
                    }
                    relay.logger.log(backoff.succeeded(), who: "the webhook sender")
                } catch {
                    if Task.isCancelled || Task.isShuttingDownGracefully { break }
                    // Outcomes not recorded wait for the next round.
                    ended.withLock { $0.insert(contentsOf: done, at: 0) }
                    let failed = backoff.failed()
                    wait = failed.wait
                    relay.logger.log(failed.change, who: "the webhook sender", error: error)
                    relay.metrics.count(Metric.storeFailuresTotal, ["loop": "webhooks"])
                }
                if backoff.isFailing {
                    guard await StoreBackoff.pause(for: wait) else { break }
                } else if wait > .zero {
                    await relay.webhookSignal.wait(upTo: wait, thenClaim: false)
                }
            }
            // Posts still waiting for an answer are dropped: their leases run out (or a restart
            // alone on its store frees them), and they are posted again with the same event ids.
            posts.cancelAll()
        }
    }

    /// Tests: posts everything due now, until nothing is.
    package func drain() async throws {
        while try await relay.postDueWebhooks() > 0 {}
    }
}
