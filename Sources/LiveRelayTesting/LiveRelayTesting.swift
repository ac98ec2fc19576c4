import APNs
import APNsEmulator
import Crypto
import Foundation
import LiveActivityKit
import LiveRelay
import Logging
import NIOCore
import NIOPosix
import SimulatedDevices
import Synchronization

/// Runs `body`, failing with `DeadlineExceeded` if it has not finished within `limit`. Every
/// await on the network in a test goes through this, so a hang fails instead of blocking CI. The
/// time counts from when the test holds one of the `TestSlots`, so it is the test's own and a few
/// others', not the whole suite's: the limit catches hangs, not a slow machine.
package func withDeadline<T: Sendable>(
    _ limit: Duration = .seconds(60), _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await TestSlots.holding { try await deadline(limit, body) }
}

private func deadline<T: Sendable>(_ limit: Duration, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: limit)
            throw DeadlineExceeded(limit: limit)
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}

package struct DeadlineExceeded: Error, CustomStringConvertible {
    package let limit: Duration
    package var description: String { "the test did not finish within \(limit)" }
}

/// A wall clock a test moves by hand.
package final class ManualClock: Sendable {
    private let current: Mutex<Date>

    package init(_ start: Date = Date(timeIntervalSince1970: 1_795_000_000)) {
        current = Mutex(start)
    }

    package var now: Date { current.withLock { $0 } }

    package func advance(by interval: TimeInterval) {
        current.withLock { $0 = $0.addingTimeInterval(interval) }
    }

    /// For `APNsClient.Configuration.now`.
    package var function: @Sendable () -> Date { { [self] in self.now } }
}

/// A fresh P-256 signing key with made-up ids, and its public half for verifying tokens.
package struct TestSigningKey: Sendable {
    package let privateKey: P256.Signing.PrivateKey
    package let signingKey: APNsSigningKey
    package var publicKey: P256.Signing.PublicKey { privateKey.publicKey }
    /// The key as a `.p8` file holds it.
    package var pem: String { privateKey.pemRepresentation }

    package init(keyID: String = "KEYID12345", teamID: String = "TEAMID1234") {
        privateKey = P256.Signing.PrivateKey()
        signingKey = try! APNsSigningKey(privateKey: privateKey, keyID: keyID, teamID: teamID)
    }

    /// `bundleID` as an app signed with this key.
    package func app(_ bundleID: BundleID) -> AppRegistration {
        AppRegistration(bundleID: bundleID, teamID: signingKey.teamID, keyID: signingKey.keyID, signingKey: pem)
    }
}

/// A 160-character hex token, the usual length of Live Activity tokens.
package func liveActivityToken(_ seed: UInt8 = 0xAB) -> DeviceToken {
    try! DeviceToken(String(repeating: String(format: "%02x", seed), count: 80))
}

/// An APNs endpoint on loopback (HTTP/2 over TLS, port 0) that records every request and
/// answers from a script, or accepts like APNs when the script is empty.
package final class ScriptedAPNsServer: Sendable {
    package let server: HTTP2TLSServer
    package let caFile: String
    private let recorder: Recorder

    private final class Recorder: RequestResponder {
        struct State {
            var script: [ServerAnswer] = []
            var received: [ReceivedRequest] = []
            var fallback: (@Sendable (ReceivedRequest) -> ServerAnswer)?
        }

        let state = Mutex(State())
        let streamLimit: Int

        init(streamLimit: Int) { self.streamLimit = streamLimit }

        func makeConnection(id: Int) -> StreamLimit { StreamLimit(streamLimit) }

        func answer(_ request: ReceivedRequest, connection: inout StreamLimit) -> ServerAnswer {
            state.withLock { state in
                state.received.append(request)
                if !state.script.isEmpty { return state.script.removeFirst() }
                if let fallback = state.fallback { return fallback(request) }
                return AcceptAllResponder().answer(request)
            }
        }
    }

    private init(server: HTTP2TLSServer, caFile: String, recorder: Recorder) {
        self.server = server
        self.caFile = caFile
        self.recorder = recorder
    }

    package static func start(maxConcurrentStreams: Int = 1000) async throws -> ScriptedAPNsServer {
        let certificates = try EmulatorCertificates.generate()
        let caFile = TestFiles.path("scripted-ca", pathExtension: "pem")
        try certificates.writeCertificateAuthority(to: caFile)
        let recorder = Recorder(streamLimit: maxConcurrentStreams)
        let server = try await HTTP2TLSServer.start(certificates: certificates, responder: recorder)
        return ScriptedAPNsServer(server: server, caFile: caFile, recorder: recorder)
    }

    /// The next requests get these answers, in order; then the fallback applies again.
    package func enqueue(_ answers: ServerAnswer...) {
        recorder.state.withLock { $0.script.append(contentsOf: answers) }
    }

    /// How requests are answered when the script is empty (default: accepted like APNs).
    package func setFallback(_ fallback: @escaping @Sendable (ReceivedRequest) -> ServerAnswer) {
        recorder.state.withLock { $0.fallback = fallback }
    }

    /// Every request received so far.
    package var received: [ReceivedRequest] { recorder.state.withLock { $0.received } }

    /// An environment pointing both services at this server, trusting its CA.
    package var environment: APNsHosts {
        .custom(host: "127.0.0.1", port: server.port, channelManagementPort: server.port, caFile: caFile)
    }

    package func shutdown() async {
        await server.shutdown()
        try? FileManager.default.removeItem(atPath: caFile)
    }

    /// An APNs error answer: the status, `{"reason": …}` (plus `timestamp` in ms) and `apns-id`.
    package static func rejection(
        _ status: Int, _ reason: String, timestampMilliseconds: Int64? = nil, apnsID: String = UUID().uuidString.lowercased()
    ) -> ServerAnswer {
        let error = APNsError(
            status: status, reason: APNsReason(reason),
            timestamp: timestampMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) })
        return .respond(
            status: status, headers: [("apns-id", apnsID), ("content-type", "application/json")], body: error.body)
    }
}

/// Whether two JSON documents mean the same: objects compared without regard to key order,
/// numbers by value (`0.0` equals `0`). For comparing against Apple's pretty-printed examples.
package func jsonEquivalent(_ a: JSONValue, _ b: JSONValue) -> Bool {
    switch (a, b) {
    case (.number(let x), .number(let y)): return Double(x) == Double(y)
    case (.array(let x), .array(let y)): return x.count == y.count && zip(x, y).allSatisfy(jsonEquivalent)
    case (.object(let x), .object(let y)):
        guard x.count == y.count else { return false }
        return x.allSatisfy { member in b[member.key].map { jsonEquivalent(member.value, $0) } ?? false }
    default: return a == b
    }
}

extension JSONValue {
    /// The same document with every object's keys sorted: number literals and strings untouched.
    /// Foundation's `JSONEncoder` on Linux writes keys in hash order, which differs between runs.
    package var sortedKeys: JSONValue {
        switch self {
        case .array(let elements): .array(elements.map(\.sortedKeys))
        case .object(let members): .object(members.map { ($0.key, $0.value.sortedKeys) }.sorted { $0.0 < $1.0 })
        default: self
        }
    }
}

/// A running emulator, its CA written to a temporary file, and our client trusting its sandbox, signing
/// with `key` (registered with the emulator unless `registerKey` is false) on the emulator's
/// clock, on `connections`; all under a deadline, and shut down afterwards.
package func withEmulatorAndClient(
    _ configuration: APNsEmulator.Configuration = .init(), key: TestSigningKey = TestSigningKey(), registerKey: Bool = true,
    connections: ClosedRange<Int> = 1...1,
    _ body: @escaping @Sendable (APNsEmulator, APNsClient) async throws -> Void
) async throws {
    try await withDeadline {
        let emulator = try await APNsEmulator.start(configuration)
        if registerKey {
            emulator.registry.register(EmulatorKey(keyID: key.signingKey.keyID, teamID: key.signingKey.teamID, publicKey: key.publicKey))
        }
        let caFile = TestFiles.path("emulator-ca", pathExtension: "pem")
        defer { try? FileManager.default.removeItem(atPath: caFile) }
        do {
            try emulator.certificates.writeCertificateAuthority(to: caFile)
            // As long as the deadline: with every suite running at once, an answer may wait its turn.
            let client = APNsClient.Configuration(
                environment: emulator.clientEnvironment(.sandbox, caFile: caFile), signingKey: key.signingKey, connectionsPerHost: connections,
                requestTimeout: .seconds(60),
                now: emulator.clock.function)
            try await withAPNsClient(configuration: client) { apns in try await body(emulator, apns) }
        } catch {
            await emulator.shutdown()
            throw error
        }
        await emulator.shutdown()
    }
}

/// Log lines kept in memory, for tests of what the server logs.
package final class CapturedLogs: Sendable {
    package struct Line: Sendable {
        package var level: Logger.Level
        package var message: String
        package var metadata: [String: String]
    }

    private let lines = Mutex<[Line]>([])

    package init() {}

    package var all: [Line] { lines.withLock { $0 } }

    /// The lines whose message contains `text`.
    package func lines(containing text: String) -> [Line] { all.filter { $0.message.contains(text) } }

    /// A logger that writes here, from `level` up.
    package func logger(label: String = "liverelay.tests", level: Logger.Level = .info) -> Logger {
        var logger = Logger(label: label) { _ in Handler(logs: self) }
        logger.logLevel = level
        return logger
    }

    fileprivate func append(_ line: Line) { lines.withLock { $0.append(line) } }

    private struct Handler: LogHandler {
        let logs: CapturedLogs
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            logs.append(Line(level: event.level, message: "\(event.message)", metadata: merged.mapValues { "\($0)" }))
        }
    }
}

/// A plain TCP connection that writes what it is told, when it is told, and keeps what comes back:
/// for tests of slow and idle clients.
package final class RawTCPConnection: Sendable {
    private let channel: any Channel
    private let reader: Reader

    private init(channel: any Channel, reader: Reader) {
        self.channel = channel
        self.reader = reader
    }

    package static func connect(host: String = "127.0.0.1", port: Int) async throws -> RawTCPConnection {
        let reader = Reader()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelInitializer { channel in channel.eventLoop.makeCompletedFuture { try channel.pipeline.syncOperations.addHandler(reader) } }
            .connect(host: host, port: port)
            .get()
        return RawTCPConnection(channel: channel, reader: reader)
    }

    /// Everything received so far, as text.
    package var received: String { reader.state.withLock { String(decoding: $0.bytes, as: UTF8.self) } }
    /// Whether the other end closed the connection.
    package var isClosed: Bool { reader.state.withLock { $0.closed } }

    package func write(_ text: String) async throws {
        try await channel.writeAndFlush(ByteBuffer(string: text))
    }

    package func close() async {
        try? await channel.close()
    }

    private final class Reader: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let state = Mutex<(bytes: [UInt8], closed: Bool)>(([], false))

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            let buffer = unwrapInboundIn(data)
            state.withLock { $0.bytes += buffer.readableBytesView }
        }

        func channelInactive(context: ChannelHandlerContext) {
            state.withLock { $0.closed = true }
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
