import APNs
import Foundation
import NIOCore
import NIOPosix
import ServiceLifecycle
import SimulatedDevices

/// Apple's push service on loopback: the provider API over HTTP/2 + TLS, with device and
/// broadcast pushes on one port and channel management on another, as Apple splits them.
public final class APNsEmulator: Sendable {
    public struct Configuration: Sendable {
        /// The environment played; tokens, channels and restricted keys must match it.
        public var environment: EmulatorEnvironment
        public var host: String
        /// 0 picks a free port.
        public var pushPort: Int
        public var channelManagementPort: Int
        /// `SETTINGS_MAX_CONCURRENT_STREAMS` before the first authenticated request (APNs: 1).
        public var initialStreamLimit: Int
        /// The limit after it.
        public var authenticatedStreamLimit: Int
        /// Whether `apns-priority: 1` is taken for `liveactivity` device pushes (Apple's Live
        /// Activity article says 5 or 10; the generic header table allows 1).
        public var allowsPriority1ForLiveActivity: Bool
        /// Requests kept for inspection.
        public var journalCapacity: Int
        /// A connection without requests for this long is closed with GOAWAY `IdleTimeout`;
        /// `nil` keeps idle connections open (Apple gives no figure).
        public var idleTimeout: Duration?
        /// How simulated devices behave where Apple publishes no numbers.
        public var devices: DeviceRuntimeSettings
        /// The wall clock; the emulator's own time is this plus what `clock.advance(by:)` added.
        public var now: @Sendable () -> Date

        public init(
            environment: EmulatorEnvironment = .sandbox, host: String = "127.0.0.1", pushPort: Int = 0,
            channelManagementPort: Int = 0, initialStreamLimit: Int = 1, authenticatedStreamLimit: Int = 1000,
            allowsPriority1ForLiveActivity: Bool = false, journalCapacity: Int = 10_000, idleTimeout: Duration? = nil,
            devices: DeviceRuntimeSettings = .init(), now: @escaping @Sendable () -> Date = { Date() }
        ) {
            self.environment = environment
            self.host = host
            self.pushPort = pushPort
            self.channelManagementPort = channelManagementPort
            self.initialStreamLimit = initialStreamLimit
            self.authenticatedStreamLimit = authenticatedStreamLimit
            self.allowsPriority1ForLiveActivity = allowsPriority1ForLiveActivity
            self.journalCapacity = journalCapacity
            self.idleTimeout = idleTimeout
            self.devices = devices
            self.now = now
        }
    }

    public let configuration: Configuration
    public let registry: EmulatorRegistry
    public let journal: EmulatorJournal
    public let faults: EmulatorFaults
    /// The simulated iPhones behind this APNs: they issue the tokens it routes and take the
    /// pushes it accepts.
    public let devices: DeviceFleet
    /// Sends simulated apps' tokens to the LiveRelay server each app is told about.
    public let reporter: TokenReporter
    /// The emulator's time, which tests and the control API move forward.
    public var clock: VirtualClock { devices.clock }
    public let certificates: EmulatorCertificates
    private let pushServer: HTTP2TLSServer
    private let managementServer: HTTP2TLSServer

    public var pushPort: Int { pushServer.port }
    public var channelManagementPort: Int { managementServer.port }

    private init(configuration: Configuration, registry: EmulatorRegistry, journal: EmulatorJournal, faults: EmulatorFaults,
                 devices: DeviceFleet, certificates: EmulatorCertificates, pushServer: HTTP2TLSServer, managementServer: HTTP2TLSServer) {
        self.configuration = configuration
        self.registry = registry
        self.journal = journal
        self.faults = faults
        self.devices = devices
        self.reporter = TokenReporter(fleet: devices, environment: configuration.environment)
        self.certificates = certificates
        self.pushServer = pushServer
        self.managementServer = managementServer
    }

    /// Starts both listeners. Without `certificates`, a new CA and server certificate are made.
    public static func start(
        _ configuration: Configuration = .init(), certificates: EmulatorCertificates? = nil,
        registry: EmulatorRegistry = EmulatorRegistry(),
        group: any EventLoopGroup = MultiThreadedEventLoopGroup.singleton
    ) async throws -> APNsEmulator {
        var configuration = configuration
        let clock = VirtualClock(wallClock: configuration.now)
        configuration.now = clock.function
        let certificates = try certificates ?? EmulatorCertificates.generate(extraHostNames: [configuration.host])
        let journal = EmulatorJournal(capacity: configuration.journalCapacity)
        let faults = EmulatorFaults()
        let devices = DeviceFleet(clock: clock, settings: configuration.devices) { [environment = configuration.environment] _, events in
            // Devices tell APNs which tokens to route and which to refuse.
            for event in events {
                switch event {
                case .tokenIssued(let token, let bundleID, _):
                    registry.register(EmulatorToken(hex: token, bundleID: bundleID, environment: environment))
                case .tokenRetired(let token, let at, _):
                    registry.unregister(token: token, since: at)
                default:
                    break
                }
            }
        }
        let idle = configuration.idleTimeout.map {
            IdlePolicy(timeout: TimeAmount($0), debugData: APNsError(status: 400, reason: .idleTimeout).body)
        }
        func responder(_ service: APNsResponder.Service) -> APNsResponder {
            APNsResponder(service: service, settings: configuration, registry: registry, journal: journal, faults: faults, devices: devices)
        }
        let push = try await HTTP2TLSServer.start(
            host: configuration.host, port: configuration.pushPort, certificates: certificates,
            responder: responder(.push), idle: idle, group: group)
        do {
            let management = try await HTTP2TLSServer.start(
                host: configuration.host, port: configuration.channelManagementPort, certificates: certificates,
                responder: responder(.channelManagement), idle: idle, group: group)
            return APNsEmulator(configuration: configuration, registry: registry, journal: journal, faults: faults,
                                devices: devices, certificates: certificates, pushServer: push, managementServer: management)
        } catch {
            await push.shutdown()
            throw error
        }
    }

    /// The environment a client uses to reach this emulator, trusting the CA at `caFile`.
    public func clientEnvironment(caFile: String) -> APNsEnvironment {
        .custom(host: configuration.host, port: pushPort, channelManagementPort: channelManagementPort, caFile: caFile)
    }

    public func shutdown() async {
        await pushServer.shutdown()
        await managementServer.shutdown()
    }
}

/// Lets wall-clock time act on the devices (stale dates, limits, deferred pushes) once a second
/// and sends the apps' token reports, until graceful shutdown; then closes both listeners.
extension APNsEmulator: Service {
    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.reporter.run() }
            while !Task.isShuttingDownGracefully {
                devices.advanceAll()
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(1)) }
            }
            group.cancelAll()
        }
        await shutdown()
    }
}
