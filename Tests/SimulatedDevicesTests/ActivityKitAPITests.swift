import Foundation
import LiveActivityKit
import Testing

@testable import SimulatedDevices

struct PizzaAttributes: ActivityAttributes {
    struct ContentState: Codable, Hashable, Sendable {
        enum Step: String, Codable, Sendable { case baking, onTheWay, delivered }
        var step: Step
        var eta: ClosedRange<Date>?
    }

    var orderNumber: Int
}

/// App-side code written against ActivityKit's names, run on a simulated device; and the
/// fleet's event log and time queue under it.
@Suite struct ActivityKitAPITests {
    let t0 = Date(timeIntervalSince1970: 1_795_000_000)

    func app() throws -> AppProcess {
        let fleet = DeviceFleet(clock: VirtualClock(wallClock: { [t0] in t0 }))
        try fleet.addDevice(id: "iphone")
        return try fleet.install(
            SimulatedApp(bundleID: "com.example.pizza", attributeTypes: [ActivityAttributesType(PizzaAttributes.self)]), on: "iphone")
    }

    @Test(.timeLimit(.minutes(1))) func requestUpdateAndEndWithTheirSequences() async throws {
        let app = try app()
        try await app.run {
            let activity = try Activity.request(
                attributes: PizzaAttributes(orderNumber: 7), content: ActivityContent(state: .init(step: .baking), staleDate: nil),
                pushType: .token)
            #expect(activity.attributes.orderNumber == 7)
            #expect(activity.activityState == .active)
            #expect(activity.pushToken == nil, "the token comes later")

            var tokens = activity.pushTokenUpdates.makeAsyncIterator()
            var contents = activity.contentUpdates.makeAsyncIterator()
            var states = activity.activityStateUpdates.makeAsyncIterator()
            app.fleet.clock.advance(by: 1)
            app.fleet.advanceAll()
            let token = try #require(await tokens.next())
            #expect(token.count == 80 && activity.pushToken == token)

            await activity.update(ActivityContent(state: .init(step: .onTheWay), staleDate: t0 + 600, relevanceScore: 50))
            let content = try #require(await contents.next())
            #expect(content.state.step == .onTheWay && content.relevanceScore == 50 && content.staleDate == t0 + 600)

            // Updates are ordered by their timestamps, which default to now: let time pass.
            app.fleet.clock.advance(by: 1)
            await activity.end(ActivityContent(state: .init(step: .delivered), staleDate: nil), dismissalPolicy: .immediate)
            #expect(await states.next() == .ended)
            #expect(await states.next() == .dismissed)
            #expect(await states.next() == nil, "the sequence finishes with the activity")
            #expect(await tokens.next() == nil)
            #expect(Activity<PizzaAttributes>.activities.isEmpty)
            // Forgotten by the device, it keeps its last content, as in ActivityKit.
            #expect(activity.content.state.step == .delivered && activity.activityState == .dismissed)
        }
    }

    @Test func aPushToStartReachesActivityUpdatesAndATokenAlreadyIssuedIsYieldedAtOnce() async throws {
        let app = try app()
        try await app.run {
            let pushToStart = try #require(Activity<PizzaAttributes>.pushToStartToken)
            var startTokens = Activity<PizzaAttributes>.pushToStartTokenUpdates.makeAsyncIterator()
            #expect(await startTokens.next() == pushToStart, "the current token first")

            var started = Activity<PizzaAttributes>.activityUpdates.makeAsyncIterator()
            let aps =
                #"{"aps":{"event":"start","timestamp":1795000000,"attributes-type":"PizzaAttributes","attributes":{"orderNumber":9},"content-state":{"step":"baking"},"alert":{"title":"Pizza","body":"Baking"},"input-push-token":1}}"#
            let delivered = app.fleet.deliver(to: DeviceToken(data: pushToStart).hex) {
                DevicePush(token: DeviceToken(data: pushToStart).hex, payload: try! JSONValue(parsing: aps), receivedAt: t0)
            }
            #expect(delivered)
            let activity = try #require(await started.next())
            #expect(activity.attributes.orderNumber == 9)
            app.fleet.clock.advance(by: 1)
            app.fleet.advanceAll()
            var tokens = activity.pushTokenUpdates.makeAsyncIterator()
            let first = await tokens.next()
            #expect(first == activity.pushToken, "an issued token is yielded at once")
            #expect(activity.pushToken != nil)
        }
    }

    @Test func aPushThatDoesNotDecodeIntoTheRealTypeIsDroppedWithJSONDecodersReason() async throws {
        let app = try app()
        try await app.run {
            let activity = try Activity.request(
                attributes: PizzaAttributes(orderNumber: 1), content: ActivityContent(state: .init(step: .baking), staleDate: nil), pushType: .token)
            app.fleet.clock.advance(by: 1)
            app.fleet.advanceAll()
            let token = DeviceToken(data: try #require(activity.pushToken)).hex
            app.fleet.deliver(to: token) {
                DevicePush(
                    token: token,
                    payload: try! JSONValue(parsing: #"{"aps":{"event":"update","timestamp":1795000001,"content-state":{"step":"burnt"}}}"#),
                    receivedAt: t0 + 1)
            }
            #expect(activity.content.state.step == .baking)
            let log = try app.fleet.device("iphone").log.last?.message ?? ""
            #expect(log.contains("content-state does not decode") && log.contains("step"), "\(log)")
        }
    }

    /// ActivityKit's static members act for the app of the task that calls them; outside any,
    /// a request is refused and the sequences are empty.
    @Test func eachAppSeesItsOwnActivitiesAndAuthorization() async throws {
        let pizza = try app()
        let other = try pizza.fleet.install(
            SimulatedApp(bundleID: "com.example.other", attributeTypes: [ActivityAttributesType(PizzaAttributes.self)]), on: "iphone")
        try await pizza.run {
            _ = try Activity.request(
                attributes: PizzaAttributes(orderNumber: 1), content: ActivityContent(state: .init(step: .baking), staleDate: nil))
            #expect(Activity<PizzaAttributes>.activities.count == 1)
            #expect(ActivityAuthorizationInfo().areActivitiesEnabled)
        }
        await other.run {
            #expect(Activity<PizzaAttributes>.activities.isEmpty)
        }
        #expect(throws: NotInAnApp.self) {
            _ = try Activity.request(
                attributes: PizzaAttributes(orderNumber: 2), content: ActivityContent(state: .init(step: .baking), staleDate: nil))
        }
        #expect(Activity<PizzaAttributes>.activities.isEmpty && Activity<PizzaAttributes>.pushToStartToken == nil)

        // Live Activities switched off in Settings: the app's authorization sequence says so.
        try await other.run {
            var enabled = ActivityAuthorizationInfo().activityEnablementUpdates.makeAsyncIterator()
            try other.fleet.withDevice("iphone") { device, now in
                ((), device.setSettings(of: "com.example.other", liveActivitiesEnabled: false, at: now))
            }
            #expect(await enabled.next() == false)
            #expect(!ActivityAuthorizationInfo().areActivitiesEnabled)
        }
    }

    @Test func requestsFollowActivityKitsRules() async throws {
        let app = try app()
        try app.setForeground(false)
        await app.run {
            #expect(throws: ActivityAuthorizationError.visibility) {
                _ = try Activity.request(
                    attributes: PizzaAttributes(orderNumber: 1), content: ActivityContent(state: .init(step: .baking), staleDate: nil))
            }
            #expect(ActivityAuthorizationInfo().areActivitiesEnabled && !ActivityAuthorizationInfo().frequentPushesEnabled)
        }
    }

    @Test func theEventLogReplaysAfterASequenceAndWaitsForNewOnes() async throws {
        let log = FleetEventLog(capacity: 3)
        let event = DeviceEvent.activityStarted(activityID: "a", bundleID: "b", attributesType: "T", attributes: .null)
        log.append([event, event, event, event], deviceID: "d", at: t0)
        #expect(log.events(after: 0).map(\.sequence) == [2, 3, 4], "the ring keeps the newest 3")
        #expect(log.events(after: 3).map(\.sequence) == [4])
        #expect(await log.wait(after: 4, limit: 10, timeout: .zero) { _ in true }.isEmpty)
        async let waited = log.wait(after: 4, limit: 10, timeout: .seconds(30)) { _ in true }
        var subscription = log.subscribe(after: 3).makeAsyncIterator()
        #expect(await subscription.next()?.sequence == 4)
        log.append([event], deviceID: "d", at: t0)
        #expect(await subscription.next()?.sequence == 5)
        #expect(await waited.map(\.sequence) == [5])
    }

    @Test func timeReachesADeviceThroughItsDeadlineWithoutAnyCallOnIt() async throws {
        let app = try app()
        for index in 0..<50 { try app.fleet.addDevice(id: "idle-\(index)") }
        _ = try await app.run {
            try Activity.request(
                attributes: PizzaAttributes(orderNumber: 1), content: ActivityContent(state: .init(step: .baking), staleDate: t0 + 30))
        }
        let before = app.fleet.events.lastSequence
        app.fleet.clock.advance(by: 31)
        app.fleet.advanceAll()
        let happened = app.fleet.events.events(after: before).map(\.event)
        #expect(happened.contains { if case .tokenIssued(_, _, .update, _) = $0 { true } else { false } } == false, "push type none has no token")
        #expect(
            happened.contains { if case .stateChanged(_, _, .stale, _) = $0 { true } else { false } },
            "the stale date applied without any call on the device")
    }
}
