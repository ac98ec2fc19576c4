import APNsEmulator
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The `liverelay` executable built beside this test bundle.
let liverelayExecutable: URL = {
    let directory = Bundle.main.bundleURL.deletingLastPathComponent()
    let beside = directory.appendingPathComponent("liverelay")
    if FileManager.default.isExecutableFile(atPath: beside.path) { return beside }
    return Bundle.main.executableURL!.deletingLastPathComponent().appendingPathComponent("liverelay")
}()

struct CommandResult: Sendable {
    var status: Int32
    var stdout: String
    var stderr: String
}

/// Runs `liverelay` with `arguments`, no LIVERELAY_* variables unless given, and `stdin` as input.
func liverelay(_ arguments: [String], environment: [String: String] = [:], stdin: String? = nil) async throws -> CommandResult {
    try await run(liverelayExecutable, arguments, environment: environment, stdin: stdin)
}

/// Runs `liverelay` with `arguments` and expects it to stop as a usage error (exit 64) saying
/// `message`, then the usage of the command that ran, however late the error was found.
func expectUsageError(_ arguments: [String], _ message: String, sourceLocation: SourceLocation = #_sourceLocation) async throws {
    let result = try await liverelay(arguments)
    #expect(result.status == 64 && result.stderr.contains(message), "\(result.stderr)", sourceLocation: sourceLocation)
    #expect(result.stderr.contains("\nUsage: liverelay \(arguments[0]) "), "\(result.stderr)", sourceLocation: sourceLocation)
}

/// Runs `script` in `/bin/sh` with `$0` the `liverelay` executable: for arguments Foundation cannot pass.
func liverelayFromShell(_ script: String) async throws -> CommandResult {
    try await run(URL(fileURLWithPath: "/bin/sh"), ["-c", script, liverelayExecutable.path])
}

private func run(_ executable: URL, _ arguments: [String], environment: [String: String] = [:], stdin: String? = nil) async throws -> CommandResult {
    try await withDeadline(.seconds(30)) {
        var env = ChildProcess.environment(dropping: "LIVERELAY_")
        env.merge(environment) { $1 }
        let child = try ChildProcess.start(executable.path, arguments, environment: env, input: .pipe, output: .pipe, errors: .pipe)
        if let stdin { child.input?.write(Data(stdin.utf8)) }
        try child.input?.close()
        // Read while it runs so a full pipe cannot block it, each on a thread of its own: a
        // blocking read on the cooperative pool (two threads here) stalls every other test.
        async let stdout = readAll(child.output)
        async let stderr = readAll(child.errors)
        let output = await stdout
        let errors = await stderr
        let status = await child.exitCode()
        return CommandResult(status: status, stdout: String(decoding: output, as: UTF8.self), stderr: String(decoding: errors, as: UTF8.self))
    }
}

/// Everything `handle` gives until its end, read on a thread outside the cooperative pool.
func readAll(_ handle: FileHandle?) async -> Data {
    guard let handle else { return Data() }
    return await BlockingWork.run { (try? handle.readToEnd()) ?? Data() }
}

/// A key file made by `liverelay keys generate`, and the flags that use it against `server`.
struct GeneratedKey {
    let path: String
    let keyID: String

    static func make() async throws -> GeneratedKey {
        let path = TestFiles.path("AuthKey", pathExtension: "p8")
        let result = try await liverelay(["keys", "generate", "--output", path])
        #expect(result.status == 0, "\(result.stderr)")
        let keyID = try #require(result.stdout.split(separator: "\n").first { $0.hasPrefix("key id: ") }?.dropFirst(8))
        return GeneratedKey(path: path, keyID: String(keyID))
    }

    func flags(_ server: ScriptedAPNsServer) -> [String] {
        [
            "--key-file", path, "--key-id", keyID, "--team-id", "TEAMID1234", "--bundle-id", "com.example.app",
            "--environment", "custom", "--host", "127.0.0.1", "--port", String(server.server.port), "--ca-file", server.caFile,
        ]
    }
}

let token = String(repeating: "ab", count: 80)

@Suite(.serialized) struct CommandLineTests {
    @Test func keysGenerateWritesAPrivatePKCS8Key() async throws {
        let key = try await GeneratedKey.make()
        defer { try? FileManager.default.removeItem(atPath: key.path) }
        #expect(key.keyID.count == 10)
        let pem = try String(contentsOfFile: key.path, encoding: .utf8)
        #expect(pem.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        _ = try P256.Signing.PrivateKey(pemRepresentation: pem)
        let permissions = try FileManager.default.attributesOfItem(atPath: key.path)[.posixPermissions] as? Int
        #expect(permissions == 0o600)
        // Never overwrites a key.
        let again = try await liverelay(["keys", "generate", "--output", key.path])
        #expect(again.status == 64)
    }

    @Test func anUpdateIsSentAndItsIdsPrinted() async throws {
        let server = try await ScriptedAPNsServer.start()
        let key = try await GeneratedKey.make()
        defer { try? FileManager.default.removeItem(atPath: key.path) }
        let result = try await liverelay(
            [
                "push", "update", "--token", token, "--content-state", #"{"score":[1,0]}"#,
                "--apns-id", "123e4567-e89b-12d3-a456-426614174000",
            ] + key.flags(server))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.contains("apns-id: 123e4567-e89b-12d3-a456-426614174000"))
        #expect(result.stdout.contains("apns-unique-id: "))
        let received = try #require(server.received.first)
        #expect(received.path == "/3/device/\(token)")
        #expect(received.header("apns-topic") == "com.example.app.push-type.liveactivity")
        let aps = try JSONValue(parsing: received.body)["aps"]
        #expect(aps?["content-state"] == .object([("score", .array([.number("1"), .number("0")]))]))
        await server.shutdown()
    }

    @Test func credentialsComeFromTheEnvironment() async throws {
        let server = try await ScriptedAPNsServer.start()
        let key = try await GeneratedKey.make()
        defer { try? FileManager.default.removeItem(atPath: key.path) }
        let environment = [
            "LIVERELAY_APNS_KEY_FILE": key.path, "LIVERELAY_APNS_KEY_ID": key.keyID, "LIVERELAY_APNS_TEAM_ID": "TEAMID1234",
            "LIVERELAY_APNS_BUNDLE_ID": "com.example.app", "LIVERELAY_APNS_HOST": "127.0.0.1",
            "LIVERELAY_APNS_PORT": String(server.server.port), "LIVERELAY_APNS_CA_FILE": server.caFile,
        ]
        let result = try await liverelay(["push", "end", "--token", token, "--dismissal-date", "immediate"], environment: environment)
        #expect(result.status == 0, "\(result.stderr)")
        let aps = try JSONValue(parsing: try #require(server.received.first).body)["aps"]
        #expect(aps?["event"] == .string("end"))
        #expect(aps?["dismissal-date"] == .number("0"))
        await server.shutdown()
    }

    @Test(arguments: [
        (410, "Unregistered", Int32(66)), (400, "BadTopic", 65), (403, "InvalidProviderToken", 65),
        (429, "TooManyRequests", 75), (503, "ServiceUnavailable", 69),
    ])
    func aRejectionIsExplainedWithItsExitStatus(status: Int, reason: String, exitStatus: Int32) async throws {
        let server = try await ScriptedAPNsServer.start()
        let key = try await GeneratedKey.make()
        defer { try? FileManager.default.removeItem(atPath: key.path) }
        server.enqueue(ScriptedAPNsServer.rejection(status, reason, timestampMilliseconds: status == 410 ? 1_795_000_000_000 : nil))
        let result = try await liverelay(["push", "update", "--token", token, "--content-state", "{}"] + key.flags(server))
        #expect(result.status == exitStatus)
        #expect(result.stderr.contains("\(status) \(reason)"))
        #expect(result.stderr.contains("meaning: "))
        #expect(result.stderr.contains("what to do: "))
        if status == 410 { #expect(result.stderr.contains("token invalid since: 2026-11-18T")) }
        await server.shutdown()
    }

    @Test func dryRunPrintsTheExactRequestWithoutTheToken() async throws {
        let result = try await liverelay([
            "push", "start", "--token", token, "--bundle-id", "com.example.app", "--dry-run",
            "--attributes-type", "DeliveryAttributes", "--attributes", #"{"orderNumber":42}"#,
            "--content-state", #"{"step":"preparing"}"#, "--alert-title", "Order", "--alert-body", "Started",
            "--input-push-token", "--timestamp", "1795000000", "--priority", "5", "--expiration", "2026-11-21T14:00:00Z",
            "--collapse-id", "order-42",
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            result.stdout == """
                :method: POST
                :scheme: https
                :authority: api.sandbox.push.apple.com
                :path: /3/device/\(token)
                authorization: bearer <provider token elided>
                apns-push-type: liveactivity
                apns-topic: com.example.app.push-type.liveactivity
                apns-priority: 5
                apns-expiration: 1795269600
                apns-collapse-id: order-42
                content-type: application/json

                {"aps":{"timestamp":1795000000,"event":"start","content-state":{"step":"preparing"},"alert":{"title":"Order","body":"Started","sound":"default"},"attributes-type":"DeliveryAttributes","attributes":{"orderNumber":42},"input-push-token":1}}

                """)
    }

    /// `Documentation/command-line.md` shows a widgets push's dry run: the command on its first
    /// line prints exactly the lines under it.
    @Test func theDocumentedWidgetsDryRunIsWhatTheCommandPrints() async throws {
        let page = try String(contentsOf: ReadmeTourTests.root.appendingPathComponent("Documentation/command-line.md"), encoding: .utf8)
        let section = try #require(page.components(separatedBy: "## Reloading widgets and controls").dropFirst().first)
        let block = try #require(section.components(separatedBy: "```console\n").dropFirst().first?.components(separatedBy: "```").first)
        var lines = block.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let command = try #require(lines.first?.split(separator: " ").map(String.init))
        #expect(command.prefix(2) == ["$", "liverelay"])
        lines.removeFirst()
        let result = try await liverelay(Array(command.dropFirst(2)))
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == lines.joined(separator: "\n"))
        #expect(result.stdout.contains("apns-push-type: widgets\napns-topic: com.example.app.push-type.widgets\n"))

        let controls = try await liverelay(["push", "controls"] + command.dropFirst(4))
        #expect(controls.stdout == result.stdout.replacingOccurrences(of: "widgets", with: "controls"))
        let lowPriority = try await liverelay(["push", "widgets", "--dry-run", "--bundle-id", "com.example.app", "--token", "ab", "--priority", "1"])
        #expect(lowPriority.status == 64)
        #expect(lowPriority.stderr.contains("apns-priority: must be one of 10, 5 for a device push, got 1"))
        let suffixed = try await liverelay(["push", "widgets", "--dry-run", "--bundle-id", "com.example.app.push-type.widgets", "--token", "ab"])
        #expect(suffixed.status == 64)
        #expect(suffixed.stderr.contains("\".push-type.widgets\" is added for you"))
    }

    @Test func datesAreISOUnixSecondsOrRelative() async throws {
        func staleDate(_ argument: String) async throws -> Double? {
            let result = try await liverelay([
                "push", "update", "--token", token, "--bundle-id", "com.example.app", "--dry-run",
                "--content-state", "{}", "--stale-date", argument,
            ])
            #expect(result.status == 0, "\(result.stderr)")
            let body = try #require(result.stdout.split(separator: "\n").last)
            return try JSONValue(parsing: String(body))["aps"]?["stale-date"]?.doubleValue
        }
        #expect(try await staleDate("2026-11-21T14:00:00Z") == 1_795_269_600)
        #expect(try await staleDate("1795269600") == 1_795_269_600)
        let relative = try #require(try await staleDate("+15m"))
        #expect(abs(relative - (Date().timeIntervalSince1970 + 900)) < 60)
        let bad = try await liverelay([
            "push", "update", "--token", token, "--bundle-id", "com.example.app", "--dry-run",
            "--content-state", "{}", "--stale-date", "tomorrow",
        ])
        #expect(bad.status == 64)
        #expect(bad.stderr.contains("stale-date"))
    }

    /// Serve's dispatch settings are checked before it starts: a claim must outlive the APNs
    /// request it covers, or another instance would send a push still in flight again.
    @Test func serveRefusesALeaseShorterThanTwiceTheRequestTimeoutAndBadSettings() async throws {
        let dataDir = TestFiles.path("lease")
        defer { try? FileManager.default.removeItem(atPath: dataDir) }
        try await expectUsageError(
            ["serve", "--data-dir", dataDir, "--http-port", "0", "--claim-lease", "20"],
            "claim-lease: must be more than twice the APNs request timeout")
        try await expectUsageError(["serve", "--data-dir", dataDir, "--http-port", "0", "--claim-lease", "30", "--timeout", "15"], "claim-lease")
        try await expectUsageError(["serve", "--data-dir", dataDir, "--http-port", "0", "--timeout", "0"], "timeout: must be more than 0")
        try await expectUsageError(
            ["serve", "--data-dir", dataDir, "--http-port", "0", "--history-days", "0"], "history-days: must be 1 to 3650 days")
        try await expectUsageError(
            ["serve", "--data-dir", dataDir, "--http-port", "0", "--ended-days", "4000"], "ended-days: must be 1 to 3650 days")
        try await expectUsageError(
            ["serve", "--data-dir", dataDir, "--http-port", "0", "--max-in-flight", "0"], "max-in-flight: must be 1 to 100000")
        try await expectUsageError(
            ["serve", "--data-dir", dataDir, "--http-port", "0", "--apns-connections", "65"], "apns-connections: must be 1 to 64")
        try await expectUsageError(
            ["serve", "--data-dir", dataDir, "--http-port", "0", "--otlp-endpoint", "collector:4318"],
            "otlp-endpoint: must be an http:// or https:// address")
    }

    /// `--templates`: a template that could insert markup, or a file that is not a region, stops
    /// `serve` and `emulator` before they start, naming the file and the rule.
    @Test func templatesThatCannotBeUsedStopServeAndTheEmulator() async throws {
        let folder = TestFiles.path("templates")
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder + "/DeliveryAttributes", withIntermediateDirectories: true)
        try "{{{state.status}}}".write(toFile: folder + "/DeliveryAttributes/lockScreen.mustache", atomically: true, encoding: .utf8)
        try await expectUsageError(
            ["serve", "--data-dir", folder + "/data", "--http-port", "0", "--templates", folder],
            "templates: \(folder)/DeliveryAttributes/lockScreen.mustache: {{{…}} inserts a value unescaped")
        #expect(!FileManager.default.fileExists(atPath: folder + "/data"), "nothing was started")
        try FileManager.default.removeItem(atPath: folder + "/DeliveryAttributes/lockScreen.mustache")
        try "x".write(toFile: folder + "/DeliveryAttributes/lockscreen.mustache", atomically: true, encoding: .utf8)
        try await expectUsageError(["emulator", "--templates", folder, "--ca-file", folder + "/ca.pem"], "lockscreen is not a region")
        try await expectUsageError(["emulator", "--templates", folder + "/none", "--ca-file", folder + "/ca.pem"], "is not a folder of templates")
    }

    /// `emulator --latency`: milliseconds or a range, for both environments or one; and the
    /// devices' push-to-start budget.
    @Test func theEmulatorsSettingsAreCheckedBeforeItStarts() async throws {
        let ca = TestFiles.path("ca", pathExtension: "pem")
        try await expectUsageError(["emulator", "--latency", "soon", "--ca-file", ca], "latency: must be milliseconds, as 100, or a range of them")
        try await expectUsageError(["emulator", "--latency", "moon=5", "--ca-file", ca], "latency: an environment is sandbox or production")
        try await expectUsageError(["emulator", "--latency", "production=120-40", "--ca-file", ca], "from the smaller to the larger")
        try await expectUsageError(["emulator", "--push-to-start-budget=-1", "--ca-file", ca], "push-to-start-budget: must be 0 to 100000")
        #expect(!FileManager.default.fileExists(atPath: ca), "nothing was started")
    }

    /// The benchmarks refuse what they could not measure before they seed or start anything.
    @Test func benchOptionsAreCheckedBeforeTheRun() async throws {
        let missing = TestFiles.path("none")
        try await expectUsageError(
            ["bench", "outbox", "--database", missing + "/x.sqlite"], "database: must be a postgres:// address; SQLite is a temporary file")
        try await expectUsageError(["bench", "outbox", "--rounds", "0"], "activities and rounds must be positive")
        try await expectUsageError(
            ["bench", "server", "--database", "x.sqlite"], "database: must be a postgres:// address; SQLite is the data directory's own")
        try await expectUsageError(
            ["bench", "server", "--latency-log", missing + "/latency.csv"], "latency-log: cannot write \(missing)/latency.csv")
        try await expectUsageError(
            ["bench", "server", "--dashboard-tab", "/v1/health"],
            "dashboard-tab: a dashboard page's path (/dashboard, /dashboard/deliveries…), got /v1/health")
        #expect(!FileManager.default.fileExists(atPath: missing), "nothing was started")
    }

    /// `liverelay emulator --tokens-file`: a line that is not a token is named by its number.
    @Test func theEmulatorsTokensFileNamesABadLine() async throws {
        let path = TestFiles.path("tokens", pathExtension: "txt")
        try "\(String(repeating: "ab", count: 32)):com.example.app\n\nnot-a-token:com.example.app\n".write(
            toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        try await expectUsageError(["emulator", "--tokens-file", path, "--ca-file", path + ".pem"], "tokens-file line 3: must be <hex>:<bundle id>")
        try await expectUsageError(["emulator", "--tokens-file", path + ".nope", "--ca-file", path + ".pem"], "tokens-file: cannot read")
    }

    @Test func contentStateFromAFileAndFromStandardInput() async throws {
        let path = TestFiles.path("state", pathExtension: "json")
        try #"{"fromFile":1.50}"#.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let file = try await liverelay([
            "push", "update", "--token", token, "--bundle-id", "com.example.app", "--dry-run", "--content-state", "@\(path)",
        ])
        #expect(file.stdout.contains(#""content-state":{"fromFile":1.50}"#), "\(file.stderr)")
        let stdin = try await liverelay(
            ["push", "update", "--token", token, "--bundle-id", "com.example.app", "--dry-run", "--content-state", "-"], stdin: #"{"fromStdin":true}"#
        )
        #expect(stdin.stdout.contains(#""content-state":{"fromStdin":true}"#), "\(stdin.stderr)")
    }

    @Test(arguments: [
        (["push", "start", "--content-state", "{}", "--attributes-type", "A", "--attributes", "{}"], "aps.alert"),
        (["push", "update"], "aps.content-state"),
        (["push", "update", "--content-state", "{}", "--priority", "1"], "apns-priority"),
        (["push", "update", "--content-state", "{}", "--expiration", "300"], "apns-expiration"),
        (["push", "update", "--content-state", "{}", "--collapse-id", String(repeating: "x", count: 65)], "apns-collapse-id"),
        (["push", "update", "--content-state", "{not json}"], "content-state"),
        (["push", "update", "--content-state", "{}", "--alert-body", "no title"], "alert-title"),
        (
            ["push", "update", "--payload", #"{"aps":{"event":"update","timestamp":1795000000,"content-state":{},"dismissal-date":1795000000}}"#],
            "aps.dismissal-date"
        ),
        (["push", "end", "--payload", #"{"aps":{"event":"update","timestamp":1795000000,"content-state":{}}}"#], "aps.event"),
        // A start already stale is created stale and never shown: refused as the server refuses it.
        (
            [
                "push", "start", "--content-state", "{}", "--attributes-type", "A", "--attributes", "{}", "--alert-title", "t", "--alert-body", "b",
                "--stale-date", "-15m",
            ], "stale-date: is"
        ),
    ])
    func badInputIsRefusedBeforeSending(arguments: [String], field: String) async throws {
        let result = try await liverelay(arguments + ["--token", token, "--bundle-id", "com.example.app", "--dry-run"])
        #expect(result.status == 64)
        #expect(result.stderr.contains(field), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
    }

    /// A relative date may be in the past (`--stale-date -15m`): an update may be stale at once,
    /// and the value is read as a date, not taken for an option.
    @Test func aDateBeforeNowIsReadAsADate() async throws {
        let result = try await liverelay([
            "push", "update", "--token", token, "--bundle-id", "com.example.app", "--dry-run", "--content-state", "{}", "--stale-date", "-15m",
        ])
        #expect(result.status == 0 && result.stdout.contains("\"stale-date\":"), "\(result.stderr)")
    }

    /// A key file missing or unreadable is input like any other: 64, naming the option.
    @Test func aMissingKeyFileExits64NamingIt() async throws {
        let missing = TestFiles.path("missing", pathExtension: "p8")
        let result = try await liverelay([
            "push", "update", "--token", token, "--bundle-id", "com.example.app", "--content-state", "{}", "--key-file", missing, "--key-id",
            "KEYID12345", "--team-id", "TEAMID1234",
        ])
        #expect(result.status == 64 && result.stderr.contains("key-file: cannot be read at \(missing)"), "\(result.status) \(result.stderr)")
    }

    /// `--contract`: what the app's widget would not decode is refused before sending, in the
    /// words the iPhone logs when it drops such a push.
    @Test func aContractRefusesWhatTheWidgetWouldNotDecode() async throws {
        let path = TestFiles.path("contract", pathExtension: "json")
        try #"{"name": "DeliveryAttributes", "attributes": {"orderNumber": "Int"}, "contentState": {"status": "String", "etaMinutes": "Int"}}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let push = ["push", "update", "--token", token, "--bundle-id", "com.example.app", "--dry-run", "--contract", path]
        let wrong = try await liverelay(push + ["--content-state", #"{"status": "on the way", "etaMinutes": "ten"}"#])
        #expect(wrong.status == 64)
        #expect(wrong.stderr.contains("aps.content-state.etaMinutes: expected a number for Int, found a string"), "\(wrong.stderr)")
        #expect(wrong.stdout.isEmpty)
        let right = try await liverelay(push + ["--content-state", #"{"status": "on the way", "etaMinutes": 10}"#])
        #expect(right.status == 0, "\(right.stderr)")
        let start = try await liverelay([
            "push", "start", "--token", token, "--bundle-id", "com.example.app", "--dry-run", "--contract", path, "--attributes-type",
            "DeliveryAttributes", "--attributes", #"{"orderNumber": "42"}"#, "--content-state", #"{"status": "s", "etaMinutes": 1}"#,
            "--alert-title", "t", "--alert-body", "b",
        ])
        #expect(start.status == 64)
        #expect(start.stderr.contains("aps.attributes.orderNumber: expected a number for Int, found a string"), "\(start.stderr)")
        let otherType = try await liverelay([
            "push", "start", "--token", token, "--bundle-id", "com.example.app", "--dry-run", "--contract", path, "--attributes-type",
            "OtherAttributes", "--attributes", "{}", "--content-state", "{}", "--alert-title", "t", "--alert-body", "b",
        ])
        #expect(otherType.status == 64)
        #expect(otherType.stderr.contains("the contract is for DeliveryAttributes"), "\(otherType.stderr)")
    }

    @Test func aTokenWithTheWrongShapeIsRefused() async throws {
        let result = try await liverelay(["push", "update", "--token", "abc", "--bundle-id", "com.example.app", "--content-state", "{}", "--dry-run"])
        #expect(result.status == 64)
        #expect(result.stderr.contains("token: has 3 hex characters"))
    }

    @Test func broadcastAndChannelCommands() async throws {
        let server = try await ScriptedAPNsServer.start()
        let key = try await GeneratedKey.make()
        defer { try? FileManager.default.removeItem(atPath: key.path) }
        server.setFallback { request in
            if request.path.hasSuffix("/channels"), request.method == "POST" {
                return .respond(status: 201, headers: [("apns-channel-id", "dHN0LXNyY2gtY2hubA==")], body: nil)
            }
            return AcceptAllResponder().answer(request)
        }
        let create = try await liverelay(["channels", "create", "--storage-policy", "1"] + key.flags(server))
        #expect(create.status == 0, "\(create.stderr)")
        #expect(create.stdout.contains("apns-channel-id: dHN0LXNyY2gtY2hubA=="))
        let broadcast = try await liverelay(
            ["push", "broadcast", "--channel-id", "dHN0LXNyY2gtY2hubA==", "--content-state", #"{"home":2}"#, "--priority", "5"] + key.flags(server))
        #expect(broadcast.status == 0, "\(broadcast.stderr)")
        let sent = try #require(server.received.last)
        #expect(sent.path == "/4/broadcasts/apps/com.example.app")
        #expect(sent.header("apns-channel-id") == "dHN0LXNyY2gtY2hubA==")
        #expect(sent.header("apns-expiration") == "0")
        #expect(sent.header("apns-priority") == "5")
        let startBroadcast = try await liverelay(
            ["push", "broadcast", "--channel-id", "dHN0", "--event", "start", "--content-state", "{}"] + key.flags(server))
        #expect(startBroadcast.status == 64)
        #expect(startBroadcast.stderr.contains("a broadcast cannot start"))
        await server.shutdown()
    }

    @Test func helpDocumentsTheExitStatuses() async throws {
        let result = try await liverelay(["push", "--help"])
        for status in ["0", "64", "65", "66", "69", "75"] {
            #expect(result.stdout.contains("  \(status)  "), "exit status \(status)")
        }
    }
}

/// `liverelay emulator` as a user starts it, and `liverelay push` against it.
@Suite(.serialized) struct EmulatorCommandTests {
    @Test func aPushFromTheCommandLineSucceedsAgainstTheEmulator() async throws {
        let key = try await GeneratedKey.make()
        let caFile = TestFiles.path("ca", pathExtension: "pem")
        defer {
            try? FileManager.default.removeItem(atPath: key.path)
            try? FileManager.default.removeItem(atPath: caFile)
        }
        let emulator = try ChildProcess.start(
            liverelayExecutable.path,
            [
                "emulator", "--ca-file", caFile, "--key-file", key.path, "--key-id", key.keyID, "--team-id", "TEAMID1234", "--token",
                "\(token):com.example.app",
            ],
            environment: ChildProcess.environment(dropping: "LIVERELAY_"))
        defer {
            emulator.send(SIGKILL)
            emulator.waitUntilExit()
        }

        let banner = try await EmulatorBanner.read(from: emulator)
        #expect(banner.text.contains("CA certificate:                \(caFile)"))
        let (pushPort, managementPort) = (banner.sandboxPush, banner.sandboxManagement)
        let connection = [
            "--environment", "custom", "--host", "127.0.0.1", "--port", pushPort, "--management-port", managementPort,
            "--ca-file", caFile, "--key-file", key.path, "--key-id", key.keyID, "--team-id", "TEAMID1234",
            "--bundle-id", "com.example.app",
        ]

        // The command it suggests has what it was given, and works as printed.
        let tryLine = try #require(banner.text.split(separator: "\n").first { $0.hasPrefix("try: liverelay ") })
        #expect(!tryLine.contains("<"), "a placeholder for a value given: \(tryLine)")
        let tried = try await liverelayFromShell("\"$0\" " + tryLine.dropFirst("try: liverelay ".count))
        #expect(tried.status == 0, "\(tryLine): \(tried.stderr)")

        let accepted = try await liverelay(["push", "update", "--token", token, "--content-state", #"{"level":1}"#] + connection)
        #expect(accepted.status == 0, "\(accepted.stderr)")
        #expect(accepted.stdout.contains("apns-unique-id: "))

        let unknown = try await liverelay(["push", "update", "--token", String(repeating: "00", count: 80), "--content-state", "{}"] + connection)
        #expect(unknown.status == 66)
        #expect(unknown.stderr.contains("400 BadDeviceToken"))

        // The token is a sandbox one: production, on its own port, does not know it.
        var inProduction = connection
        inProduction[inProduction.firstIndex(of: pushPort)!] = banner.productionPush
        let elsewhere = try await liverelay(["push", "update", "--token", token, "--content-state", "{}"] + inProduction)
        #expect(elsewhere.status == 66)
        #expect(elsewhere.stderr.contains("400 BadDeviceToken"))

        let channel = try await liverelay(["channels", "create", "--storage-policy", "1"] + connection)
        #expect(channel.status == 0, "\(channel.stderr)")
        #expect(channel.stdout.contains("apns-channel-id: "))

        // The control API saw the pushes and the channel creation.
        let (data, _) = try await withDeadline(.seconds(20)) {
            try await URLSession.shared.data(from: URL(string: banner.control + "/journal/counts")!)
        }
        let counts = try JSONValue(parsing: Array(data))["counts"]
        #expect(counts?.sortedKeys == .object([("BadDeviceToken", .number("2")), ("Success", .number("3"))]))

        // SIGTERM stops it gracefully.
        emulator.send(SIGTERM)
        let status = try await withDeadline(.seconds(20)) { await emulator.exitCode() }
        #expect(status == 0)
    }

    /// Interrupted (Ctrl-C), `bench server` stops the `serve` it started and removes its scratch
    /// folder before it exits: no server is left running, holding its port and data.
    @Test func anInterruptedBenchmarkStopsTheServersItStarted() async throws {
        func scratchFolders() -> Set<String> {
            Set(((try? FileManager.default.contentsOfDirectory(atPath: NSTemporaryDirectory())) ?? []).filter { $0.hasPrefix("liverelay-bench-") })
        }
        let foldersBefore = scratchFolders()
        let bench = try ChildProcess.start(
            liverelayExecutable.path,
            ["bench", "server", "--tokens", "50", "--activities", "20", "--keys", "5", "--fan-outs", "0", "--seconds", "60"],
            environment: ChildProcess.environment(dropping: "LIVERELAY_"), output: .null)
        let benchPID = bench.pid
        // The endpoint, then the server under load.
        let started = try await withDeadline(.seconds(120)) {
            while true {
                let children = Self.runningChildren(of: benchPID)
                if children.count >= 2 { return children }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        bench.send(SIGINT)
        let status = try await withDeadline(.seconds(20)) { await bench.exitCode() }
        #expect(status == 128 + SIGINT)
        // At once (without this, one kept running until it next wrote to the pipe the benchmark had
        // held; stopped gracefully, one made its data folder again as it stopped).
        try await withDeadline(.seconds(5)) {
            try await eventually(every: .milliseconds(50)) { started.allSatisfy { Self.processState($0).map { $0.state == "Z" } ?? true } }
        }
        #expect(scratchFolders().subtracting(foldersBefore).isEmpty, "the benchmark's scratch folder is removed")
    }

    /// `pid`'s children that have not exited.
    private static func runningChildren(of pid: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.filter { child in
            guard let process = processState(child) else { return false }
            return process.parent == pid && process.state != "Z"
        }
    }

    /// A process's state letter ('Z': exited, not yet reaped) and its parent, from
    /// `/proc/<pid>/stat` ("pid (name) state ppid …"); nil when there is no such process.
    private static func processState(_ pid: pid_t) -> (state: Substring, parent: pid_t)? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 1, let parent = pid_t(fields[1])
        else { return nil }
        return (fields[0], parent)
    }
}
