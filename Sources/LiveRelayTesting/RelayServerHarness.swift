import APNs
import APNsEmulator
import AsyncHTTPClient
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import SimulatedDevices
import WebPages

/// A LiveRelay server on loopback (SQLite in a temporary directory, the HTTP API on port 0)
/// sending to an in-process emulator's sandbox and production environments, on the emulator's
/// clock, with one key of each scope. The
/// dispatcher and the ticker do not run by themselves: a test sends with `dispatch()` and lets
/// time act with `tick()`, so every step is deterministic.
package final class RelayHarness: Sendable {
    package static let bundleID = try! BundleID("com.example.liverelay.tests")
    /// Every answer is checked against the OpenAPI document the server serves.
    static let checker = OpenAPIChecker(document: try! JSONValue(parsing: RelayAPI.openAPIDocument))

    package let emulator: APNsEmulator
    package let server: RelayServer
    /// What the server keeps, for tests to look at (the service itself keeps its store private).
    package let store: SQLiteStore
    package let baseURL: String
    package let keys: [APIKeyScope: String]
    package var relay: RelayService { server.relay }

    init(emulator: APNsEmulator, server: RelayServer, store: SQLiteStore, baseURL: String, keys: [APIKeyScope: String]) {
        self.emulator = emulator
        self.server = server
        self.store = store
        self.baseURL = baseURL
        self.keys = keys
    }

    /// Sends everything due now.
    package func dispatch() async throws { try await server.dispatcher.drain() }

    /// Posts every webhook delivery due now.
    package func postWebhooks() async throws { try await server.webhooks.drain() }

    /// Moves the emulator's clock (and so the server's) and lets time act on both sides.
    package func advance(by seconds: TimeInterval) async throws {
        emulator.clock.advance(by: seconds)
        emulator.devices.advanceAll()
        try await relay.tick()
    }

    // MARK: Requests

    package struct Answer: Sendable {
        package var status: Int
        package var json: JSONValue
        package var headers: [(name: String, value: String)]
        package var text: String

        package func header(_ name: String) -> String? { headers.first { $0.name.lowercased() == name.lowercased() }?.value }
    }

    /// A request with `scope`'s key (or `secret`, or none when both are nil); `raw` is a body sent
    /// as written (broken JSON).
    package func call(
        _ method: HTTPMethod, _ path: String, _ body: JSONValue? = nil, raw: String? = nil, scope: APIKeyScope? = .server,
        secret: String? = nil, headers: [(String, String)] = []
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        if let key = secret ?? scope.flatMap({ keys[$0] }) { request.headers.add(name: "authorization", value: "Bearer \(key)") }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let bytes = raw.map({ Array($0.utf8) }) ?? body?.serialized {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: bytes))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
        let buffer = try await response.body.collect(upTo: 16 * 1024 * 1024)
        let text = String(buffer: buffer)
        let isJSON = response.headers["content-type"].first?.hasPrefix("application/json") == true
        try Self.checker.check(
            method: method.rawValue, path: path, status: Int(response.status.code), body: isJSON ? try JSONValue(parsing: text) : nil)
        return Answer(
            status: Int(response.status.code), json: (try? JSONValue(parsing: text)) ?? .null,
            headers: response.headers.map { ($0.name, $0.value) }, text: text)
    }

    package func post(_ path: String, _ body: JSONValue, scope: APIKeyScope? = .server, headers: [(String, String)] = []) async throws -> Answer {
        try await call(.POST, path, body, scope: scope, headers: headers)
    }

    package func get(_ path: String, scope: APIKeyScope? = .server) async throws -> Answer {
        try await call(.GET, path, scope: scope)
    }

    // MARK: Apps

    /// Registers another app signed with `key` (which the emulator then trusts), and returns a
    /// client key for it.
    package func addApp(_ bundleID: BundleID, key: TestSigningKey) async throws -> String {
        emulator.registry.register(EmulatorKey(keyID: key.signingKey.keyID, teamID: key.signingKey.teamID, publicKey: key.publicKey))
        _ = try await relay.registerApp(key.app(bundleID))
        return try await relay.createAPIKey(name: "client of \(bundleID.value)", scope: .client, app: bundleID.value).secret
    }

    // MARK: Devices

    /// A device with an app installed (the harness's unless told), reporting its tokens to this
    /// server with `clientKey` (the harness's app's unless told): a development build (sandbox
    /// tokens) unless `environment` says otherwise.
    package func addDevice(
        _ id: String, types: [ActivityAttributesType], frequentUpdates: Bool = false, environment: PushEnvironment = .sandbox,
        app: BundleID = RelayHarness.bundleID, clientKey: String? = nil, appVersion: String = SimulatedApp.firstVersion
    ) throws {
        if !emulator.devices.contains(id) { try emulator.devices.addDevice(id: id) }
        try emulator.reporter.setTarget(AppReporting(url: baseURL, clientKey: clientKey ?? keys[.client]), deviceID: id, bundleID: app.value)
        try emulator.devices.install(
            SimulatedApp(
                bundleID: app.value, supportsFrequentUpdates: frequentUpdates, attributeTypes: types, environment: environment, version: appVersion),
            on: id)
    }

    /// Waits (under the test's deadline) until `condition` holds; checks every 10 ms.
    package func eventually(_ what: String = "condition", _ condition: @Sendable () async throws -> Bool) async throws {
        try await LiveRelayTesting.eventually(condition)
    }
}

/// Waits (under the caller's deadline) until `condition` holds; checks every `interval` (a
/// condition that costs the system under test, as a count of 10,000 rows, wants a longer one).
package func eventually(every interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool) async throws {
    while try await !condition() {
        try Task.checkCancellation()
        try await Task.sleep(for: interval)
    }
}

/// Runs `body` against a fresh server and emulator, under a deadline, and shuts both down. The
/// server sends to `environments` (both unless told); it logs into `logs` when given (from `info`
/// up), else only what is critical.
package func withRelayHarness(
    environments: Set<PushEnvironment> = Set(PushEnvironment.allCases),
    emulator configureEmulator: @escaping @Sendable (inout APNsEmulator.Configuration) -> Void = { _ in },
    configure: @escaping @Sendable (inout RelayConfiguration, inout RelayAPIConfiguration) -> Void = { _, _ in },
    logs: CapturedLogs? = nil, deadline: Duration = .seconds(60), _ body: @escaping @Sendable (RelayHarness) async throws -> Void
) async throws {
    try await withDeadline(deadline) {
        // Time stands still unless the test moves it: a slow machine must not change the outcome.
        let start = Date()
        var emulatorConfiguration = APNsEmulator.Configuration(now: { start })
        configureEmulator(&emulatorConfiguration)
        let emulator = try await APNsEmulator.start(emulatorConfiguration)
        let key = TestSigningKey()
        emulator.registry.register(EmulatorKey(keyID: key.signingKey.keyID, teamID: key.signingKey.teamID, publicKey: key.publicKey))
        // The CA file and the store, with SQLite's files beside it, removed together.
        let directory = try TestFiles.folder("relay")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let caFile = directory + "/ca.pem"
        try emulator.certificates.writeCertificateAuthority(to: caFile)
        let apns = APNsRoutes(
            endpoints: emulator.clientEnvironments(caFile: caFile).filter { environments.contains($0.key) },
            now: emulator.clock.function)
        var configuration = RelayConfiguration()
        // The emulator's devices drawn on the dashboard, as `serve` does with its built-in one.
        var api = RelayAPIConfiguration(port: 0, devices: DeviceGallery(fleet: emulator.devices))
        configure(&configuration, &api)
        var logger = logs?.logger() ?? Logger(label: "liverelay.tests")
        if logs == nil { logger.logLevel = .critical }
        let store = try await SQLiteStore.open(path: directory + "/relay.sqlite")
        let server = try await RelayServer.open(
            store: store, configuration: configuration, api: api, apns: apns, masterKey: .generate(), now: emulator.clock.function, logger: logger)
        let keys = try await server.prepare(apps: [key.app(RelayHarness.bundleID)])
        let port = AsyncStream.makeStream(of: Int.self)
        let application = server.api.application(logger: logger) { port.continuation.yield($0) }
        let group = ServiceGroup(configuration: .init(services: [.init(service: application)], logger: logger))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            var ports = port.stream.makeAsyncIterator()
            guard let bound = await ports.next() else { throw DeadlineExceeded(limit: deadline) }
            let harness = RelayHarness(emulator: emulator, server: server, store: store, baseURL: "http://127.0.0.1:\(bound)", keys: keys)
            var failure: (any Error)?
            await withTaskGroup(of: Void.self) { reporting in
                reporting.addTask { await emulator.reporter.run() }
                do { try await body(harness) } catch { failure = error }
                // The apps stop reporting before the server stops: no connection comes in then.
                reporting.cancelAll()
            }
            // Gracefully, never by cancelling: a connection accepted while the server's task is
            // cancelled is never served, and NIO traps on its unfinished writer ("Deinited
            // NIOAsyncWriter without calling finish()", swift-nio issue 3481); it crashed a run.
            await group.triggerGracefulShutdown()
            try? await tasks.waitForAll()
            if let failure {
                await apns.shutdown()
                await emulator.shutdown()
                throw failure
            }
        }
        await apns.shutdown()
        await emulator.shutdown()
    }
}
