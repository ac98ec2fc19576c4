import APNs
import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SimulatedDevices

/// The two listeners of one environment: device and broadcast pushes, and channel management,
/// which Apple serves on another host name and port. 0 picks a free port.
public struct EmulatorPorts: Sendable, Hashable {
    public var push: Int
    public var channelManagement: Int

    public init(push: Int = 0, channelManagement: Int = 0) {
        self.push = push
        self.channelManagement = channelManagement
    }
}

/// Apple's push service on loopback: the provider API over HTTP/2 + TLS, for the sandbox and the
/// production environment at once, each with device and broadcast pushes on one port and channel
/// management on another, as Apple splits them. The environments share the devices and what is
/// registered, and stay disjoint as Apple's are: a token or a channel of one is unknown to the other.
public final class APNsEmulator: Sendable {
    public struct Configuration: Sendable {
        public static var defaultLogger: Logger {
            var logger = Logger(label: "liverelay.emulator")
            logger.logLevel = .notice
            return logger
        }

        /// The environments played, and where each listens.
        public var environments: [PushEnvironment: EmulatorPorts]
        public var host: String
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
        /// How long each environment takes to answer a request (none: at once, as on loopback).
        public var latency: [PushEnvironment: APNsLatency]
        /// How simulated devices behave where Apple publishes no numbers.
        public var devices: DeviceRuntimeSettings
        /// The wall clock; the emulator's own time is this plus what `clock.advance(by:)` added.
        public var now: @Sendable () -> Date
        /// Where each connection the emulator ends is told, with its reason (a connection error at
        /// `warning`, a GOAWAY or a dropped connection at `info`); `notice` and up unless told.
        public var logger: Logger
        /// Where the devices and what APNs knows of them are kept across restarts (`serve` keeps
        /// its built-in emulator's in the data directory); `nil` keeps nothing.
        public var stateFile: String?

        public init(
            environments: [PushEnvironment: EmulatorPorts] = [.sandbox: .init(), .production: .init()], host: String = "127.0.0.1",
            initialStreamLimit: Int = 1, authenticatedStreamLimit: Int = 1000, allowsPriority1ForLiveActivity: Bool = false,
            journalCapacity: Int = 10_000, idleTimeout: Duration? = nil, latency: [PushEnvironment: APNsLatency] = [:],
            devices: DeviceRuntimeSettings = .init(), now: @escaping @Sendable () -> Date = { Date() },
            logger: Logger = Self.defaultLogger, stateFile: String? = nil
        ) {
            self.logger = logger
            self.stateFile = stateFile
            self.latency = latency
            self.environments = environments
            self.host = host
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
    /// The simulated apps' LiveRelayKit, reporting to the LiveRelay server each app is set up with.
    public let reporter: AppReporters
    /// The emulator's time, which tests and the control API move forward.
    public var clock: VirtualClock { devices.clock }
    public let certificates: EmulatorCertificates
    private let listeners: [PushEnvironment: Listeners]
    private let stateFile: EmulatorStateFile?

    private struct Listeners: Sendable {
        var push: HTTP2TLSServer
        var channelManagement: HTTP2TLSServer
        var latency: LatencySetting
        var ports: EmulatorPorts { EmulatorPorts(push: push.port, channelManagement: channelManagement.port) }
    }

    /// The environments played, sandbox first.
    public var environments: [PushEnvironment] { PushEnvironment.allCases.filter { listeners[$0] != nil } }

    /// How long `environment` takes to answer now (both its listeners); it must be one the emulator plays.
    public func latency(_ environment: PushEnvironment) -> LatencySetting {
        guard let listeners = listeners[environment] else { preconditionFailure("the emulator does not play \(environment.rawValue)") }
        return listeners.latency
    }

    /// Where `environment` listens; it must be one the emulator plays.
    public func ports(_ environment: PushEnvironment) -> EmulatorPorts {
        guard let listeners = listeners[environment] else { preconditionFailure("the emulator does not play \(environment.rawValue)") }
        return listeners.ports
    }

    private init(
        configuration: Configuration, registry: EmulatorRegistry, journal: EmulatorJournal, faults: EmulatorFaults,
        devices: DeviceFleet, certificates: EmulatorCertificates, listeners: [PushEnvironment: Listeners],
        stateFile: EmulatorStateFile?
    ) {
        self.stateFile = stateFile
        self.configuration = configuration
        self.registry = registry
        self.journal = journal
        self.faults = faults
        self.devices = devices
        // Each app's LiveRelayKit backlog beside the state file, as an app keeps it in its storage.
        self.reporter = AppReporters(fleet: devices, folder: stateFile.map { URL(fileURLWithPath: $0.path + ".liverelaykit") })
        self.certificates = certificates
        self.listeners = listeners
    }

    /// Starts every listener. Without `certificates`, a new CA and server certificate are made.
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
        let devices = DeviceFleet(clock: clock, settings: configuration.devices) { _, events in
            // Devices tell APNs which tokens to route, in which environment, and which to refuse.
            for event in events {
                switch event {
                case .tokenIssued(let token, let bundleID, let kind, let environment):
                    registry.register(EmulatorToken(hex: token, bundleID: bundleID, environment: environment, pushType: kind.pushType))
                case .tokenRetired(let token, let at, _):
                    registry.unregister(token: token, since: at)
                default:
                    break
                }
            }
        }
        let stateFile = configuration.stateFile.map { EmulatorStateFile(path: $0, logger: configuration.logger) }
        stateFile?.load(into: devices, registry: registry)
        let idle = configuration.idleTimeout.map {
            IdlePolicy(timeout: TimeAmount($0), debugData: APNsError(status: 400, reason: .idleTimeout).body)
        }
        var listeners: [PushEnvironment: Listeners] = [:]
        var started: [HTTP2TLSServer] = []
        do {
            for environment in PushEnvironment.allCases {
                guard let ports = configuration.environments[environment] else { continue }
                let latency = LatencySetting(configuration.latency[environment] ?? .none)
                func listen(_ service: APNsResponder.Service, port: Int) async throws -> HTTP2TLSServer {
                    let responder = APNsResponder(
                        service: service, environment: environment, settings: configuration, registry: registry, journal: journal,
                        faults: faults, devices: devices)
                    let server = try await HTTP2TLSServer.start(
                        host: configuration.host, port: port, certificates: certificates, responder: responder, idle: idle,
                        latency: latency, group: group, logger: configuration.logger)
                    started.append(server)
                    return server
                }
                let push = try await listen(.push, port: ports.push)
                listeners[environment] = Listeners(
                    push: push, channelManagement: try await listen(.channelManagement, port: ports.channelManagement), latency: latency)
            }
        } catch {
            for server in started { await server.shutdown() }
            throw error
        }
        return APNsEmulator(
            configuration: configuration, registry: registry, journal: journal, faults: faults,
            devices: devices, certificates: certificates, listeners: listeners, stateFile: stateFile)
    }

    /// How a client reaches `environment` of this emulator, trusting the CA at `caFile`.
    public func clientEnvironment(_ environment: PushEnvironment, caFile: String) -> APNsHosts {
        let ports = ports(environment)
        return APNsHosts(
            name: environment.rawValue,
            push: APNsEndpoint(host: configuration.host, port: ports.push, trustRoots: .caFile(caFile)),
            channelManagement: APNsEndpoint(host: configuration.host, port: ports.channelManagement, trustRoots: .caFile(caFile)))
    }

    /// How a client reaches each environment the emulator plays.
    public func clientEnvironments(caFile: String) -> [PushEnvironment: APNsHosts] {
        Dictionary(uniqueKeysWithValues: environments.map { ($0, clientEnvironment($0, caFile: caFile)) })
    }

    public func shutdown() async {
        for listeners in listeners.values {
            await listeners.push.shutdown()
            await listeners.channelManagement.shutdown()
        }
    }
}

/// Lets wall-clock time act on the devices (stale dates, limits, deferred pushes) once a second,
/// sends the apps' token reports and keeps the devices in the state file, until graceful
/// shutdown; then closes the listeners and writes the state file a last time.
extension APNsEmulator: Service {
    public func run() async throws {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.reporter.run() }
            if let stateFile {
                group.addTask {
                    while !Task.isCancelled {
                        stateFile.saveIfChanged(fleet: self.devices, registry: self.registry)
                        try? await Task.sleep(for: EmulatorStateFile.writeDelay)
                    }
                }
            }
            // Ends on cancellation too (another service failed to start): the cancelled sleep
            // returns at once, and the loop would spin.
            while !Task.isShuttingDownGracefully, !Task.isCancelled {
                devices.advanceAll()
                try? await cancelWhenGracefulShutdown { try await Task.sleep(for: .seconds(1)) }
            }
            group.cancelAll()
        }
        await shutdown()
        stateFile?.saveIfChanged(fleet: devices, registry: registry)
    }
}
