import APNsEmulator
import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelayHTTP
import LiveRelayStore
import LiveRelayTesting
import Testing

/// Slow and idle clients cannot keep connections (and the tasks behind them) for as long as they
/// like. These tests trickle bytes in real time: the timeouts are the server's own clock.
@Suite(.timeLimit(.minutes(3)))
struct ConnectionTimeoutTests {
    /// The body deadline well inside the idle one: on a loaded machine a trickle's gaps stretch.
    static let short = HTTPTimeouts(idle: .milliseconds(1500), body: .milliseconds(300))

    @Test func idleAndSlowClientsAreCutOffWhileOthersAreServed() async throws {
        try await withRelayHarness(configure: { _, api in api.timeouts = Self.short }) { relay in
            let port = try #require(Int(relay.baseURL.split(separator: ":").last ?? ""))

            // A connection that never sends a request is closed after the idle timeout.
            let opened = ContinuousClock.now
            let idle = try await RawTCPConnection.connect(port: port)
            try await relay.eventually { idle.isClosed }
            #expect(ContinuousClock.now - opened >= .milliseconds(1400))
            #expect(idle.received.isEmpty)

            // A head sent a byte at a time never completes: closed unanswered, as if idle.
            let slowHead = try await RawTCPConnection.connect(port: port)
            for byte in "GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: a-very-slow-client\r\n" where !slowHead.isClosed {
                try? await slowHead.write(String(byte))
                try await Task.sleep(for: .milliseconds(100))
            }
            try await relay.eventually { slowHead.isClosed }
            #expect(slowHead.received.isEmpty)

            // A body trickled in gets 408 with the API's error shape, and the connection closes.
            let slowBody = try await RawTCPConnection.connect(port: port)
            try await slowBody.write(
                "POST /v1/activities/k/update HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer \(relay.keys[.server]!)\r\n"
                    + "Content-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"contentState\": ")
            for _ in 0..<40 where !slowBody.isClosed {
                try? await slowBody.write(" ")
                try await Task.sleep(for: .milliseconds(50))
            }
            try await relay.eventually { slowBody.isClosed }
            #expect(slowBody.received.hasPrefix("HTTP/1.1 408"))
            #expect(slowBody.received.contains(#""code":"request_timeout""#))

            // Meanwhile everyone else is served.
            #expect(try await relay.get("/v1/health", scope: nil).status == 200)
            #expect(try await relay.get("/v1/activities/k").status == 404)
        }
    }

    @Test func theEmulatorsControlAPIClosesIdleConnectionsToo() async throws {
        try await withDeadline(.seconds(30)) {
            let emulator = try await APNsEmulator.start(.init())
            let port = AsyncStream.makeStream(of: Int.self)
            let application = emulator.controlApplication(port: 0, timeouts: Self.short) { port.continuation.yield($0) }
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await application.runService() }
                var ports = port.stream.makeAsyncIterator()
                let bound = try #require(await ports.next())
                let idle = try await RawTCPConnection.connect(port: bound)
                try await eventually { idle.isClosed }
                #expect(idle.received.isEmpty)
                group.cancelAll()
            }
            await emulator.shutdown()
        }
    }
}
