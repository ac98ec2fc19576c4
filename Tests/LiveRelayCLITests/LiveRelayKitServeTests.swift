import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import SimulatedDevices
import Testing

/// LiveRelayKit inside a simulated iPhone, reporting to a real `serve` that goes away and comes
/// back, and an app that is killed and launched again: nothing is lost, nothing is sent twice.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct LiveRelayKitServeTests {
    static let app = ServeCommandTests.bundleID

    /// The server down for 30 seconds while an activity starts in the app and the person then
    /// removes it: once it is back, both reports arrive, once each, in order.
    @Test func whileTheServerIsDownReportsWaitAndArriveOnceInOrderWhenItIsBack() async throws {
        try await Self.withServerAway { setup, emulator in
            let id = try Self.requestActivity("order-9", on: emulator)
            emulator.clock.advance(by: emulator.configuration.devices.tokenIssueDelay)
            emulator.devices.advanceAll()
            try emulator.devices.withDevice("iphone-1") { device, now in ((), device.dismissByPerson(activityID: id, at: now)) }
            // Thirty seconds of the device's time pass with the server away: the app keeps trying.
            for _ in 0..<30 {
                emulator.clock.advance(by: 1)
                try await Task.sleep(for: .milliseconds(30))
            }
            #expect(Self.delivered(emulator).filter { $0.contains("order-9") }.isEmpty)

            let server = try await ServeProcess.start(Self.samePort(setup))
            defer { Task { _ = await server.stop() } }
            try await eventually {
                emulator.clock.advance(by: 5)
                return Self.delivered(emulator).filter { $0.contains("order-9") }.count == 2
            }
            #expect(
                Self.delivered(emulator).filter { $0.contains("order-9") } == [
                    "/v1/activities/order-9/tokens 201", "/v1/activities/order-9/ended 200",
                ])
            let tokens = try await setup.outbox.activityTokens(app: Self.app, key: "order-9")
            #expect(tokens.map(\.state) == [.dismissed] && tokens.map(\.stateReason) == ["reported by the device (person)"])
            #expect(await server.stop() == 0)
        }
    }

    /// The app is killed with a report not sent, and launched again (a new LiveRelayKit on the
    /// same storage): what the server acknowledged before is not sent again, what it had not
    /// heard arrives.
    @Test func aRelaunchedAppSendsWhatItHadNotSentAndNothingItHad() async throws {
        try await Self.withServerAway { setup, emulator in
            #expect(Self.delivered(emulator) == ["/v1/contracts/DeliveryAttributes 200", "/v1/push-to-start-tokens 201"])
            _ = try Self.requestActivity("order-10", on: emulator)
            emulator.clock.advance(by: emulator.configuration.devices.tokenIssueDelay)
            emulator.devices.advanceAll()

            let target = try #require(emulator.reporter.target(deviceID: "iphone-1", bundleID: Self.app))
            try emulator.reporter.setTarget(nil, deviceID: "iphone-1", bundleID: Self.app)
            try emulator.reporter.setTarget(target, deviceID: "iphone-1", bundleID: Self.app)
            let server = try await ServeProcess.start(Self.samePort(setup))
            defer { Task { _ = await server.stop() } }
            try await eventually {
                emulator.clock.advance(by: 5)
                return Self.delivered(emulator).count == 3
            }
            #expect(
                Self.delivered(emulator) == [
                    "/v1/contracts/DeliveryAttributes 200", "/v1/push-to-start-tokens 201", "/v1/activities/order-10/tokens 201",
                ])
            #expect(try await setup.outbox.activityTokens(app: Self.app, key: "order-10").map(\.state) == [.live])
            #expect(await server.stop() == 0)
        }
    }

    /// An iPhone whose app reported its push-to-start token to `serve`, which is then stopped.
    static func withServerAway(_ body: @escaping @Sendable (CrashSetup, APNsEmulator) async throws -> Void) async throws {
        let directory = try TestFiles.folder("kit")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withDeadline(.seconds(120)) {
            let setup = try await CrashSetup.start(in: directory, devices: ["iphone-1"])
            defer { setup.reporter.cancel() }
            #expect(await setup.server.stop() == 0)
            try await body(setup, setup.emulator)
        }
    }

    /// The app, in the foreground, requests an activity keyed `key`; returns its id.
    static func requestActivity(_ key: String, on emulator: APNsEmulator) throws -> String {
        try emulator.devices.withDevice("iphone-1") { device, now in
            device.setForeground(app, true)
            let (id, events) = try device.request(
                bundleID: app, attributesType: "DeliveryAttributes",
                attributes: .object([("activityKey", .string(key)), ("orderNumber", .integer(9))]),
                content: ActivityContentState(state: ServeCommandTests.content("preparing", 20), staleDate: nil),
                pushType: .token, at: now)
            return (id, events)
        }
    }

    /// What the app's LiveRelayKit delivered, in order: path and status.
    static func delivered(_ emulator: APNsEmulator) -> [String] {
        emulator.reporter.reports.compactMap { report in report.status.map { "\(report.path) \($0)" } }
    }

    /// `serve` again on the data and the port of the first: the app's target stays the same.
    static func samePort(_ setup: CrashSetup) -> [String] {
        let port = String(setup.server.baseURL.split(separator: ":").last ?? "0")
        var arguments = setup.arguments
        if let index = arguments.firstIndex(of: "--http-port") { arguments[index + 1] = port }
        return arguments
    }
}
