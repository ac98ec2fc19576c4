import Foundation
@_spi(Adapter) import LiveRelayKit
import LiveRelayTesting
import Synchronization
import Testing

/// A server that answers as it is told, and remembers what reached it.
final class ScriptedServer: ReportTransport {
    private let state = Mutex((answers: [SendOutcome](), received: [ReportRequest](), attempts: 0))

    /// Answers given in turn; when none is left, `200`.
    init(_ answers: [SendOutcome] = []) { state.withLock { $0.answers = answers } }

    func send(_ request: ReportRequest) async -> SendOutcome {
        state.withLock { state in
            state.attempts += 1
            let answer = state.answers.isEmpty ? .answered(status: 200, retryAfter: nil, message: "") : state.answers.removeFirst()
            if case .answered(let status, _, _) = answer, (200..<300).contains(status) { state.received.append(request) }
            return answer
        }
    }

    /// The paths of what the server acknowledged, in order.
    var received: [String] { state.withLock { $0.received.map { "\($0.method) \($0.path)" } } }
    var attempts: Int { state.withLock { $0.attempts } }
}

/// The pauses the reporter asked for, taken at once: tests do not sleep.
final class Pauses: Sendable {
    private let taken = Mutex([Duration]())
    var all: [Duration] { taken.withLock { $0 } }
    var sleep: @Sendable (Duration) async throws -> Void {
        { pause in
            try Task.checkCancellation()
            self.taken.withLock { $0.append(pause) }
            await Task.yield()
        }
    }
}

/// The background time a reporter asks for: how many spans began, how many are open now.
final class BackgroundTimeLedger: Sendable {
    private let spans = Mutex((begun: 0, open: 0))
    var state: (begun: Int, open: Int) { spans.withLock { $0 } }
    var backgroundTime: BackgroundTime {
        BackgroundTime { _ in
            self.spans.withLock { $0 = ($0.begun + 1, $0.open + 1) }
            return { self.spans.withLock { $0.open -= 1 } }
        }
    }
}

/// A transport that notes how many spans of background time are open while it sends.
final class WatchedTransport: ReportTransport {
    let server: ScriptedServer
    let time: BackgroundTimeLedger
    private let seen = Mutex([Int]())
    var openDuringSends: [Int] { seen.withLock { $0 } }
    init(server: ScriptedServer, time: BackgroundTimeLedger) { (self.server, self.time) = (server, time) }
    func send(_ request: ReportRequest) async -> SendOutcome {
        let open = time.state.open
        seen.withLock { $0.append(open) }
        return await server.send(request)
    }
}

final class Lines: Sendable {
    private let lines = Mutex([String]())
    var all: [String] { lines.withLock { $0 } }
    var log: @Sendable (String) -> Void { { line in self.lines.withLock { $0.append(line) } } }
}

let iphone = Reporter(deviceID: "iphone-1", bundleID: "com.example.app", environment: .sandbox)

/// A backlog file of its own, in the test process's folder (removed when the process ends).
func storage() -> FileReportStorage {
    FileReportStorage(url: URL(fileURLWithPath: TestFiles.path("liverelaykit")).appendingPathComponent("backlog.json"))
}

/// Runs `reporter` until `done` holds (looking every 5 ms, for at most 30 s), then stops it.
func send(_ reporter: LiveRelayReporter, until done: @escaping @Sendable () async -> Bool) async throws {
    let running = Task { await reporter.run() }
    defer { running.cancel() }
    let deadline = ContinuousClock.now + .seconds(30)
    while await !done() {
        try #require(ContinuousClock.now < deadline, "the reports did not arrive")
        try await Task.sleep(for: .milliseconds(5))
    }
}

@Suite(.timeLimit(.minutes(3)))
struct LiveRelayReporterTests {
    @Test func whileTheServerIsDownReportsWaitAndThenArriveOnceInOrder() async throws {
        let down = Array(repeating: SendOutcome.unreachable("connection refused"), count: 5)
        let server = ScriptedServer(down + [.answered(status: 503, retryAfter: 7, message: "")])
        let pauses = Pauses()
        let reporter = LiveRelayReporter(reporter: iphone, contracts: [orderContract], transport: server, storage: storage(), sleep: pauses.sleep)
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        await reporter.observe(.activity(id: "a1", attributesType: orderType, key: "order-42", pushType: .token))
        await reporter.observe(.activityToken(activityID: "a1", token: token(3)))
        await reporter.observe(.activityState(activityID: "a1", state: .dismissed))
        try await send(reporter) { await reporter.pending.isEmpty }
        #expect(
            server.received == [
                "PUT /v1/contracts/DeliveryAttributes", "POST /v1/push-to-start-tokens", "POST /v1/activities/order-42/tokens",
                "POST /v1/activities/order-42/ended",
            ])
        // Back-off doubling from a second, then the server's Retry-After.
        #expect(pauses.all == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(16), .seconds(7)])
    }

    /// Each send runs inside time asked of the system, ended once answered, whether the server
    /// took it or could not be reached: an app woken for a few seconds finishes the request.
    @Test func eachSendRunsInsideBackgroundTimeAskedForIt() async throws {
        let time = BackgroundTimeLedger()
        let server = ScriptedServer([.unreachable("offline")])
        let watched = WatchedTransport(server: server, time: time)
        let reporter = LiveRelayReporter(
            reporter: iphone, transport: watched, storage: storage(), backgroundTime: time.backgroundTime, sleep: Pauses().sleep)
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        await reporter.observe(.activity(id: "a1", attributesType: orderType, key: "order-42", pushType: .token))
        await reporter.observe(.activityToken(activityID: "a1", token: token(3)))
        try await send(reporter) { await reporter.pending.isEmpty }
        #expect(server.attempts == 3)
        #expect(watched.openDuringSends == [1, 1, 1], "every send inside exactly one span of background time")
        #expect(time.state == (begun: 3, open: 0), "each span ended once its send was answered")
    }

    /// The backend's grant goes with the reports made under its key, and with no other.
    @Test func aGrantGoesWithTheTokenReportOfItsKey() async throws {
        let server = ScriptedServer()
        let reporter = LiveRelayReporter(reporter: iphone, contracts: [], transport: server, storage: storage(), sleep: Pauses().sleep)
        await reporter.grant("lrg1.granted", forKey: "order-42")
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        await reporter.observe(.activity(id: "a1", attributesType: orderType, key: "order-42", pushType: .token))
        await reporter.observe(.activityToken(activityID: "a1", token: token(3)))
        await reporter.observe(.activity(id: "a2", attributesType: orderType, key: "order-43", pushType: .token))
        await reporter.observe(.activityToken(activityID: "a2", token: token(4)))
        try await send(reporter) { await reporter.pending.isEmpty }
        let granted = await reporter.recent.filter { String(decoding: $0.request.body, as: UTF8.self).contains(#""grant":"lrg1.granted""#) }
        #expect(granted.map(\.request.path) == ["/v1/activities/order-42/tokens"])
    }

    /// A token the server refuses for want of the backend's grant waits, out of the way of the
    /// reports after it, and goes (with the grant) once the app hands one over.
    @Test func aReportRefusedForWantOfAGrantWaitsForItAndThenGoes() async throws {
        let refusal = #"{"error":{"code":"grant_required","field":"grant","message":"…"}}"#
        let server = ScriptedServer([.answered(status: 403, retryAfter: nil, message: refusal)])
        let reporter = LiveRelayReporter(reporter: iphone, contracts: [], transport: server, storage: storage(), sleep: Pauses().sleep)
        await reporter.observe(.activity(id: "a1", attributesType: orderType, key: "order-42", pushType: .token))
        await reporter.observe(.activityToken(activityID: "a1", token: token(3)))
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        try await send(reporter) { await reporter.pending.isEmpty }
        #expect(server.received == ["POST /v1/push-to-start-tokens"], "the token waits; the next report went")
        #expect(await reporter.awaitingGrant.count == 1)
        await reporter.grant("lrg1.order-42", forKey: "order-42")
        try await send(reporter) {
            let (pending, waiting) = (await reporter.pending, await reporter.awaitingGrant)
            return pending.isEmpty && waiting.isEmpty
        }
        #expect(server.received == ["POST /v1/push-to-start-tokens", "POST /v1/activities/order-42/tokens"])
        let sent = await reporter.recent.last.map { String(decoding: $0.request.body, as: UTF8.self) } ?? ""
        #expect(sent.contains(#""grant":"lrg1.order-42""#), "\(sent)")
    }

    /// Signed in, the push-to-start token is reported again with the user and the backend's grant
    /// for that user; signed out, again without.
    @Test func signingInAndOutReportsThePushToStartTokenWithTheUserAndWithout() async throws {
        let server = ScriptedServer()
        let reporter = LiveRelayReporter(reporter: iphone, contracts: [], transport: server, storage: storage(), sleep: Pauses().sleep)
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        try await send(reporter) { await reporter.pending.isEmpty }
        await reporter.setUser("alice", grant: "lrg1.alice")
        try await send(reporter) { await reporter.pending.isEmpty }
        await reporter.setUser(nil, grant: nil)
        try await send(reporter) { await reporter.pending.isEmpty }
        let bodies = await reporter.recent.map { String(decoding: $0.request.body, as: UTF8.self) }
        #expect(bodies.count == 3, "\(bodies)")
        #expect(bodies.map { $0.contains(#""userID":"alice""#) && $0.contains(#""grant":"lrg1.alice""#) } == [false, true, false], "\(bodies)")
    }

    @Test func aRelaunchSendsWhatWasNotAcknowledgedAndNothingThatWas() async throws {
        let file = storage()
        let server = ScriptedServer()
        let first = LiveRelayReporter(reporter: iphone, contracts: [orderContract], transport: server, storage: file, sleep: Pauses().sleep)
        await first.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        try await send(first) { await first.pending.isEmpty }
        #expect(server.received.count == 2)
        // The app is killed with a report not sent yet.
        await first.observe(.activity(id: "a1", attributesType: orderType, key: "order-42", pushType: .token))
        await first.observe(.activityToken(activityID: "a1", token: token(3)))

        let second = LiveRelayReporter(reporter: iphone, contracts: [orderContract], transport: server, storage: file, sleep: Pauses().sleep)
        #expect(await second.pending.count == 1)
        // ActivityKit hands the relaunched app its current tokens again: already reported.
        await second.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        await second.observe(.activity(id: "a1", attributesType: orderType, key: "order-42", pushType: .token))
        await second.observe(.activityToken(activityID: "a1", token: token(3)))
        try await send(second) { await second.pending.isEmpty }
        #expect(server.received == ["PUT /v1/contracts/DeliveryAttributes", "POST /v1/push-to-start-tokens", "POST /v1/activities/order-42/tokens"])
    }

    @Test func aReportTheServerRefusesForGoodIsDroppedWithALogLineAndTheNextGoesOn() async throws {
        let server = ScriptedServer([
            .answered(status: 429, retryAfter: nil, message: "slow down"),
            .answered(status: 404, retryAfter: nil, message: #"{"error":{"code":"not_found"}}"#),
        ])
        let lines = Lines()
        let reporter = LiveRelayReporter(reporter: iphone, transport: server, storage: storage(), sleep: Pauses().sleep, log: lines.log)
        await reporter.observe(.activity(id: "a1", attributesType: orderType, key: "gone", pushType: .token))
        await reporter.observe(.activityToken(activityID: "a1", token: token(3)))
        await reporter.observe(.activity(id: "a2", attributesType: orderType, key: "order-43", pushType: .token))
        await reporter.observe(.activityToken(activityID: "a2", token: token(4)))
        try await send(reporter) { await reporter.pending.isEmpty }
        // 429 was retried; 404 dropped.
        #expect(server.attempts == 3)
        #expect(server.received == ["POST /v1/activities/order-43/tokens"])
        #expect(lines.all.count == 1 && lines.all[0].contains("404") && lines.all[0].contains("gone"))
        // A token is never written whole in a log line.
        let whole = token(3).map { String(format: "%02x", $0) }.joined()
        #expect(!lines.all[0].contains(whole) && lines.all[0].contains("the update token \(whole.prefix(4))…"), "\(lines.all)")
        #expect(
            await reporter.recent.map(\.decision) == [
                .drop(reason: #"the server refused it for good (404): {"error":{"code":"not_found"}}"#), .acknowledged,
            ])
    }

    @Test func cancellingTheSenderStopsItWhetherItWaitsForWorkOrForTheServer() async throws {
        let idle = LiveRelayReporter(reporter: iphone, transport: ScriptedServer(), storage: storage())
        let waiting = Task { await idle.run() }
        try await Task.sleep(for: .milliseconds(20))
        waiting.cancel()
        try await ended(waiting)
        // Waiting out a minute's back-off with the real clock: cancelled, it ends at once.
        let server = ScriptedServer(Array(repeating: .unreachable("down"), count: 100))
        var policy = RetryPolicy()
        policy.firstPause = .seconds(60)
        let failing = LiveRelayReporter(reporter: iphone, transport: server, storage: storage(), policy: policy)
        await failing.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        let retrying = Task { await failing.run() }
        while server.attempts == 0 { try await Task.sleep(for: .milliseconds(5)) }
        retrying.cancel()
        try await ended(retrying)
        #expect(await failing.pending.count == 1 && server.attempts == 1)
    }

    /// Fails unless `task` ends within thirty seconds (its back-off is a minute).
    private func ended(_ task: Task<Void, Never>) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        let done = Lines()
        let watcher = Task {
            await task.value
            done.log("ended")
        }
        defer { watcher.cancel() }
        while done.all.isEmpty {
            try #require(ContinuousClock.now < deadline, "the sender did not stop")
            try await Task.sleep(for: .milliseconds(5))
        }
    }
}

extension LiveRelayReporterTests {
    /// While the server is away, a token replaces the older one of the same type or activity
    /// waiting in the backlog: the server needs only the newest, and the file stays small.
    /// WidgetKit's tokens in other people's timing: handed over while the server is down, the
    /// widget token rotated twice meanwhile (the first, perhaps on its way, and the newest wait; the
    /// one between is needless), the app killed before it sent, the next launch sends what waited,
    /// in order, and nothing WidgetKit hands it again.
    @Test func widgetTokensWaitOutAnOutageAndARelaunchAndArriveOnce() async throws {
        let file = storage()
        let down = ScriptedServer(Array(repeating: SendOutcome.unreachable("offline"), count: 3))
        let first = LiveRelayReporter(reporter: iphone, transport: down, storage: file, sleep: Pauses().sleep)
        let small = [Report.Widget(kind: "order", family: "systemSmall")]
        for byte in UInt8(1)...3 { await first.observe(.widgetPushInfo(token: token(byte), widgets: small)) }
        await first.observe(.controlPushInfo([ObservedControl(kind: "door", token: token(4))]))
        #expect(
            await first.pending == [
                .widgetTokens(token: hex(1), widgets: small), .widgetTokens(token: hex(3), widgets: small),
                .controlTokens([Report.Control(kind: "door", token: hex(4))]),
            ])
        // Killed before anything went; launched later, on the network again.
        let up = ScriptedServer()
        let second = LiveRelayReporter(reporter: iphone, transport: up, storage: file, sleep: Pauses().sleep)
        await second.observe(.widgetPushInfo(token: token(3), widgets: small))
        await second.observe(.controlPushInfo([ObservedControl(kind: "door", token: token(4))]))
        try await send(second) { await second.pending.isEmpty }
        #expect(up.received == ["POST /v1/widget-tokens", "POST /v1/widget-tokens", "POST /v1/control-tokens"])
        #expect(down.received.isEmpty)
    }

    @Test func aNewerTokenReplacesTheOneWaitingBehindTheFirst() async throws {
        let reporter = LiveRelayReporter(reporter: iphone, transport: ScriptedServer(), storage: storage())
        await reporter.observe(.activity(id: "a1", attributesType: orderType, key: "k", pushType: .token))
        for byte in UInt8(1)...5 { await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(byte))) }
        for byte in UInt8(6)...8 { await reporter.observe(.activityToken(activityID: "a1", token: token(byte))) }
        #expect(
            await reporter.pending == [
                .pushToStartToken(attributesType: orderType, token: hex(1), frequentPushesEnabled: false),
                .pushToStartToken(attributesType: orderType, token: hex(5), frequentPushesEnabled: false),
                .activityToken(key: "k", activityID: "a1", attributesType: orderType, token: hex(8), frequentPushesEnabled: false),
            ])
    }
}

extension LiveRelayReporterTests {
    /// One sender at a time: a second `run()` while one sends returns at once, saying so, and
    /// the first goes on.
    @Test func aSecondSenderReturnsAtOnce() async throws {
        let lines = Lines()
        let server = ScriptedServer()
        let reporter = LiveRelayReporter(reporter: iphone, transport: server, storage: storage(), log: lines.log)
        let first = Task { await reporter.run() }
        defer { first.cancel() }
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        while server.received.isEmpty { try await Task.sleep(for: .milliseconds(5)) }
        await reporter.run()
        #expect(lines.all == ["LiveRelayKit: run() called while already sending; ignored"])
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(2)))
        while server.received.count < 2 { try await Task.sleep(for: .milliseconds(5)) }
    }
}
