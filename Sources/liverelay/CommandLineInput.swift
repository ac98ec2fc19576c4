import APNs
import ArgumentParser
import Foundation
import LiveActivityKit
import WebPages

/// Exit statuses, chosen from sysexits(3) so scripts can tell the cases apart.
enum ExitStatus: Int32, CaseIterable {
    case accepted = 0
    case invalidInput = 64
    case fixRequest = 65
    case dropToken = 66
    case retryWithBackoff = 69
    case retryLater = 75

    var meaning: String {
        switch self {
        case .accepted: "APNs accepted the request"
        case .invalidInput: "invalid input or configuration; nothing was sent"
        case .fixRequest: "APNs refused the request or the credentials: fix them before retrying"
        case .dropToken: "APNs says the token or channel is no longer valid: stop sending to it"
        case .retryWithBackoff: "APNs is unavailable: retry later with back-off"
        case .retryLater: "throttled, a provider token problem, or no answer: retry after a delay"
        }
    }

    static let helpText: String = "Exit status:\n" + allCases.map { String(format: "  %2d  ", $0.rawValue) + $0.meaning }.joined(separator: "\n")

    init(_ advice: APNsRetryAdvice) {
        switch advice {
        case .fixRequest: self = .fixRequest
        case .dropToken: self = .dropToken
        case .retryWithBackoff: self = .retryWithBackoff
        case .retryAfterDelay, .refreshTokenAndRetry: self = .retryLater
        }
    }
}

/// A problem with the input, reported as `error: <field>: <rule>` with exit status 64.
struct InputError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
    init(_ error: LiveActivityValidationError) { description = error.description }
    init(_ error: APNsConfigurationError) { description = error.description }
}

// MARK: - Dates

/// Parses a date given on the command line: ISO-8601 (`2026-11-21T14:00:00Z`), UNIX seconds
/// (`1795272000`), or relative to now (`+15m`, `+90s`, `+2h`, `+1d`, `now`).
func parseCommandLineDate(_ text: String, field: String, now: Date) throws(InputError) -> Date {
    do {
        return try Date.supported(try parseAnyCommandLineDate(text, field: field, now: now), field: field)
    } catch let error as LiveActivityValidationError {
        throw InputError(error)
    } catch {
        throw error as! InputError
    }
}

private func parseAnyCommandLineDate(_ text: String, field: String, now: Date) throws -> Date {
    let trimmed = text.trimmingCharacters(in: .whitespaces)
    if trimmed == "now" { return now }
    if trimmed.hasPrefix("+") || trimmed.hasPrefix("-"), let unit = trimmed.last, let amount = Double(trimmed.dropFirst().dropLast()) {
        let seconds: Double? =
            switch unit {
            case "s": 1
            case "m": 60
            case "h": 3600
            case "d": 86400
            default: nil
            }
        if let seconds {
            let sign: Double = trimmed.hasPrefix("-") ? -1 : 1
            return now.addingTimeInterval(sign * amount * seconds)
        }
    }
    if trimmed.allSatisfy(\.isNumber), let seconds = Double(trimmed) {
        do {
            try LiveActivityPayload.checkPlausibleUnixSeconds(seconds, field: field)
        } catch {
            throw InputError(error)
        }
        return Date(timeIntervalSince1970: seconds)
    }
    let formatter = ISO8601DateFormatter()
    if let date = formatter.date(from: trimmed) { return date }
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = formatter.date(from: trimmed) { return date }
    throw InputError("\(field): \"\(text)\" is not a date; use ISO-8601 (2026-11-21T14:00:00Z), UNIX seconds, or +15m / +2h / +1d")
}

// MARK: - JSON arguments

/// Reads a JSON argument: literal JSON, `@path` for a file, or `-` for standard input.
func readJSONArgument(_ argument: String, field: String) throws(InputError) -> JSONValue {
    let bytes: [UInt8]
    if argument == "-" {
        bytes = Array(FileHandle.standardInput.readDataToEndOfFile())
    } else if argument.hasPrefix("@") {
        let path = String(argument.dropFirst())
        guard let data = FileManager.default.contents(atPath: path) else {
            throw InputError("\(field): cannot read the file \(path)")
        }
        bytes = Array(data)
    } else {
        guard argumentWasValidUTF8(argument) else {
            throw InputError("\(field): is not valid UTF-8; JSON text must be UTF-8 (the shell passed other bytes)")
        }
        bytes = Array(argument.utf8)
    }
    do {
        return try JSONValue(parsing: bytes)
    } catch {
        throw InputError("\(field): \(error)")
    }
}

/// Swift turns invalid UTF-8 in an argument into U+FFFD, which would then be sent as if typed:
/// the raw argument is checked instead.
private func argumentWasValidUTF8(_ argument: String) -> Bool {
    guard argument.unicodeScalars.contains("\u{FFFD}") else { return true }
    for index in 0..<Int(CommandLine.argc) {
        guard let raw = CommandLine.unsafeArgv[index] else { continue }
        let bytes = UnsafeBufferPointer(start: raw, count: strlen(raw)).map { UInt8(bitPattern: $0) }
        guard String(decoding: bytes, as: UTF8.self) == argument else { continue }
        return String(validating: bytes, as: UTF8.self) != nil
    }
    return true
}

// MARK: - Credentials and environment

/// Where and as whom to send. Each option falls back to an environment variable.
struct ConnectionOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The .p8 signing key file. Env: LIVERELAY_APNS_KEY_FILE.", valueName: "path"))
    var keyFile: String?

    @Option(help: ArgumentHelp("The 10-character key id. Env: LIVERELAY_APNS_KEY_ID.", valueName: "id"))
    var keyID: String?

    @Option(help: ArgumentHelp("The 10-character team id. Env: LIVERELAY_APNS_TEAM_ID.", valueName: "id"))
    var teamID: String?

    @Option(help: ArgumentHelp("The app's bundle id, without .push-type.liveactivity. Env: LIVERELAY_APNS_BUNDLE_ID.", valueName: "id"))
    var bundleID: String?

    @Option(
        help: ArgumentHelp(
            "sandbox, production or custom. Env: LIVERELAY_APNS_ENVIRONMENT. Default: sandbox (serve: both of Apple's).", valueName: "name"))
    var environment: String?

    @Option(help: ArgumentHelp("Host of a custom environment (the emulator). Env: LIVERELAY_APNS_HOST.", valueName: "host"))
    var host: String?

    @Option(help: ArgumentHelp("Push port: 443 or 2197 for Apple, any for custom. Env: LIVERELAY_APNS_PORT.", valueName: "port"))
    var port: Int?

    @Option(help: ArgumentHelp("Channel-management port of a custom environment. Env: LIVERELAY_APNS_MANAGEMENT_PORT.", valueName: "port"))
    var managementPort: Int?

    @Option(help: ArgumentHelp("PEM CA file to trust for a custom environment. Env: LIVERELAY_APNS_CA_FILE.", valueName: "path"))
    var caFile: String?

    @Option(help: ArgumentHelp("Seconds to wait for APNs' answer, connecting included.", valueName: "seconds"))
    var timeout: Double = 10

    private func value(_ option: String?, _ variable: String) -> String? {
        option ?? ProcessInfo.processInfo.environment[variable].flatMap { $0.isEmpty ? nil : $0 }
    }

    func resolvedBundleID() throws(InputError) -> BundleID {
        guard let text = value(bundleID, "LIVERELAY_APNS_BUNDLE_ID") else {
            throw InputError("bundle-id: is required (--bundle-id or LIVERELAY_APNS_BUNDLE_ID)")
        }
        do {
            return try BundleID(text)
        } catch {
            throw InputError(error)
        }
    }

    func resolvedEnvironment() throws(InputError) -> APNsHosts {
        let name = value(environment, "LIVERELAY_APNS_ENVIRONMENT") ?? (value(host, "LIVERELAY_APNS_HOST") != nil ? "custom" : "sandbox")
        let port = self.port ?? value(nil, "LIVERELAY_APNS_PORT").flatMap(Int.init)
        switch name {
        case "sandbox", "development":
            return .sandbox(port: try applePort(port))
        case "production":
            return .production(port: try applePort(port))
        case "custom":
            guard let host = value(host, "LIVERELAY_APNS_HOST") else {
                throw InputError("host: is required for a custom environment (--host or LIVERELAY_APNS_HOST)")
            }
            guard let port else {
                throw InputError("port: is required for a custom environment (--port or LIVERELAY_APNS_PORT)")
            }
            let managementPort = self.managementPort ?? value(nil, "LIVERELAY_APNS_MANAGEMENT_PORT").flatMap(Int.init) ?? port
            return .custom(host: host, port: port, channelManagementPort: managementPort, caFile: value(caFile, "LIVERELAY_APNS_CA_FILE"))
        default:
            throw InputError("environment: must be sandbox, production or custom, got \"\(name)\"")
        }
    }

    /// Where `serve` sends: both of Apple's environments unless one is named; a custom
    /// environment (the emulator on another host) plays sandbox.
    func servedEnvironments() throws(InputError) -> [PushEnvironment: APNsHosts] {
        guard value(environment, "LIVERELAY_APNS_ENVIRONMENT") != nil || value(host, "LIVERELAY_APNS_HOST") != nil else {
            let port = try applePort(self.port ?? value(nil, "LIVERELAY_APNS_PORT").flatMap(Int.init))
            return [.sandbox: .sandbox(port: port), .production: .production(port: port)]
        }
        let endpoint = try resolvedEnvironment()
        return [endpoint.name == "production" ? .production : .sandbox: endpoint]
    }

    private func applePort(_ port: Int?) throws(InputError) -> Int {
        guard let port else { return 443 }
        guard port == 443 || port == 2197 else {
            throw InputError("port: APNs listens on 443 or 2197, got \(port)")
        }
        return port
    }

    func clientConfiguration() throws(InputError) -> APNsClient.Configuration {
        guard let keyFile = value(keyFile, "LIVERELAY_APNS_KEY_FILE") else {
            throw InputError("key-file: is required (--key-file or LIVERELAY_APNS_KEY_FILE); `liverelay keys generate` makes a test key")
        }
        guard let keyID = value(keyID, "LIVERELAY_APNS_KEY_ID") else {
            throw InputError("key-id: is required (--key-id or LIVERELAY_APNS_KEY_ID)")
        }
        guard let teamID = value(teamID, "LIVERELAY_APNS_TEAM_ID") else {
            throw InputError("team-id: is required (--team-id or LIVERELAY_APNS_TEAM_ID)")
        }
        guard timeout > 0, timeout <= 3600 else { throw InputError("timeout: must be more than 0 and at most 3600 seconds") }
        do {
            let key = try APNsSigningKey(p8File: keyFile, keyID: keyID, teamID: teamID)
            return APNsClient.Configuration(
                environment: try resolvedEnvironment(), signingKey: key,
                requestTimeout: .milliseconds(Int64(timeout * 1000)))
        } catch let error as APNsConfigurationError {
            throw InputError(error)
        } catch let error as InputError {
            throw error
        } catch {
            throw InputError("\(error)")
        }
    }
}

// MARK: - Running a request and reporting its outcome

/// Sends `request` (or prints it with `--dry-run`), prints the outcome, and exits with the
/// status of `ExitStatus`.
func perform(
    _ request: APNsRequest, connection: ConnectionOptions, dryRun: Bool,
    onSuccess: (APNsRawResponse) -> String = describeAccepted
) async throws {
    // A key file missing or unreadable, like any other input, exits 64 before anything is sent.
    if dryRun {
        print(request.rendered(in: try checked { try connection.resolvedEnvironment() }))
        return
    }
    let configuration = try checked { try connection.clientConfiguration() }
    let outcome: Result<APNsRawResponse, any Error> = await withAPNsClientResult(configuration) { client in
        try await client.execute(request)
    }
    switch outcome {
    case .success(let raw) where (200..<300).contains(raw.status):
        print(onSuccess(raw))
    case .success(let raw):
        let error = APNsError(raw)
        reportRejection(error)
        throw ExitCode(ExitStatus(error.advice).rawValue)
    case .failure(let error as APNsTransportError):
        printError("error: no answer from APNs: \(error.message)")
        throw ExitCode(ExitStatus.retryLater.rawValue)
    case .failure(let error as APNsConfigurationError):
        throw ValidationError(error.description)
    case .failure(let error):
        throw error
    }
}

private func withAPNsClientResult<T: Sendable>(
    _ configuration: APNsClient.Configuration, _ body: (APNsClient) async throws -> T
) async -> Result<T, any Error> {
    do {
        return .success(try await withAPNsClient(configuration: configuration, body))
    } catch {
        return .failure(error)
    }
}

func describeAccepted(_ raw: APNsRawResponse) -> String {
    var lines = ["accepted: HTTP \(raw.status)"]
    for name in ["apns-id", "apns-request-id", "apns-unique-id", "apns-channel-id"] {
        if let value = raw.header(name) { lines.append("\(name): \(value)") }
    }
    return lines.joined(separator: "\n")
}

func reportRejection(_ error: APNsError) {
    printError("error: APNs refused the request: \(error.status) \(error.reason)")
    if let entry = error.reason.known {
        printError("meaning: \(entry.meaning)")
        printError("what to do: \(entry.whatToDo)")
    } else {
        printError("meaning: a reason LiveRelay does not know yet; handled by its status (\(error.advice.rawValue))")
    }
    if let timestamp = error.timestamp {
        printError("token invalid since: \(timestamp.formatted(.iso8601))")
    }
    if let id = error.apnsID { printError("apns-id: \(id)") }
}

func printError(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

/// Runs input checks that throw `InputError` and turns them into ArgumentParser's usage errors.
func checked<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let error as InputError {
        throw ValidationError(error.description)
    } catch let error as LiveActivityValidationError {
        throw ValidationError(error.description)
    }
}

extension ActivityTemplates {
    /// `--templates`: a folder that cannot be used stops the command, naming the file and the rule.
    static func read(_ folder: String) throws -> ActivityTemplates {
        do {
            return try ActivityTemplates(folder: folder)
        } catch {
            throw ValidationError("templates: \(error)")
        }
    }
}
