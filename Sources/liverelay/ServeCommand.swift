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
    @OptionGroup(title: "APNs (omit for the built-in emulator)") var connection: ConnectionOptions

    func validate() throws {
        guard (0...65535).contains(httpPort) else { throw ValidationError("http-port: must be 0 to 65535 (0: any free port)") }
        if let publicURL {
            guard let url = URL(string: publicURL), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false else {
                throw ValidationError("public-url: must be an http:// or https:// address, got \(publicURL)")
            }
        }
        _ = try timeouts()
        guard (1...100_000).contains(maxInFlight) else { throw ValidationError("max-in-flight: must be 1 to 100000, got \(maxInFlight)") }
        guard APNsRoutes.allowedConnections.contains(apnsConnections) else {
            throw ValidationError(
                "apns-connections: must be \(APNsRoutes.allowedConnections.lowerBound) to \(APNsRoutes.allowedConnections.upperBound), got \(apnsConnections)"
            )
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
        let store = try await DatabaseOption.openMigrated(location)
        let server = try await RelayServer.open(
            store: store,
            configuration: RelayConfiguration(
                budget: budgetPolicy,
                dispatch: DispatchPolicy(
                    inFlight: min(DispatchPolicy().inFlight.lowerBound, maxInFlight)...maxInFlight, lease: claimLease,
                    requestTimeout: .milliseconds(Int(connection.timeout * 1000)))),
            api: RelayAPIConfiguration(
                host: httpHost, port: httpPort, timeouts: timeouts, devices: emulator.map { DeviceGallery(fleet: $0.devices, templates: drawing) },
                publicURL: publicURL),
            apns: apns, logger: logger)
        for app in apps { _ = try await server.relay.registerApp(app) }
        // A database of the release before apps held one app's data: it is this one's when one is named.
        if apps.count == 1 { try await server.relay.adoptUnnamedData(bundleID: bundleID.value) }
        let madeKeys = try await InitialKeys.makeIfNone(server: server, firstApp: bundleID.value, in: directory)
        for contract in file?.contracts ?? [] {
            _ = try await server.relay.registerContract(contract, bundleID: bundleID.value)
        }
        for (app, contracts) in file?.appContracts ?? [:] {
            for contract in contracts { _ = try await server.relay.registerContract(contract, bundleID: app) }
        }

        // Shutdown runs in reverse order: the APNs client and the database close after the dispatcher has stopped.
        var services: [ServiceGroupConfiguration.ServiceConfiguration] = [
            .init(service: StoreService(store: store)), .init(service: APNsClientService(routes: apns)),
        ]
        // The demo iPhone's app reports its tokens with the initial client key, also on later starts.
        let demoClientKey = emulator == nil ? nil : (madeKeys[.client] ?? directory.keptInitialKeys()[.client])
        let announce = Announcement(
            host: httpHost, directory: directory, database: location, madeKeys: madeKeys, apps: apps.map(\.bundleID.value), emulator: emulator,
            demoClientKey: demoClientKey)
        services += server.services(logger: logger) { port in
            await announce.apiRunning(port: port)
        }.map { .init(service: $0) }
        if let emulator {
            services.append(.init(service: emulator))
            services.append(
                .init(
                    service: emulator.controlApplication(port: 0, timeouts: timeouts, templates: drawing, logger: logger) { port in
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

/// Apple's side for the demo: the emulator (both environments), a signing key it trusts, and one
/// iPhone whose app (a development build: sandbox) reports its tokens to the server once the
/// server's port is known.
enum DemoApple {
    static let bundleID = try! BundleID("com.example.liverelay.demo")
    static let deviceID = "demo-iphone"
    static let attributesType = ActivityAttributesType(
        name: "DeliveryAttributes",
        attributes: SwiftStruct("DeliveryAttributes", [.init("activityKey", .string), .init("orderNumber", .string)]),
        contentState: SwiftStruct("ContentState", [.init("status", .string), .init("etaMinutes", .int)]))

    static func start(
        caFile: String, stateFile: String, maximumConnections: Int
    ) async throws -> (emulator: APNsEmulator, apns: APNsRoutes, app: AppRegistration) {
        let emulator = try await APNsEmulator.start(APNsEmulator.Configuration(stateFile: stateFile))
        try emulator.certificates.writeCertificateAuthority(to: caFile)
        let key = P256.Signing.PrivateKey()
        let app = AppRegistration(bundleID: bundleID, teamID: "DEMOTEAM01", keyID: "DEMOKEY001", signingKey: key.pemRepresentation)
        emulator.registry.register(EmulatorKey(keyID: app.keyID, teamID: app.teamID, publicKey: key.publicKey))
        let apns = APNsRoutes(
            endpoints: emulator.clientEnvironments(caFile: caFile), now: emulator.clock.function, maximumConnections: maximumConnections)
        return (emulator, apns, app)
    }

    /// What draws the demo's attributes type on the simulated iPhones, and the templates of
    /// `folder` (whose own DeliveryAttributes, if any, win).
    static func templates(adding folder: ActivityTemplates?) throws -> ActivityTemplates {
        var templates = folder ?? ActivityTemplates()
        guard !templates.attributesTypes.contains(attributesType.name) else { return templates }
        for (region, text) in demoTemplates { try templates.add(text, for: region, of: attributesType.name) }
        return templates
    }

    /// The demo delivery's regions: the order, its status and how many minutes until it arrives.
    static let demoTemplates: [(TemplateRegion, String)] = [
        (
            .lockScreen,
            """
            <div class="tpl-row"><span class="tpl-small">Order {{attributes.orderNumber}}</span><span class="app-icon">D</span></div>
            <div class="tpl-row"><span class="tpl-big">{{state.status}}</span>{{^isEnded}}<span class="tpl-big">{{state.etaMinutes}} min</span>{{/isEnded}}</div>
            <div class="tpl-small">{{#isEnded}}This order is over.{{/isEnded}}{{^isEnded}}{{#isStale}}Waiting for news of the courier{{/isStale}}{{^isStale}}Estimated arrival{{/isStale}}{{/isEnded}}</div>
            """
        ),
        (.compactLeading, "<span class=\"app-icon\">D</span>"),
        (.compactTrailing, "{{state.etaMinutes}} min"),
        (.minimal, "{{state.etaMinutes}}′"),
        (.expandedLeading, "<span class=\"app-icon\">D</span> Order {{attributes.orderNumber}}"),
        (.expandedCenter, "{{state.status}}"),
        (.expandedTrailing, "<span class=\"tpl-big\">{{state.etaMinutes}} min</span>"),
        (
            .expandedBottom,
            "<div class=\"tpl-small\">Order {{attributes.orderNumber}}: {{state.status}}, arriving in {{state.etaMinutes}} minutes</div>"
        ),
    ]

    /// Installs the demo app, reporting to `url` with `clientKey`: its push-to-start token goes to
    /// the server at once. On a later start the iPhone kept in the data directory has it already,
    /// with its tokens and activities: it is launched, and reports what it has.
    static func installApp(on emulator: APNsEmulator, reportingTo url: String, clientKey: String) throws {
        if !emulator.devices.contains(deviceID) { try emulator.devices.addDevice(id: deviceID) }
        try emulator.reporter.setTarget(TokenReporting(url: url, clientKey: clientKey), deviceID: deviceID, bundleID: bundleID.value)
        if try emulator.devices.device(deviceID).apps[bundleID.value]?.attributeTypes[attributesType.name] != attributesType {
            try emulator.devices.install(SimulatedApp(bundleID: bundleID.value, attributeTypes: [attributesType]), on: deviceID)
        }
    }
}

/// The first keys: made on the first start and kept in the data directory (0600), where later
/// starts and the benchmarks read them; their secrets are printed only when they are made.
enum InitialKeys {
    /// The keys made now, when the store had none; empty on later starts. The server and client keys are `firstApp`'s.
    static func makeIfNone(server: RelayServer, firstApp: String, in directory: DataDirectory) async throws -> [APIKeyScope: String] {
        let made = try await server.bootstrapKeys(firstApp: firstApp)
        guard !made.isEmpty else { return [:] }
        let json = JSONValue.object(APIKeyScope.allCases.compactMap { scope in made[scope].map { (scope.rawValue, .string($0)) } })
        // The secrets exist nowhere else: a start that cannot keep them must not go on.
        guard FileManager.default.createFile(atPath: directory.initialKeys, contents: Data(json.serialized), attributes: [.posixPermissions: 0o600])
        else { throw ValidationError("data-dir: cannot write \(directory.initialKeys)") }
        return made
    }
}

/// Prints where everything is once both listeners are up, and installs the demo app then.
actor Announcement {
    let host: String
    let directory: DataDirectory
    let database: StoreLocation
    /// The secrets of keys made on this start: shown now and never again.
    let madeKeys: [APIKeyScope: String]
    /// The apps served, the first one's the initial client key.
    let apps: [String]
    let emulator: APNsEmulator?
    let demoClientKey: String?
    private var apiPort: Int?
    private var controlPort: Int?

    init(
        host: String, directory: DataDirectory, database: StoreLocation, madeKeys: [APIKeyScope: String], apps: [String],
        emulator: APNsEmulator?, demoClientKey: String?
    ) {
        (self.host, self.directory, self.database, self.madeKeys, self.apps, self.emulator, self.demoClientKey) =
            (host, directory, database, madeKeys, apps, emulator, demoClientKey)
    }

    func apiRunning(port: Int) {
        apiPort = port
        printIfReady()
    }
    func controlRunning(port: Int) {
        controlPort = port
        printIfReady()
    }

    private func printIfReady() {
        guard let apiPort, emulator == nil || controlPort != nil else { return }
        let api = "http://\(host):\(apiPort)"
        let keys =
            madeKeys.isEmpty
            ? "made on the first start and kept in \(directory.initialKeys); `liverelay keys create` makes more"
            : "admin \(madeKeys[.admin] ?? "-")  server \(madeKeys[.server] ?? "-")  client \(madeKeys[.client] ?? "-")  (shown once; kept in \(directory.initialKeys))"
        var text = """
            LiveRelay server:   \(api)  (OpenAPI document: \(api)/openapi.json)
            dashboard:          \(api)/dashboard  (sign in with the admin key)
            data:               \(database)
            API keys:           \(keys)

            """
        if let emulator, let controlPort, let client = demoClientKey {
            // The control API asks for no key: it listens on the emulator's loopback host, whatever --http-host says.
            let control = "http://\(emulator.configuration.host):\(controlPort)"
            do {
                try DemoApple.installApp(on: emulator, reportingTo: api, clientKey: client)
                text += """
                    APNs:               built-in emulator (sandbox and production); control API \(control)
                    demo device:        \(DemoApple.deviceID), app \(DemoApple.bundleID.value) (a development build: sandbox tokens), attributes type \(DemoApple.attributesType.name); its push-to-start token is reported to the server
                    watch it:           \(api)/dashboard/devices (drawn), or curl -s \(control)/devices/\(DemoApple.deviceID)/presentation

                    """
            } catch {
                text += "demo device:        could not be installed: \(error)\n"
            }
        } else {
            text += "apps:               \(apps.joined(separator: ", ")) (the server and client keys are \(apps[0])'s)\n"
        }
        // The names the README's tours use, ready to paste; the secrets only when made now (later,
        // read from the keys file).
        var names = ["API=\(api)"]
        if let emulator, let controlPort { names.append("E=http://\(emulator.configuration.host):\(controlPort)") }
        for (name, scope) in [("S", APIKeyScope.server), ("C", .client), ("A", .admin)] {
            names.append("\(name)=" + (madeKeys[scope] ?? "$(jq -r .\(scope.rawValue) \(directory.initialKeys))"))
        }
        // A key of its own on each start (from the time: no two starts share a second), since a
        // key, once started, cannot be started again.
        let key = "order-\(Int(Date().timeIntervalSince1970) % 100_000)"
        text += """
            shell:              export \(names.joined(separator: " "))
            try:
              curl -s -X POST $API/v1/activities/\(key)/start -H "Authorization: Bearer $S" -H 'content-type: application/json' \\
                -d '{"attributesType": "DeliveryAttributes", "attributes": {"activityKey": "\(key)", "orderNumber": "\(key.dropFirst(6))"},
                     "contentState": {"status": "preparing", "etaMinutes": 30}, "alert": {"title": "Order \(key.dropFirst(6))", "body": "Preparing your order"},
                     "audience": {"everyone": true}}'

            """
        FileHandle.standardOutput.write(Data(text.utf8))
    }
}

/// Closes the store when the group shuts down.
struct StoreService: Service {
    let store: any RelayStore

    func run() async throws {
        try? await gracefulShutdown()
        await store.close()
    }
}

/// Closes the APNs clients' connections when the group shuts down.
struct APNsClientService: Service {
    let routes: APNsRoutes

    func run() async throws {
        try? await gracefulShutdown()
        await routes.shutdown()
    }
}

/// `--config`: the same settings as the options, in a file. Options and environment variables win.
///
///     {"apns": {"keyFile": "…", "keyID": "…", …}, "budget": {"priority10PerHour": 12, "frequentPriority10PerHour": 120},
///      "apps": [{"bundleID": "…", "keyFile": "…", "keyID": "…", "teamID": "…", "contracts": [{…}]}],
///      "contracts": [{"name": "DeliveryAttributes", "attributes": {…}, "contentState": {…}}]}
///
/// The top-level contracts are the first app's (the one the flags name, else the first listed).
struct ServeConfigFile: APIRequestBody {
    static let fields = ["database", "apns", "apps", "budget", "contracts"]
    /// Where the data lives (`--database` and `LIVERELAY_DATABASE` win).
    var database: String?
    static let appFields = ["bundleID", "keyFile", "keyID", "teamID", "contracts"]
    var apns: [String: String] = [:]
    /// More apps, each with its key file (read now).
    var apps: [AppRegistration] = []
    var budget: BudgetPolicy?
    /// Contracts registered on every start: the first app's, and each listed app's by bundle ID.
    var contracts: [ActivityContract] = []
    var appContracts: [String: [ActivityContract]] = [:]

    init(path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("config: cannot read \(path)") }
        do {
            self = try Self.decode(json: [UInt8](data))
            // Schemas keep their field order, so they are read from the JSON as written rather than decoded.
            let json = try JSONValue(parsing: [UInt8](data))
            contracts = try Self.contracts(json["contracts"], path: "contracts")
            for (index, entry) in (json["apps"]?.arrayElements ?? []).enumerated() {
                guard let bundleID = entry["bundleID"]?.stringValue else { continue }
                appContracts[bundleID, default: []] += try Self.contracts(entry["contracts"], path: "apps[\(index)].contracts")
            }
        } catch {
            throw ValidationError("config \(path): \(error)")
        }
    }

    private static func contracts(_ given: JSONValue?, path: String) throws -> [ActivityContract] {
        guard let given, given != .null else { return [] }
        guard let items = given.arrayElements else { throw JSONFieldError(code: "wrong_type", message: "must be an array of contracts", field: path) }
        var contracts: [ActivityContract] = []
        for (index, item) in items.enumerated() {
            do { contracts.append(try ActivityContract(json: item, path: "\(path)[\(index)]")) } catch { throw JSONFieldError(error) }
        }
        return contracts
    }

    init(from decoder: any Decoder) throws {
        let root = try decoder.container(keyedBy: JSONKey.self)
        if root.contains(JSONKey("apns")), try !root.decodeNil(forKey: JSONKey("apns")) {
            let apnsBody = try root.superDecoder(forKey: JSONKey("apns"))
            try apnsBody.refuseUnknownKeys(Self.apnsFields.map(\.key))
            let settings = try apnsBody.container(keyedBy: JSONKey.self)
            for (key, _) in Self.apnsFields {
                if let value = try settings.decodeIfPresent(String.self, forKey: JSONKey(key)) { apns[key] = value }
            }
        }
        if root.contains(JSONKey("apps")), try !root.decodeNil(forKey: JSONKey("apps")) {
            var entries = try root.nestedUnkeyedContainer(forKey: JSONKey("apps"))
            while !entries.isAtEnd {
                let entry = try entries.superDecoder()
                try entry.refuseUnknownKeys(Self.appFields)
                let fields = try entry.container(keyedBy: JSONKey.self)
                let keyFile = try fields.requireNonEmptyString(JSONKey("keyFile"))
                guard let pem = try? String(contentsOfFile: keyFile, encoding: .utf8) else {
                    throw DecodingError.dataCorruptedError(forKey: JSONKey("keyFile"), in: fields, debugDescription: "cannot be read at \(keyFile)")
                }
                let bundle = try fields.requireNonEmptyString(JSONKey("bundleID"))
                do {
                    apps.append(
                        AppRegistration(
                            bundleID: try BundleID(bundle), teamID: try fields.requireNonEmptyString(JSONKey("teamID")),
                            keyID: try fields.requireNonEmptyString(JSONKey("keyID")), signingKey: pem))
                } catch let error as LiveActivityValidationError {
                    throw DecodingError.dataCorruptedError(forKey: JSONKey("bundleID"), in: fields, debugDescription: error.message)
                }
            }
        }
        database = try root.decodeIfPresent(String.self, forKey: JSONKey("database"))
        if root.contains(JSONKey("budget")), try !root.decodeNil(forKey: JSONKey("budget")) {
            let budgetBody = try root.superDecoder(forKey: JSONKey("budget"))
            try budgetBody.refuseUnknownKeys(["priority10PerHour", "frequentPriority10PerHour"])
            let numbers = try budgetBody.container(keyedBy: JSONKey.self)
            var policy = BudgetPolicy()
            if let value = try numbers.integer(JSONKey("priority10PerHour"), in: BudgetPolicy.allowed) { policy.priority10PerHour = value }
            if let value = try numbers.integer(JSONKey("frequentPriority10PerHour"), in: BudgetPolicy.allowed) {
                policy.frequentPriority10PerHour = value
            }
            budget = policy
        }
    }

    /// Config keys and the environment variables that take precedence over them.
    static let apnsFields: [(key: String, variable: String)] = [
        ("keyFile", "LIVERELAY_APNS_KEY_FILE"), ("keyID", "LIVERELAY_APNS_KEY_ID"), ("teamID", "LIVERELAY_APNS_TEAM_ID"),
        ("bundleID", "LIVERELAY_APNS_BUNDLE_ID"), ("environment", "LIVERELAY_APNS_ENVIRONMENT"), ("host", "LIVERELAY_APNS_HOST"),
        ("caFile", "LIVERELAY_APNS_CA_FILE"),
    ]

    func fill(_ connection: inout ConnectionOptions) {
        func pick(_ key: String, _ variable: String) -> String? {
            ProcessInfo.processInfo.environment[variable].flatMap { $0.isEmpty ? nil : $0 } == nil ? apns[key] : nil
        }
        connection.keyFile = connection.keyFile ?? pick("keyFile", "LIVERELAY_APNS_KEY_FILE")
        connection.keyID = connection.keyID ?? pick("keyID", "LIVERELAY_APNS_KEY_ID")
        connection.teamID = connection.teamID ?? pick("teamID", "LIVERELAY_APNS_TEAM_ID")
        connection.bundleID = connection.bundleID ?? pick("bundleID", "LIVERELAY_APNS_BUNDLE_ID")
        connection.environment = connection.environment ?? pick("environment", "LIVERELAY_APNS_ENVIRONMENT")
        connection.host = connection.host ?? pick("host", "LIVERELAY_APNS_HOST")
        connection.caFile = connection.caFile ?? pick("caFile", "LIVERELAY_APNS_CA_FILE")
    }
}

extension ConnectionOptions {
    /// Whether a signing key was given, by option or environment variable.
    var hasCredentials: Bool {
        keyFile != nil || ProcessInfo.processInfo.environment["LIVERELAY_APNS_KEY_FILE"].map { !$0.isEmpty } == true
    }

    /// The one app the flags (or `LIVERELAY_APNS_*`) name, with their key.
    func appRegistration() throws -> AppRegistration {
        let key = try clientConfiguration().signingKey
        let path = keyFile ?? ProcessInfo.processInfo.environment["LIVERELAY_APNS_KEY_FILE"] ?? ""
        guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else { throw ValidationError("key-file: cannot read \(path)") }
        return AppRegistration(bundleID: try resolvedBundleID(), teamID: key.teamID, keyID: key.keyID, signingKey: pem)
    }
}
