import Logging
import ServiceLifecycle
import UnixSignals

extension ServiceGroupConfiguration {
    /// The services of a long-running command (`serve`, `emulator`), stopped by SIGTERM or SIGINT
    /// in any state: each is asked to finish gracefully (pushes in flight get their answers), and
    /// whatever still runs after `graceful` is cancelled; a service that ignored its cancellation
    /// for 5 s more ends the process, so that a supervisor never waits on it.
    static func stoppedBySignals(
        _ services: [ServiceConfiguration], graceful: Duration, logger: Logger
    ) -> ServiceGroupConfiguration {
        var configuration = ServiceGroupConfiguration(services: services, gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = graceful
        configuration.maximumCancellationDuration = .seconds(5)
        return configuration
    }
}
