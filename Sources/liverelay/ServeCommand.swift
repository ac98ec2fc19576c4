import APNs
import APNsEmulator
import ArgumentParser
import Crypto
import Foundation
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle
import SimulatedDevices
import UnixSignals
import WebPages

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the LiveRelay server: the HTTP API, the durable outbox and its dispatcher, on SQLite or PostgreSQL.",
        discussion: """
            Without APNs credentials it runs Apple's side in-process: the emulator (sandbox
            and production) and one simulated iPhone (demo-iphone) whose app reports its
            tokens to this server, so the whole lifecycle runs without an Apple account.
            With credentials (--key-file/--key-id/--team-id/--bundle-id, the
            LIVERELAY_APNS_* environment variables, or a --config file) it sends to real
            APNs: each token to the environment it was registered with, sandbox or
            production, unless --environment names one.

            The first start makes an admin, a server and a client API key, prints them once
            and keeps them in <data-dir>/initial-keys.json (readable by you only). Stops
            gracefully on SIGINT or SIGTERM.
            """)

    @Option(
        help: ArgumentHelp(
            "Where the SQLite database (unless --database names another), the initial keys and the built-in emulator's CA and simulated devices live.",
            valueName: "path"))
    var dataDir: String = "liverelay-data"
    @OptionGroup var database: DatabaseOption
    @OptionGroup var masterKey: MasterKeyOption
    @Option(help: "Address of the HTTP API.") var httpHost: String = "127.0.0.1"
    @Option(help: "Port of the HTTP API (0: any free port).") var httpPort: Int = 8080
    @Option(
        help: ArgumentHelp(
            "Where people reach the API and dashboard through a proxy in front of it; https://… makes the dashboard's cookies Secure (so does a proxy's X-Forwarded-Proto: https).",
            valueName: "url"))
    var publicURL: String?
    @Option(
        help: ArgumentHelp(
            "A JSON config file: {\"database\": \"postgres://…\", \"apns\": {keyFile, keyID, teamID, bundleID, environment}, \"apps\": [{bundleID, keyFile, keyID, teamID, contracts}], \"budget\": {…}, \"contracts\": [{name, attributes, contentState}] (the first app's)}.",
            valueName: "path"))
    var config: String?
    @Option(
        help: ArgumentHelp(
            "Close an API connection with no request in progress after this long; a request's head must arrive within it too.", valueName: "seconds"))
    var idleTimeout: Double = 60
    @Option(help: ArgumentHelp("A request body must arrive whole within this long (408 beyond).", valueName: "seconds"))
    var bodyTimeout: Double = 30
    @Option(help: ArgumentHelp("Priority-10 pushes per activity per hour with priority \"auto\".", valueName: "count"))
    var budget: Int?
    @Option(help: ArgumentHelp("The same with frequent updates enabled on the device.", valueName: "count"))
    var frequentBudget: Int?
    @Option(
        help: ArgumentHelp(
            "How long a push claimed for sending waits for its sender's answer before any instance sends it again: how soon the others take over a dead instance's pushes.",
            valueName: "seconds"))
    var claimLease: Double = DispatchPolicy().lease
    @Option(
        help: ArgumentHelp(
            "A push-to-start APNs accepted, whose activity no device reported within this long, is an activity.start_unconfirmed event.",
            valueName: "seconds"))
    var startConfirmationWindow: Double = RelayConfiguration().startConfirmationWindow
    @Option(
        help: ArgumentHelp(
            "Days the history is kept: pushes with their payloads, events, webhook deliveries, finished schedules.", valueName: "days"))
    var historyDays: Int = RetentionPolicy().historyDays
    @Option(help: ArgumentHelp("Days an ended activity is kept after its end, with its tokens and channels.", valueName: "days"))
    var endedDays: Int = RetentionPolicy().endedDays
    @Option(
        help: ArgumentHelp(
            "Which addresses webhook endpoints may have: public, loopback (public and this machine's; the default with the built-in emulator) or any (also private and link-local networks). Otherwise public only.",
            valueName: "public|loopback|any"))
    var webhookAddresses: WebhookAddresses?
    @Option(
        help: ArgumentHelp(
            "Pushes this instance keeps in flight to APNs at most; below that, as many as the measured round trip needs.", valueName: "count"))
    var maxInFlight: Int = DispatchPolicy().inFlight.upperBound
    @Option(
        help: ArgumentHelp(
            "HTTP/2 connections to APNs at most for each app key and environment; more open as the pushes in flight need.", valueName: "count"))
    var apnsConnections: Int = 16
    @Option(
        help: ArgumentHelp(
            "A folder of Mustache templates, <AttributesType>/<region>.mustache, that fill the drawn simulated iPhones' regions (the built-in emulator's, on the dashboard's devices page).",
            valueName: "path"))
    var templates: String?
    @Option(help: ArgumentHelp("The log's lines: text, or json (one object a line, on standard error) for log collectors.", valueName: "text|json"))
    var logFormat: LogFormat = .text
    @Option(
        help: ArgumentHelp(
            "Export traces as OTLP over HTTP to this collector (its /v1/traces unless the address has a path); OTEL_* variables tune sampling and headers.",
            valueName: "url"))
    var otlpEndpoint: String?
    @OptionGroup(title: "APNs (omit for the built-in emulator)") var connection: ConnectionOptions

    func validate() throws {
        guard (0...65535).contains(httpPort) else { throw ValidationError("http-port: must be 0 to 65535 (0: any free port)") }
        if let publicURL {
            guard let url = URL(string: publicURL), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false else {
                throw ValidationError("public-url: must be an http:// or https:// address, got \(publicURL)")
            }
        }
        _ = try timeouts()
        if let otlpEndpoint, let problem = TraceExport.problem(otlpEndpoint) { throw ValidationError("otlp-endpoint: \(problem)") }
        guard (1...100_000).contains(maxInFlight) else { throw ValidationError("max-in-flight: must be 1 to 100000, got \(maxInFlight)") }
        guard APNsRoutes.allowedConnections.contains(apnsConnections) else {
            throw ValidationError(
                "apns-connections: must be \(APNsRoutes.allowedConnections.lowerBound) to \(APNsRoutes.allowedConnections.upperBound), got \(apnsConnections)"
            )
        }
        guard RelayConfiguration.startConfirmationWindows.contains(startConfirmationWindow) else {
            throw ValidationError("start-confirmation-window: must be 10 to 86400 seconds, got \(startConfirmationWindow)")
        }
        for (name, days) in [("history-days", historyDays), ("ended-days", endedDays)] where !RetentionPolicy.allowedDays.contains(days) {
            throw ValidationError(
                "\(name): must be \(RetentionPolicy.allowedDays.lowerBound) to \(RetentionPolicy.allowedDays.upperBound) days, got \(days)")
        }
        guard (1...3600).contains(claimLease) else { throw ValidationError("claim-lease: must be 1 to 3600 seconds, got \(claimLease)") }
        guard connection.timeout > 0, connection.timeout <= 3600 else {
            throw ValidationError("timeout: must be more than 0 and at most 3600 seconds, got \(connection.timeout)")
        }
        // A claim must outlive the push it covers: one still waiting for APNs' answer when its
        // lease ran out would be sent again by another instance.
        guard claimLease > 2 * connection.timeout else {
            throw ValidationError(
                "claim-lease: must be more than twice the APNs request timeout (--timeout \(connection.timeout) s), got \(claimLease)")
        }
        for (name, value) in [("budget", budget), ("frequent-budget", frequentBudget)] {
            if let value, !BudgetPolicy.allowed.contains(value) {
                throw ValidationError("\(name): must be \(BudgetPolicy.allowed.lowerBound) to \(BudgetPolicy.allowed.upperBound) pushes an hour")
            }
        }
    }

    /// The API's timeouts (also the built-in emulator's control API's).
    func timeouts() throws -> HTTPTimeouts {
        func duration(_ seconds: Double, _ name: String) throws -> Duration {
            let range = HTTPTimeouts.allowedSeconds
            guard range.contains(seconds) else {
                throw ValidationError("\(name): must be \(range.lowerBound) to \(range.upperBound) seconds, got \(seconds)")
            }
            return .milliseconds(seconds * 1000)
        }
        return HTTPTimeouts(idle: try duration(idleTimeout, "idle-timeout"), body: try duration(bodyTimeout, "body-timeout"))
    }

    func run() async throws {
        logFormat.bootstrap()
        let tracing = try otlpEndpoint.map { try TraceExport.bootstrap(endpoint: $0, logger: Logger(label: "liverelay.traces")) }
        // Before anything starts: a busy port is said in one line, not among the other services' stops.
        try await Self.checkListenable(host: httpHost, port: httpPort)
        var connection = connection
        let file = try config.map(ServeConfigFile.init(path:))
        let templateFolder = try templates.map(ActivityTemplates.read)
        file?.fill(&connection)
        let directory = DataDirectory(dataDir)
        try directory.prepare()
        let timeouts = try timeouts()
        var logger = Logger(label: "liverelay")
        logger.logLevel = .notice

        // The apps: the one the flags name, then the config file's; none means the demo's.
        var apps = file?.apps ?? []
        if connection.hasCredentials { apps.insert(try connection.appRegistration(), at: 0) }
        let emulator: APNsEmulator?
        let apns: APNsRoutes
        if apps.isEmpty {
            let demo = try await DemoApple.start(
                caFile: directory.emulatorCA, stateFile: directory.emulatorDevices, maximumConnections: apnsConnections)
            (emulator, apns, apps) = (demo.emulator, demo.apns, [demo.app])
        } else {
            guard templates == nil else {
                throw ValidationError("templates: they draw the built-in emulator's devices, and with APNs credentials there is none")
            }
            apns = APNsRoutes(endpoints: try connection.servedEnvironments(), maximumConnections: apnsConnections)
            emulator = nil
        }
        let drawing = try DemoApple.templates(adding: templateFolder)
        let bundleID = apps[0].bundleID

        var budgetPolicy = file?.budget ?? BudgetPolicy()
        if let budget { budgetPolicy.priority10PerHour = budget }
        if let frequentBudget { budgetPolicy.frequentPriority10PerHour = frequentBudget }
        let location = database.location(in: directory, configured: file?.database)
        // Held for as long as this process runs: nothing that must not run beside a server starts.
        if case .sqlite(let path) = location { try ServingLock.holdShared(database: path) }
        let sealing = try masterKey.load(for: location, in: directory)
        // The store runs around the service group: it is used before the group starts, and its
        // connections close only after every service has stopped.
        try await DatabaseOption.withMigratedStore(location) { store in
            let server: RelayServer
            do {
                server = try await RelayServer.open(
                    store: store,
                    configuration: RelayConfiguration(
                        budget: budgetPolicy,
                        dispatch: DispatchPolicy(
                            inFlight: min(DispatchPolicy().inFlight.lowerBound, maxInFlight)...maxInFlight, lease: claimLease,
                            requestTimeout: .milliseconds(Int(connection.timeout * 1000))),
                        startConfirmationWindow: startConfirmationWindow,
                        // The demo's receiver runs on the same machine: loopback unless told.
                        webhooks: WebhookRules(addresses: webhookAddresses ?? (emulator == nil ? .public : .loopback)),
                        retention: RetentionPolicy(historyDays: historyDays, endedDays: endedDays)),
                    api: RelayAPIConfiguration(
                        host: httpHost, port: httpPort, timeouts: timeouts,
                        devices: emulator.map { DeviceGallery(fleet: $0.devices, templates: drawing) },
                        publicURL: publicURL),
                    apns: apns, masterKey: sealing.key, logger: logger)
            } catch let error as MasterKeyError {
                // A key made just now cannot open what another sealed (a restored backup without its key).
                guard case .made(let path) = sealing.source, case .otherKey(_, let sealedWith, _) = error else { throw error }
                try? FileManager.default.removeItem(atPath: path)
                throw StartFailure(
                    description:
                        "the database's signing keys are sealed with master key \(sealedWith), and there is none at \(path): put that key there, or give --master-key-file"
                )
            }
            // Started with the data directory's key: the one a rotation replaced is no longer needed.
            if sealing.source == .file(directory.masterKey), FileManager.default.fileExists(atPath: directory.previousMasterKey) {
                try? FileManager.default.removeItem(atPath: directory.previousMasterKey)
                logger.notice("started with the rotated master key: the previous one (\(directory.previousMasterKey)) is removed")
            }
            if case .made(let path) = sealing.source {
                logger.notice(
                    "made a master key at \(path): it seals the apps' signing keys in the database; keep a copy, apart from the database's backups")
            }
            // A database of the release before apps held one app's data: it is this one's when one is named.
            if apps.count == 1 {
                _ = try await server.relay.registerApp(apps[0])
                try await server.relay.adoptUnnamedData(bundleID: bundleID.value)
            }
            let contracts =
                (file?.contracts ?? []).map { (app: bundleID.value, contract: $0) }
                + (file?.appContracts ?? [:]).sorted { $0.key < $1.key }.flatMap { app, contracts in contracts.map { (app: app, contract: $0) } }
            let madeKeys = try await server.prepare(apps: apps, contracts: contracts)
            try InitialKeys.keep(madeKeys, in: directory)

            // Shutdown runs in reverse order: the APNs client closes after the dispatcher has stopped
            // (and the store after the whole group).
            var services: [ServiceGroupConfiguration.ServiceConfiguration] = [.init(service: APNsClientService(routes: apns))]
            // Stopped last, it exports the spans of everything that stopped before it.
            if let exporter = tracing { services.insert(.init(service: exporter), at: 0) }
            // The demo iPhone's app reports its tokens with the initial client key, also on later starts.
            let demoClientKey =
                emulator == nil ? nil : try await InitialKeys.demoClientKey(server: server, made: madeKeys, app: bundleID.value, in: directory)
            let served = Set(apps.map(\.bundleID.value))
            let announce = Announcement(
                host: httpHost, directory: directory, database: location, madeKeys: madeKeys, apps: apps.map(\.bundleID.value), emulator: emulator,
                demoClientKey: demoClientKey, grants: try await server.relay.apps().filter { served.contains($0.bundleID) })
            services += server.services(logger: logger) { port in
                await announce.apiRunning(port: port)
            }.map { .init(service: $0) }
            if let emulator {
                services.append(.init(service: emulator))
                services.append(
                    .init(
                        service: emulator.controlApplication(port: 0, timeouts: timeouts, templates: drawing, logger: logger) { port in
                            // It takes no key on loopback: never a webhook's target.
                            server.relay.keepWebhooksOff(loopbackPort: port)
                            await announce.controlRunning(port: port)
                        }))
            }
            do {
                // In flight at a SIGTERM, a push has its request timeout to be answered and recorded.
                let graceful = Duration.milliseconds(Int(connection.timeout * 1000)) + .seconds(5)
                try await ServiceGroup(configuration: .stoppedBySignals(services, graceful: graceful, logger: logger)).run()
            } catch let error as IOError where error.errnoCode == EADDRINUSE {
                // Taken since the check: the other services were cancelled and have stopped.
                throw StartFailure.portInUse(host: httpHost, port: httpPort)
            }
        }
        if let profile = SQLiteStatementProfile.shared {
            try profile.write()
            logger.notice("the store's statements, by CPU, written to \(profile.file)")
        }
        logger.notice("stopped")
    }

    /// Fails at once, naming the cause, when the API cannot listen on `host:port`.
    static func checkListenable(host: String, port: Int) async throws {
        guard port != 0 else { return }
        do {
            let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                .bind(host: host, port: port).get()
            try await channel.close()
        } catch let error as IOError where error.errnoCode == EADDRINUSE {
            throw StartFailure.portInUse(host: host, port: port)
        } catch {
            throw StartFailure(description: "cannot listen on \(host):\(port) (--http-host, --http-port): \(error)")
        }
    }
}

/// Why `serve` could not start, in one line (printed as `Error: …`, exit 1).
struct StartFailure: Error, CustomStringConvertible {
    let description: String

    static func portInUse(host: String, port: Int) -> StartFailure {
        StartFailure(description: "port \(port) is in use on \(host): stop what listens there, or choose another --http-port")
    }
}

extension WebhookAddresses: ExpressibleByArgument {}
