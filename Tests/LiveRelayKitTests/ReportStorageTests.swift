import Foundation
@_spi(Adapter) import LiveRelayKit
import Synchronization
import Testing

/// A backlog file that cannot be read for a while, as on a locked iPhone: reading fails until
/// `unlock()`; writing does not (a file written over would lose what it held).
final class LockedStorage: ReportStorage {
    private let state = Mutex((locked: true, data: Data?.none, saves: 0))

    init(holding data: Data?) { state.withLock { $0.data = data } }

    func unlock() { state.withLock { $0.locked = false } }
    var saves: Int { state.withLock { $0.saves } }

    func load() throws -> Data? {
        try state.withLock { state in
            if state.locked { throw CocoaError(.fileReadNoPermission) }
            return state.data
        }
    }

    func save(_ data: Data) throws {
        state.withLock { state in
            state.saves += 1
            state.data = data
        }
    }
}

/// What LiveRelayKit keeps on a real phone survives what real phones do: a locked phone, an app
/// update, a server that refuses the app's key, a report refused for good.
@Suite(.timeLimit(.minutes(2)))
struct ReportStorageTests {
    /// The backlog an earlier launch kept: the type's contract and push-to-start token, reported.
    func earlierLaunch(version: String? = nil) async throws -> Data {
        let kept = MemoryReportStorage()
        let server = ScriptedServer()
        var reporter = iphone
        reporter.appVersion = version
        let first = LiveRelayReporter(reporter: reporter, contracts: [orderContract], transport: server, storage: kept, sleep: Pauses().sleep)
        await first.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        await first.observe(.activity(id: "a1", attributesType: orderType, key: "order-42", pushType: .token))
        try await send(first) { await first.pending.isEmpty }
        // Killed before its activity's token was sent.
        await first.observe(.activityToken(activityID: "a1", token: token(3)))
        return try #require(try kept.load())
    }

    @Test func aBacklogThatCannotBeReadYetIsReadLaterNeverReplaced() async throws {
        let kept = try await earlierLaunch()
        let locked = LockedStorage(holding: kept)
        let lines = Lines()
        let server = ScriptedServer()
        let reporter = LiveRelayReporter(
            reporter: iphone, contracts: [orderContract], transport: server, storage: locked, sleep: Pauses().sleep, log: lines.log)
        // A push-to-start wakes the app on the locked phone: its activity ended meanwhile.
        await reporter.observe(.activity(id: "a1", attributesType: orderType, key: "order-42", pushType: .token))
        await reporter.observe(.activityState(activityID: "a1", state: .dismissed))
        let running = Task { await reporter.run() }
        defer { running.cancel() }
        try await Task.sleep(for: .milliseconds(50))
        #expect(server.attempts == 0, "nothing is sent before the backlog is read")
        #expect(locked.saves == 0, "nothing is written over it")
        #expect(lines.all.filter { $0.contains("cannot be read now") }.count == 1)
        locked.unlock()
        let deadline = ContinuousClock.now + .seconds(20)
        while await !reporter.pending.isEmpty || server.received.count < 2 {
            try #require(ContinuousClock.now < deadline)
            try await Task.sleep(for: .milliseconds(5))
        }
        // What the earlier launch kept first, then what this one saw.
        #expect(server.received == ["POST /v1/activities/order-42/tokens", "POST /v1/activities/order-42/ended"])
    }

    @Test func anAppUpdateReportsEverythingAgainUnderItsVersion() async throws {
        let kept = MemoryReportStorage()
        try kept.save(try await earlierLaunch(version: "1.0 (1)"))
        var updated = iphone
        updated.appVersion = "2.0 (7)"
        let server = ScriptedServer()
        let reporter = LiveRelayReporter(reporter: updated, contracts: [orderContract], transport: server, storage: kept, sleep: Pauses().sleep)
        try await send(reporter) { await reporter.pending.isEmpty }
        #expect(
            server.received == [
                "POST /v1/activities/order-42/tokens", "PUT /v1/contracts/DeliveryAttributes", "POST /v1/push-to-start-tokens",
                "POST /v1/activities/order-42/tokens",
            ])
        // Launched again on the same version: nothing again.
        let again = LiveRelayReporter(reporter: updated, contracts: [orderContract], transport: server, storage: kept, sleep: Pauses().sleep)
        #expect(await again.pending.isEmpty)
    }

    @Test func aTokenTheServerRefusedForGoodIsSentAgainWhenActivityKitHandsItOver() async throws {
        let server = ScriptedServer([.answered(status: 400, retryAfter: nil, message: "bad")])
        let reporter = LiveRelayReporter(reporter: iphone, transport: server, storage: MemoryReportStorage(), sleep: Pauses().sleep)
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        try await send(reporter) { await reporter.pending.isEmpty }
        #expect(server.received.isEmpty)
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        try await send(reporter) { await reporter.pending.isEmpty }
        #expect(server.received == ["POST /v1/push-to-start-tokens"])
    }

    @Test func aRefusedKeyPausesTheReportsAndTellsTheAppNothingIsDropped() async throws {
        let server = ScriptedServer([.answered(status: 401, retryAfter: nil, message: #"{"error":{"code":"unauthorized"}}"#)])
        let pauses = Pauses()
        let lines = Lines()
        let reporter = LiveRelayReporter(reporter: iphone, transport: server, storage: MemoryReportStorage(), sleep: pauses.sleep, log: lines.log)
        let updates = await reporter.statusUpdates()
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        try await send(reporter) { await reporter.pending.isEmpty }
        #expect(pauses.all == [.seconds(3_600)])
        #expect(server.received == ["POST /v1/push-to-start-tokens"], "sent once the pause was over")
        #expect(lines.all.filter { $0.contains("refuses this app's reports") }.count == 1)
        var seen: [ReportingStatus] = []
        for await status in updates {
            seen.append(status)
            if status == .upToDate && seen.count > 1 { break }
        }
        #expect(seen.contains { if case .refused(let why) = $0 { why.contains("401") } else { false } }, "\(seen)")
        #expect(await reporter.status == .upToDate)
    }

    @Test func filesAreTheAppsAloneAndAnUnreadableDeviceIDIsNeverReplaced() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("liverelaykit-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        let backlog = FileReportStorage(url: folder.appendingPathComponent("nested/backlog.json"))
        try backlog.save(Data("{}".utf8))
        func mode(_ path: String) throws -> Int { try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int ?? -1 }
        #expect(try mode(folder.appendingPathComponent("nested").path) == 0o700)
        #expect(try mode(folder.appendingPathComponent("nested/backlog.json").path) == 0o600)
        try backlog.save(Data("{}".utf8))
        #expect(try mode(folder.appendingPathComponent("nested/backlog.json").path) == 0o600, "and after it is replaced")
    }
}

/// An App Store review reads the privacy manifest of every package an app adds.
struct PrivacyManifestTests {
    @Test func theManifestSaysWhatIsCollectedAndWhyAndThatNothingTracks() throws {
        let file = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("LiveRelayKit/Sources/LiveRelayKit/PrivacyInfo.xcprivacy")
        let manifest = try #require(
            try PropertyListSerialization.propertyList(from: try Data(contentsOf: file), format: nil) as? [String: Any])
        #expect(manifest["NSPrivacyTracking"] as? Bool == false)
        let collected = try #require(manifest["NSPrivacyCollectedDataTypes"] as? [[String: Any]])
        // The random device id, and the user id when the app signs one in (`setUser`): each only
        // for the app's own function.
        #expect(
            Set(collected.compactMap { $0["NSPrivacyCollectedDataType"] as? String })
                == ["NSPrivacyCollectedDataTypeDeviceID", "NSPrivacyCollectedDataTypeUserID"])
        #expect(
            collected.allSatisfy {
                ($0["NSPrivacyCollectedDataTypePurposes"] as? [String]) == ["NSPrivacyCollectedDataTypePurposeAppFunctionality"]
                    && $0["NSPrivacyCollectedDataTypeTracking"] as? Bool == false
            })
        // No required-reason API: no UserDefaults, no file timestamps, no boot time, no disk space.
        #expect((manifest["NSPrivacyAccessedAPITypes"] as? [Any])?.isEmpty == true)
    }
}

/// A phone that was offline comes back: what waits goes at once, not after the rest of a
/// back-off of up to five minutes.
@Suite(.timeLimit(.minutes(1)))
struct RetryNowTests {
    /// A reporter whose server cannot be reached once, then answers; its back-off is an hour of
    /// the real clock, so only being cut short sends the report in time.
    func offlineOnce(_ first: SendOutcome = .unreachable("offline")) -> (LiveRelayReporter, ScriptedServer) {
        let server = ScriptedServer([first])
        var policy = RetryPolicy()
        policy.firstPause = .seconds(3_600)
        return (LiveRelayReporter(reporter: iphone, transport: server, storage: MemoryReportStorage(), policy: policy), server)
    }

    func waitForAttempts(_ server: ScriptedServer, _ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while server.attempts < count {
            try #require(ContinuousClock.now < deadline, "\(server.attempts) attempts")
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    @Test func theAppInTheForegroundAgainOrANewReportCutsTheBackOffShort() async throws {
        let (reporter, server) = offlineOnce()
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        let running = Task { await reporter.run() }
        defer { running.cancel() }
        try await waitForAttempts(server, 1)
        try await Task.sleep(for: .milliseconds(20))
        await reporter.retryNow()
        try await waitForAttempts(server, 2)
        #expect(server.received == ["POST /v1/push-to-start-tokens"])

        let (second, secondServer) = offlineOnce()
        await second.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        let sending = Task { await second.run() }
        defer { sending.cancel() }
        try await waitForAttempts(secondServer, 1)
        try await Task.sleep(for: .milliseconds(20))
        await second.observe(.activity(id: "a1", attributesType: orderType, key: "order-42", pushType: .token))
        await second.observe(.activityToken(activityID: "a1", token: token(3)))
        try await waitForAttempts(secondServer, 3)
        #expect(secondServer.received == ["POST /v1/push-to-start-tokens", "POST /v1/activities/order-42/tokens"])
    }

    @Test func aPauseTheServerAskedForIsNotCutShort() async throws {
        let (reporter, server) = offlineOnce(.answered(status: 503, retryAfter: 3_600, message: "maintenance"))
        await reporter.observe(.pushToStartToken(attributesType: orderType, token: token(1)))
        let running = Task { await reporter.run() }
        defer { running.cancel() }
        try await waitForAttempts(server, 1)
        await reporter.retryNow()
        await reporter.observe(.activity(id: "a1", attributesType: orderType, key: "order-42", pushType: .token))
        await reporter.observe(.activityToken(activityID: "a1", token: token(3)))
        try await Task.sleep(for: .milliseconds(100))
        #expect(server.attempts == 1)
    }
}
