import APNs
import Foundation
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import NIOEmbedded
import NIOHPACK
import NIOHTTP2
import Testing

@testable import APNsEmulator

/// Faults decided by the responder: which request they take, and what is answered.
@Suite struct FaultSelectionTests {
    let f = Fixture()

    /// The reasons no well-formed request provokes by itself on a token-authenticated
    /// connection; faults make each of them reachable, with the documented status.
    static let infrastructureReasons: [APNsReason] = [
        .internalServerError, .serviceUnavailable, .serviceUnavailableWithSpace, .shutdown, .tooManyRequests,
        .forbidden, .badCertificate, .badCertificateEnvironment, .idleTimeout, .badEnvironmentKeyInToken,
    ]

    @Test(arguments: infrastructureReasons)
    func aRespondFaultAnswersWithTheReasonsStatus(_ reason: APNsReason) {
        f.faults.add(EmulatorFault(EmulatorFault.respond(reason)))
        let id = "123e4567-e89b-12d3-a456-426614174000"
        let reply = answer(f.push, f.deviceRequest { $0.set("apns-id", id) })
        #expect(reply.status == reason.known?.status)
        #expect(reply.reason == reason.rawValue)
        #expect(reply.header("apns-id") == id)
        #expect(f.journal.requests.last?.fault == EmulatorFault.respond(reason))
        #expect(answer(f.push, f.deviceRequest()).status == 200, "count 1: the next request is judged normally")
    }

    @Test func skipLetsRequestsThroughThenCountApplies() {
        f.faults.add(EmulatorFault(.respond(status: 500, reason: .internalServerError), skip: 2, count: 2))
        let statuses = (0..<6).map { _ in answer(f.push, f.deviceRequest()).status }
        #expect(statuses == [200, 200, 500, 500, 200, 200])
        #expect(f.faults.installed.isEmpty, "a spent fault is removed")
    }

    @Test func withoutACountAFaultStaysUntilRemoved() {
        let id = f.faults.add(EmulatorFault(EmulatorFault.respond(.serviceUnavailable), count: nil))
        #expect((0..<3).allSatisfy { _ in answer(f.push, f.deviceRequest()).status == 503 })
        #expect(f.faults.installed.first?.applied == 3)
        #expect(f.faults.remove(id: id))
        #expect(answer(f.push, f.deviceRequest()).status == 200)
    }

    @Test func scopesSelectByTokenOrApp() {
        f.faults.add(EmulatorFault(EmulatorFault.respond(.tooManyRequests), scope: .token(f.token.uppercased()), count: nil))
        f.faults.add(EmulatorFault(EmulatorFault.respond(.internalServerError), scope: .bundleID("com.other.app"), count: nil))
        #expect(answer(f.push, f.deviceRequest()).reason == "TooManyRequests")
        // Another token of the same app is not affected.
        #expect(answer(f.push, f.deviceRequest { $0.path = "/3/device/\(f.goneToken)" }).reason == "Unregistered")
        // The app scope matches the topic without its suffix, and broadcast and channel paths.
        #expect(
            answer(
                f.push,
                f.deviceRequest {
                    $0.path = "/3/device/\(f.otherAppToken)"
                    $0.set("apns-topic", "com.other.app.push-type.liveactivity")
                }
            ).reason == "InternalServerError")
        #expect(answer(f.push, f.broadcastRequest { $0.path = "/4/broadcasts/apps/com.other.app" }).reason == "InternalServerError")
        #expect(
            answer(f.management, f.channelRequest("GET", "all-channels") { $0.path = "/1/apps/com.other.app/all-channels" }).reason
                == "InternalServerError")
        #expect(answer(f.push, f.broadcastRequest()).status == 200)
    }

    @Test func broadcastFaultsEchoTheRequestID() {
        f.faults.add(EmulatorFault(EmulatorFault.respond(.tooManyRequests)))
        let id = "123e4567-e89b-12d3-a456-426614174000"
        let reply = answer(f.push, f.broadcastRequest { $0.set("apns-request-id", id) })
        #expect(reply.status == 429 && reply.header("apns-request-id") == id)
    }

    @Test func connectionFaultsLeaveTheRequestUnansweredAndJournalIt() throws {
        var connection = f.push.makeConnection(id: 1)
        f.faults.add(EmulatorFault(.goAway(reason: .shutdown)))
        guard case .goAway(nil, let debug) = f.push.answer(f.deviceRequest(), connection: &connection) else {
            Issue.record("expected GOAWAY without an answer")
            return
        }
        #expect(try JSONValue(parsing: debug)["reason"] == .string("Shutdown"))

        f.faults.add(EmulatorFault(.shutdown))
        guard case .goAway(.respond(503, _, let body)?, _) = f.push.answer(f.deviceRequest(), connection: &connection) else {
            Issue.record("expected 503 then GOAWAY")
            return
        }
        #expect(try body.map { try JSONValue(parsing: $0)["reason"] } == .string("Shutdown"))

        f.faults.add(EmulatorFault(.resetConnection))
        guard case .closeConnection = f.push.answer(f.deviceRequest(), connection: &connection) else {
            Issue.record("expected the connection to be dropped")
            return
        }

        f.faults.add(EmulatorFault(.stall))
        guard case .noAnswer = f.push.answer(f.deviceRequest(), connection: &connection) else {
            Issue.record("expected the stream to be left open, unanswered")
            return
        }
        #expect(f.journal.requests.map(\.outcome) == ["Unanswered", "Shutdown", "Unanswered", "Unanswered"])
        #expect(f.journal.counts == ["Unanswered": 3, "Shutdown": 1])
    }

    @Test func aDelayedRequestIsStillJudged() {
        f.faults.add(EmulatorFault(.delay(.milliseconds(250))))
        var connection = f.push.makeConnection(id: 1)
        guard case .delayed(let delay, .respond(let status, _, _)) = f.push.answer(f.deviceRequest { $0.body = [] }, connection: &connection) else {
            Issue.record("expected a delayed answer")
            return
        }
        #expect(delay == .milliseconds(250))
        #expect(status == 400)
        #expect(f.journal.requests.last?.reason == .payloadEmpty)
    }
}

/// The stream handler on an embedded channel: frames in, frames out, time moved by hand.
@Suite struct ServerStreamsHandlerTests {
    /// Answers from a closure.
    struct ClosureResponder: RequestResponder {
        let decide: @Sendable (ReceivedRequest) -> ServerAnswer
        func answer(_ request: ReceivedRequest, connection: inout StreamLimit) -> ServerAnswer { decide(request) }
    }

    func channel(
        idle: IdlePolicy? = nil, latency: LatencySetting? = nil, _ decide: @escaping @Sendable (ReceivedRequest) -> ServerAnswer
    ) throws -> EmbeddedChannel {
        let responder = ClosureResponder(decide: decide)
        let freeze = OutputFreeze()
        let handler = ServerStreamsHandler(
            connectionID: 1, responder: responder, connection: StreamLimit(100), freeze: freeze, idle: idle, latency: latency)
        let channel = EmbeddedChannel(handlers: [freeze, handler])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
        return channel
    }

    func request(_ stream: Int, path: String = "/3/device/ab", channel: EmbeddedChannel) throws {
        let headers: HPACKHeaders = [":method": "POST", ":path": path, ":scheme": "https"]
        try channel.writeInbound(HTTP2Frame(streamID: HTTP2StreamID(stream), payload: .headers(.init(headers: headers, endStream: true))))
        channel.pipeline.fireChannelReadComplete()
    }

    func outbound(_ channel: EmbeddedChannel) throws -> [HTTP2Frame.FramePayload] {
        var frames: [HTTP2Frame.FramePayload] = []
        while let frame = try channel.readOutbound(as: HTTP2Frame.self) {
            if case .windowUpdate = frame.payload { continue }  // the receive window's own business
            frames.append(frame.payload)
        }
        return frames
    }

    static let ok = ServerAnswer.respond(status: 200, headers: [], body: nil)

    @Test func goAwayNamesTheLastProcessedStreamAndLaterStreamsStayUnanswered() throws {
        let channel = try channel { request in
            request.path == "/3/device/goaway" ? .goAway(answer: nil, debugData: Array(#"{"reason":"Shutdown"}"#.utf8)) : Self.ok
        }
        try request(1, channel: channel)
        try request(3, path: "/3/device/goaway", channel: channel)
        try request(5, channel: channel)
        let frames = try outbound(channel)
        #expect(frames.count == 2, "one answer, then GOAWAY; stream 5 is not answered")
        guard case .headers = frames.first, case .goAway(let last, let code, let debug) = frames.last else {
            Issue.record("expected HEADERS then GOAWAY, got \(frames)")
            return
        }
        #expect(last == 1 && code == .noError)
        #expect(debug.map { String(buffer: $0) } == #"{"reason":"Shutdown"}"#)
        #expect(!channel.isActive, "the connection is closed after GOAWAY")
    }

    @Test func afterGoAwayTheStreamsItCountsAsProcessedAreStillAnsweredThenTheConnectionCloses() throws {
        let latency = LatencySetting(APNsLatency(fixed: .milliseconds(100)))
        let channel = try channel(latency: latency) { request in
            request.path == "/3/device/goaway" ? .goAway(answer: nil, debugData: Array(#"{"reason":"Shutdown"}"#.utf8)) : Self.ok
        }
        try request(1, channel: channel)
        try request(3, path: "/3/device/goaway", channel: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        // Stream 3's GOAWAY came with the latency too; stream 1 was answered just before it.
        try request(5, channel: channel)
        var frames = try outbound(channel)
        guard frames.count == 2, case .headers = frames[0], case .goAway(let last, _, _) = frames[1] else {
            Issue.record("expected stream 1's answer, then GOAWAY, got \(frames)")
            return
        }
        #expect(last == 1)
        #expect(!channel.isActive, "nothing left to answer: closed")

        // With an answer still to come, the connection waits for it.
        let slow = try self.channel { request in
            switch request.path {
            case "/3/device/goaway": .goAway(answer: nil, debugData: [])
            case "/3/device/slow": .delayed(.milliseconds(200), Self.ok)
            default: Self.ok
            }
        }
        try request(1, path: "/3/device/slow", channel: slow)
        try request(3, path: "/3/device/goaway", channel: slow)
        try request(5, channel: slow)
        frames = try outbound(slow)
        guard frames.count == 1, case .goAway(let named, _, _) = frames[0] else {
            Issue.record("expected GOAWAY alone, got \(frames)")
            return
        }
        #expect(named == 1 && slow.isActive, "stream 1 is processed, its answer still to come; stream 5 never")
        slow.embeddedEventLoop.advanceTime(by: .milliseconds(200))
        frames = try outbound(slow)
        guard frames.count == 2, case .headers = frames[0], case .goAway = frames[1] else {
            Issue.record("expected stream 1's answer, then GOAWAY again, got \(frames)")
            return
        }
        #expect(!slow.isActive, "then it closes")
    }

    @Test func aDelayedAnswerIsWrittenWhenItsTimeComes() throws {
        let channel = try channel { _ in .delayed(.seconds(5), Self.ok) }
        try request(1, channel: channel)
        #expect(try outbound(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(4999))
        #expect(try outbound(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        let frames = try outbound(channel)
        guard frames.count == 1, case .headers(let headers) = frames[0] else {
            Issue.record("expected the answer, got \(frames)")
            return
        }
        #expect(headers.headers.first(name: ":status") == "200")
    }

    @Test func aFrozenConnectionHoldsEveryAnswerUntilItThawsThenWritesThemAll() throws {
        let latency = LatencySetting(APNsLatency(fixed: .milliseconds(100)))
        let channel = try channel(latency: latency) { request in
            request.path == "/3/device/freeze" ? .frozen(.seconds(5), Self.ok) : Self.ok
        }
        try request(1, channel: channel)
        try request(3, path: "/3/device/freeze", channel: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        // Stream 1's answer was due as the freeze began; stream 3 froze the connection.
        #expect(try outbound(channel).count == 1, "stream 1 answered before the freeze")
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        try request(5, channel: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(3900))
        #expect(try outbound(channel).isEmpty, "nothing while frozen, stream 5's answer due meanwhile included")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        let thawed = try outbound(channel)
        #expect(thawed.count == 2, "streams 3 and 5 together when it thaws, 5 s after stream 3's answer was due: \(thawed)")
        try request(7, channel: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        #expect(try outbound(channel).count == 1, "then as before")
    }

    @Test func withLatencyEveryStreamIsAnsweredThatMuchLaterOnItsOwn() throws {
        let latency = LatencySetting(APNsLatency(fixed: .milliseconds(100)))
        let channel = try channel(latency: latency) { request in request.path == "/3/device/reset" ? .resetStream(.refusedStream) : Self.ok }
        try request(1, channel: channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(60))
        try request(3, path: "/3/device/reset", channel: channel)
        #expect(try outbound(channel).isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(40))
        guard case .headers = try outbound(channel).first else {
            Issue.record("stream 1 after 100 ms")
            return
        }
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(59))
        #expect(try outbound(channel).isEmpty, "stream 3 came 60 ms later, so it is answered 60 ms later")
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        guard case .rstStream(.refusedStream) = try outbound(channel).first else {
            Issue.record("stream 3's reset after 100 ms")
            return
        }
        // Changed while running: from the next request on.
        latency.latency = .none
        try request(5, channel: channel)
        #expect(try outbound(channel).count == 1)
    }

    @Test func anIdleConnectionGetsGoAwayIdleTimeout() throws {
        let debug = APNsError(status: 400, reason: .idleTimeout).body
        let channel = try channel(idle: IdlePolicy(timeout: .seconds(60), debugData: debug)) { _ in Self.ok }
        channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        try request(1, channel: channel)
        #expect(try outbound(channel).count == 1, "the answer only")
        channel.embeddedEventLoop.advanceTime(by: .seconds(59))
        #expect(try outbound(channel).isEmpty, "a request at 59 s restarted the idle period")
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(1))
        let frames = try outbound(channel)
        guard case .goAway(let last, _, let data)? = frames.first else {
            Issue.record("expected GOAWAY, got \(frames)")
            return
        }
        #expect(last == 1)
        #expect(try data.map { try JSONValue(parsing: $0.readableBytesView)["reason"] } == .string("IdleTimeout"))
        #expect(!channel.isActive)
    }

    @Test func droppingTheConnectionAnswersNothing() throws {
        let channel = try channel { _ in .closeConnection }
        try request(1, channel: channel)
        #expect(try outbound(channel).isEmpty)
        #expect(!channel.isActive)
    }
}
