import APNsEmulator
import ArgumentParser
import Foundation
import LiveActivityKit
import Logging
import ServiceLifecycle
import SimulatedDevices
import UnixSignals
import WebPages

struct Emulator: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run Apple's push service on loopback: HTTP/2 + TLS, provider tokens, every documented error.",
        discussion: """
            Both environments at once, disjoint as Apple's: sandbox and production each
            have a port for device and broadcast pushes and one for channel management, and
            a token of one is refused by the other. The CA that signs the server
            certificate is written to --ca-file; give it to clients (liverelay --ca-file,
            curl --cacert). Register the key that signs your provider tokens with
            --key-file/--key-id/--team-id, and the tokens to accept with --token
            <hex>:<bundle id>[:production] (simulated devices will issue them later), or
            register both through the control API (to start:
            curl http://<host>:<control port>/emulator). Stops on SIGINT or SIGTERM.
            """)

    @Option(help: "Address to listen on.") var host: String = "127.0.0.1"
    @Option(help: "Port of sandbox device and broadcast pushes (0: any free port).") var port: Int = 0
    @Option(help: "Port of sandbox channel management (0: any free port).") var managementPort: Int = 0
    @Option(help: "Port of production device and broadcast pushes (0: any free port).") var productionPort: Int = 0
    @Option(help: "Port of production channel management (0: any free port).") var productionManagementPort: Int = 0
    @Option(help: "Port of the JSON control API: keys, tokens, journal, faults (0: any free port).") var controlPort: Int = 0
    @Option(help: ArgumentHelp("Close connections idle this many seconds with GOAWAY IdleTimeout (default: never).", valueName: "seconds"))
    var idleTimeout: Int?
    @Option(help: ArgumentHelp("Where to write the CA certificate (PEM).", valueName: "path"))
    var caFile: String = "liverelay-emulator-ca.pem"
    @Option(help: ArgumentHelp("A .p8 key whose tokens are accepted (its public half is used).", valueName: "path")) var keyFile: String?
    @Option(help: ArgumentHelp("The key id of --key-file.", valueName: "id")) var keyID: String?
    @Option(help: ArgumentHelp("The team id of --key-file.", valueName: "id")) var teamID: String?
    @Option(
        help: ArgumentHelp("A device token to route, as <hex>:<bundle id>, sandbox unless it ends in :production (repeatable).", valueName: "token"))
    var token: [String] = []
    @Option(
        help: ArgumentHelp(
            "A file of device tokens to route, one <hex>:<bundle id>[:production] a line, as --token (many tokens, for load).", valueName: "path"))
    var tokensFile: String?
    @Option(help: "SETTINGS_MAX_CONCURRENT_STREAMS after the first authenticated push (before it: 1).")
    var streamLimit: Int = 1000
    @Flag(help: "Accept apns-priority 1 on Live Activity device pushes.") var allowPriority1 = false
    @Option(help: "Requests the journal keeps (the oldest go first); its counts cover every request.") var journalCapacity: Int = 10_000
    @Option(
        help: ArgumentHelp(
            "A folder of Mustache templates, <AttributesType>/<region>.mustache, that fill the drawn devices' regions (the control port's page).",
            valueName: "path"))
    var templates: String?
    @Option(
        help: ArgumentHelp(
            "Answer every request this many milliseconds late, as APNs at a distance does: 100, or 40-120 drawn for each request; for one environment, sandbox=… or production=… (repeatable; default 0).",
            valueName: "ms"))
    var latency: [String] = []
    @Option(
        help: ArgumentHelp(
            "Push-to-start starts each app on a simulated iPhone may have an hour; ActivityKit refuses the rest (Apple publishes no figure: 10 is an assumption).",
            valueName: "count"))
    var pushToStartBudget: Int = DeviceRuntimeSettings().pushToStartBudgetPerHour

    func validate() throws {
        let ports = [
            ("port", port), ("management-port", managementPort), ("production-port", productionPort),
            ("production-management-port", productionManagementPort), ("control-port", controlPort),
        ]
        for (name, value) in ports
        where !(0...65535).contains(value) {
            throw ValidationError("\(name): must be 0 to 65535 (0: any free port), got \(value)")
        }
        _ = try latencies()
        if let idleTimeout, !(1...86_400).contains(idleTimeout) {
            throw ValidationError("idle-timeout: must be 1 to 86400 seconds, got \(idleTimeout)")
        }
        // SETTINGS_MAX_CONCURRENT_STREAMS is a 31-bit value in practice (RFC 9113 §6.5.2).
        guard (1...Int(Int32.max)).contains(streamLimit) else {
            throw ValidationError("stream-limit: must be 1 to \(Int32.max), got \(streamLimit)")
        }
        guard (1...10_000_000).contains(journalCapacity) else {
            throw ValidationError("journal-capacity: must be 1 to 10000000, got \(journalCapacity)")
        }
        guard (0...100_000).contains(pushToStartBudget) else {
            throw ValidationError("push-to-start-budget: must be 0 to 100000 starts an hour, got \(pushToStartBudget)")
        }
    }

    /// `--latency`: a figure for both environments, then any for one of them.
    func latencies() throws -> [PushEnvironment: APNsLatency] {
        var latencies: [PushEnvironment: APNsLatency] = [:]
        for entry in latency.sorted(by: { !$0.contains("=") && $1.contains("=") }) {
            let parts = entry.split(separator: "=", maxSplits: 1).map(String.init)
            var environments = PushEnvironment.allCases
            if parts.count == 2 {
                guard let one = PushEnvironment(rawValue: parts[0]) else {
                    throw ValidationError("latency: an environment is sandbox or production, got \"\(parts[0])\"")
                }
                environments = [one]
            }
            do throws(LatencyError) {
                let value = try APNsLatency(parsing: parts.last ?? "")
                for environment in environments { latencies[environment] = value }
            } catch {
                throw ValidationError("latency: \(error)")
            }
        }
        return latencies
    }

    func run() async throws {
        func parse(_ entry: String, _ place: String) throws -> EmulatorToken {
            let parts = entry.split(separator: ":", omittingEmptySubsequences: false).map(String.init)
            guard (2...3).contains(parts.count), let hex = try? DeviceToken(parts[0]).hex, (try? BundleID(parts[1])) != nil,
                let environment = parts.count == 3 ? PushEnvironment(rawValue: parts[2]) : .sandbox
            else {
                throw ValidationError("\(place): must be <hex>:<bundle id> or <hex>:<bundle id>:<sandbox|production>, got \"\(entry)\"")
            }
            return EmulatorToken(hex: hex, bundleID: parts[1], environment: environment)
        }
        var tokens = try token.map { try parse($0, "token") }
        if let tokensFile {
            guard let text = try? String(contentsOfFile: tokensFile, encoding: .utf8) else {
                throw ValidationError("tokens-file: cannot read \(tokensFile)")
            }
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where !line.trimmingCharacters(in: .whitespaces).isEmpty {
                tokens.append(try parse(line.trimmingCharacters(in: .whitespaces), "tokens-file line \(number + 1)"))
            }
        }
        let drawing = try templates.map(ActivityTemplates.read) ?? ActivityTemplates()
        let registry = EmulatorRegistry()
        switch (keyFile, keyID, teamID) {
        case (nil, nil, nil): break
        case (let keyFile?, let keyID?, let teamID?):
            do {
                let pem = try String(contentsOfFile: keyFile, encoding: .utf8)
                registry.register(try EmulatorKey(p8PEM: pem, keyID: keyID, teamID: teamID))
            } catch {
                throw ValidationError("key-file: cannot read a P-256 .p8 key at \(keyFile): \(error)")
            }
        default:
            throw ValidationError("key-file, key-id and team-id go together")
        }
        tokens.forEach(registry.register)

        let emulator = try await APNsEmulator.start(
            APNsEmulator.Configuration(
                environments: [
                    .sandbox: EmulatorPorts(push: port, channelManagement: managementPort),
                    .production: EmulatorPorts(push: productionPort, channelManagement: productionManagementPort),
                ],
                host: host, authenticatedStreamLimit: streamLimit, allowsPriority1ForLiveActivity: allowPriority1,
                journalCapacity: journalCapacity, idleTimeout: idleTimeout.map { .seconds($0) }, latency: try latencies(),
                devices: DeviceRuntimeSettings(pushToStartBudgetPerHour: pushToStartBudget)),
            registry: registry)
        try emulator.certificates.writeCertificateAuthority(to: caFile)
        let ca = URL(fileURLWithPath: caFile).standardizedFileURL.path
        var logger = Logger(label: "liverelay.emulator")
        logger.logLevel = .warning
        // The values given, placeholders only for those that were not.
        let firstToken = tokens.first { $0.environment == .sandbox }
        let tryArguments = [
            "--key-file", keyFile.map { URL(fileURLWithPath: $0).standardizedFileURL.path } ?? "<p8>", "--key-id", keyID ?? "<key id>",
            "--team-id", teamID ?? "<team id>", "--bundle-id", firstToken?.bundleID ?? "<bundle>", "--token", firstToken?.hex ?? "<hex>",
            "--content-state", "'{}'",
        ].joined(separator: " ")
        let control = emulator.controlApplication(port: controlPort, templates: drawing, logger: logger) { [host] controlPort in
            // Unbuffered, so that a parent process reading a pipe sees it at once.
            let (sandbox, production) = (emulator.ports(.sandbox), emulator.ports(.production))
            FileHandle.standardOutput.write(
                Data(
                    """
                    APNs emulator
                    sandbox pushes:                https://\(host):\(sandbox.push)  (/3/device/<token>, /4/broadcasts/apps/<bundle>)
                    sandbox channel management:    https://\(host):\(sandbox.channelManagement)  (/1/apps/<bundle>/channels)
                    production pushes:             https://\(host):\(production.push)
                    production channel management: https://\(host):\(production.channelManagement)
                    control API:                   http://\(host):\(controlPort)  (/emulator, /keys, /tokens, /journal, /faults, /latency, /devices, /events, /clock)
                    APNs latency:                  sandbox \(emulator.latency(.sandbox).latency), production \(emulator.latency(.production).latency)
                    simulated devices, drawn:      http://\(host):\(controlPort)/
                    CA certificate:                \(ca)
                    try: liverelay push update --environment custom --host \(host) --port \(sandbox.push) --management-port \(sandbox.channelManagement) --ca-file \(ca) \(tryArguments)

                    """.utf8))
        }
        let services = ServiceGroup(
            configuration: .stoppedBySignals([.init(service: emulator), .init(service: control)], graceful: .seconds(5), logger: logger))
        try await services.run()
    }
}
