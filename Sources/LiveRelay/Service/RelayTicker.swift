import ServiceLifecycle

/// Runs what time does on its own (schedules, expiry, channel cleanup) once a second.
package struct RelayTicker: Service {
    let relay: RelayService
    let interval: Duration

    package init(relay: RelayService, interval: Duration = .seconds(1)) {
        self.relay = relay
        self.interval = interval
    }

    package func run() async throws {
        var backoff = StoreBackoff(initial: interval, maximum: .seconds(30))
        while !Task.isShuttingDownGracefully, !Task.isCancelled {
            var wait = interval
            do {
                try await relay.tick()
                relay.logger.log(backoff.succeeded(), who: "the ticker")
            } catch {
                // Cancellation is how the service group stops this loop, never a store failure.
                if Task.isCancelled { return }
                let failed = backoff.failed()
                wait = failed.wait
                relay.logger.log(failed.change, who: "the ticker", error: error)
                relay.metrics.count(Metric.storeFailuresTotal, ["loop": "ticker"])
            }
            guard await StoreBackoff.pause(for: wait) else { return }
        }
    }
}
