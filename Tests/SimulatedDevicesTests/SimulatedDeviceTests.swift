import Foundation
import LiveActivityKit
import SimulatedDevices
import Testing

/// A device with one delivery app, driven by explicit times.
struct DeviceFixture {
    static let bundle = "com.example.delivery"
    static let type = ActivityAttributesType(
        name: "DeliveryAttributes",
        attributes: SwiftStruct("DeliveryAttributes", [.init("orderNumber", .int)]),
        contentState: SwiftStruct("ContentState", [.init("step", .stringEnum(["preparing", "delivering", "delivered"])), .init("eta", .int)]))

    let t0 = Date(timeIntervalSince1970: 1_795_000_000)
    var device: SimulatedDevice
    var events: [DeviceEvent] = []

    init(
        settings: DeviceRuntimeSettings = .init(), model: DeviceModel = .iPhoneWithDynamicIsland, systemVersion: SystemVersion = .newDevice,
        app: SimulatedApp? = nil
    ) {
        device = SimulatedDevice(id: "iphone-1", model: model, systemVersion: systemVersion, settings: settings, seed: 42)
        events = device.install(app ?? SimulatedApp(bundleID: Self.bundle, attributeTypes: [Self.type]), at: t0)
    }

    var attributes: JSONValue { .object([("orderNumber", .number("42"))]) }
    func content(_ step: String, eta: Int = 10, staleAfter: TimeInterval? = nil) -> ActivityContentState {
        ActivityContentState(state: .object([("step", .string(step)), ("eta", .integer(eta))]), staleDate: staleAfter.map { t0 + $0 })
    }

    var pushToStartToken: String { device.apps[Self.bundle]!.pushToStartTokens["DeliveryAttributes"]! }

    mutating func request(pushType: ActivityPushType = .token, at offset: TimeInterval = 0) throws -> String {
        let (id, events) = try device.request(
            bundleID: Self.bundle, attributesType: "DeliveryAttributes", attributes: attributes, content: content("preparing"),
            pushType: pushType, at: t0 + offset)
        self.events += events
        return id
    }

    /// A push as APNs hands it over; `aps` members given as JSON text.
    func push(to token: String, _ aps: String, priority: Int = 10, expiration: Date? = nil, at offset: TimeInterval) -> DevicePush {
        DevicePush(
            token: token, payload: try! JSONValue(parsing: #"{"aps":\#(aps)}"#), priority: priority, expiration: expiration, receivedAt: t0 + offset)
    }

    mutating func receive(_ push: DevicePush) { events += device.receive(push, at: push.receivedAt) }
    mutating func advance(to offset: TimeInterval) { events += device.advance(to: t0 + offset) }

    func updateToken(_ id: String) -> String? { device.activity(id)?.pushToken }
    var lastLog: String { device.log.last?.message ?? "" }
    func update(step: String, timestamp: TimeInterval) -> String {
        #"{"event":"update","timestamp":\#(Int(t0.timeIntervalSince1970 + timestamp)),"content-state":{"step":"\#(step)","eta":5}}"#
    }
}

@Suite struct ActivityRequestTests {
    @Test func aRequestFromTheForegroundStartsAnActivityAndItsTokenComesLater() throws {
        var f = DeviceFixture()
        let id = try f.request()
        #expect(f.device.activity(id)?.state == .active)
        #expect(f.updateToken(id) == nil, "pushTokenUpdates is asynchronous")
        f.advance(to: 0.999)
        #expect(f.updateToken(id) == nil)
        f.advance(to: 1)
        let token = try #require(f.updateToken(id))
        #expect(token.count == 160 && token.allSatisfy(\.isHexDigit))
        #expect(f.events.contains(.tokenIssued(token: token, bundleID: DeviceFixture.bundle, kind: .update(activityID: id), environment: .sandbox)))
    }

    @Test func requestsAreRefusedWithActivityKitsErrors() throws {
        var f = DeviceFixture(
            settings: DeviceRuntimeSettings(maximumActivitiesPerApp: 2, maximumActivitiesPerDevice: 3, maximumActivityDataBytes: 100))
        func refusal(_ body: () throws -> Void) -> String? {
            do {
                try body()
                return nil
            } catch { return (error as? ActivityAuthorizationError)?.code ?? "\(error)" }
        }
        let bundle = DeviceFixture.bundle
        #expect(
            refusal {
                _ = try f.device.request(
                    bundleID: bundle, attributesType: "Nope", attributes: f.attributes, content: f.content("preparing"), at: f.t0)
            } == "unsupportedTarget")
        #expect(
            refusal {
                _ = try f.device.request(
                    bundleID: bundle, attributesType: "DeliveryAttributes", attributes: .object([]), content: f.content("preparing"), at: f.t0)
            } == "doesNotDecode")
        #expect(
            refusal {
                _ = try f.device.request(
                    bundleID: bundle, attributesType: "DeliveryAttributes", attributes: f.attributes, content: f.content("flying"), at: f.t0)
            } == "doesNotDecode")
        let big = ActivityContentState(
            state: .object([("step", .string("preparing")), ("eta", .number("1")), ("note", .string(String(repeating: "x", count: 100)))]))
        #expect(
            refusal {
                _ = try f.device.request(bundleID: bundle, attributesType: "DeliveryAttributes", attributes: f.attributes, content: big, at: f.t0)
            } == "attributesTooLarge")
        #expect(
            refusal {
                _ = try f.device.request(
                    bundleID: bundle, attributesType: "DeliveryAttributes", attributes: f.attributes, content: f.content("preparing"),
                    start: f.t0 + 60, at: f.t0)
            } == "missingAlertConfiguration")

        _ = try f.request()
        _ = try f.request()
        #expect(refusal { _ = try f.request() } == "targetMaximumExceeded")
        _ = f.device.install(SimulatedApp(bundleID: "com.example.other", attributeTypes: [DeviceFixture.type]), at: f.t0)
        _ = try f.device.request(
            bundleID: "com.example.other", attributesType: "DeliveryAttributes", attributes: f.attributes, content: f.content("preparing"), at: f.t0)
        #expect(
            refusal {
                _ = try f.device.request(
                    bundleID: "com.example.other", attributesType: "DeliveryAttributes", attributes: f.attributes, content: f.content("preparing"),
                    at: f.t0)
            } == "globalMaximumExceeded")

        f.device.setForeground(bundle, false)
        #expect(refusal { _ = try f.request() } == "visibility")
        f.device.setForeground(bundle, true)
        _ = f.device.setSettings(of: bundle, liveActivitiesEnabled: false, at: f.t0 + 1)
        #expect(refusal { _ = try f.request(at: 2) } == "denied")
    }

    @Test func turningLiveActivitiesOffEndsTheAppsActivities() throws {
        var f = DeviceFixture()
        let id = try f.request()
        f.events += f.device.setSettings(of: DeviceFixture.bundle, liveActivitiesEnabled: false, at: f.t0 + 10)
        #expect(f.device.activity(id) == nil || f.device.activity(id)?.state == .dismissed)
        #expect(f.events.contains(.stateChanged(activityID: id, bundleID: DeviceFixture.bundle, to: .ended, cause: .endedBySystem)))
    }

    @Test func aScheduledActivityIsPendingAndCounts() throws {
        var f = DeviceFixture(settings: DeviceRuntimeSettings(maximumActivitiesPerApp: 1))
        let alert = ShownAlert(title: "Kick-off", body: "The match starts", sound: nil, at: f.t0)
        let (id, _) = try f.device.request(
            bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: f.attributes,
            content: f.content("preparing"), alert: alert, start: f.t0 + 3600, at: f.t0)
        #expect(f.device.activity(id)?.state == .pending)
        #expect(throws: ActivityAuthorizationError.self) { _ = try f.request(at: 1) }
        f.advance(to: 3600)
        #expect(f.device.activity(id)?.state == .active)
    }

    @Test func lockingEndsTransientActivities() throws {
        var f = DeviceFixture()
        _ = f.device.setLocked(false, at: f.t0)
        let (id, _) = try f.device.request(
            bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: f.attributes,
            content: f.content("preparing"), style: .transient, at: f.t0)
        let standard = try f.request()
        f.events += f.device.setLocked(true, at: f.t0 + 5)
        #expect(f.device.activity(id) == nil, "ended and dismissed at once")
        #expect(f.device.activity(standard)?.state == .active)
    }
}

@Suite struct UpdateTokenTests {
    @Test func aDismissedActivitysTokenIsRetiredAfterThePurgeDelay() throws {
        var f = DeviceFixture(settings: DeviceRuntimeSettings(tokenPurgeDelay: 30))
        let id = try f.request()
        f.advance(to: 1)
        let token = try #require(f.updateToken(id))
        f.events += f.device.dismissByPerson(activityID: id, at: f.t0 + 100)
        #expect(!f.events.contains { if case .tokenRetired = $0 { true } else { false } })
        f.advance(to: 130)
        #expect(f.events.contains(.tokenRetired(token: token, at: f.t0 + 130, bundleID: DeviceFixture.bundle)))
        #expect(f.device.activity(id) == nil, "forgotten once its token is gone")
    }

    @Test func rotationIssuesANewTokenAndRetiresTheOld() throws {
        var f = DeviceFixture()
        let id = try f.request()
        f.advance(to: 1)
        let first = try #require(f.updateToken(id))
        f.events += f.device.rotateUpdateToken(activityID: id, at: f.t0 + 50)
        let second = try #require(f.updateToken(id))
        #expect(first != second)
        #expect(f.events.contains(.tokenRetired(token: first, at: f.t0 + 50, bundleID: DeviceFixture.bundle)))
    }
}

@Suite struct PushHandlingTests {
    let startAPS =
        #"{"event":"start","timestamp":1795000000,"attributes-type":"DeliveryAttributes","attributes":{"orderNumber":7},"content-state":{"step":"preparing","eta":30},"alert":{"title":"Order 7","body":"Preparing"},"input-push-token":1}"#

    @Test func aStartPushStartsAnActivityAndIssuesItsUpdateToken() throws {
        var f = DeviceFixture()
        f.receive(f.push(to: f.pushToStartToken, startAPS, at: 5))
        let activity = try #require(f.device.activities.first)
        #expect(activity.attributes == .object([("orderNumber", .number("7"))]))
        #expect(activity.lastAlert?.title == "Order 7")
        f.advance(to: 6)
        #expect(f.device.activity(activity.id)?.pushToken != nil)
    }

    @Test(arguments: [
        (#""alert":{"title":"Order 7","body":"Preparing"},"#, "aps.alert is required"),
        (#""attributes-type":"DeliveryAttributes","#, "aps.attributes-type is missing"),
        (#""attributes":{"orderNumber":7},"#, "aps.attributes is missing"),
    ])
    func aStartWithoutAlertTypeOrAttributesIsDropped(removed: String, logged: String) {
        var f = DeviceFixture()
        f.receive(f.push(to: f.pushToStartToken, startAPS.replacingOccurrences(of: removed, with: ""), at: 5))
        #expect(f.device.activities.isEmpty)
        #expect(f.lastLog.contains(logged), "\(f.lastLog)")
    }

    /// Seen on devices (spec §14.2.1): a start whose stale date has passed is created, stale, and
    /// never shown; the app has its activity (and reports its token) all the same.
    @Test func aStartWhoseStaleDateHasPassedIsCreatedStaleAndNeverShown() throws {
        var f = DeviceFixture()
        let stale = startAPS.replacingOccurrences(of: #""timestamp":1795000000,"#, with: #""timestamp":1795000000,"stale-date":1794999000,"#)
        f.receive(f.push(to: f.pushToStartToken, stale, at: 5))
        let activity = try #require(f.device.activities.first)
        #expect(activity.state == .stale && !activity.isShown)
        #expect(f.device.log.contains { $0.message.contains("never shown on the Lock Screen") })
        f.advance(to: 6)
        #expect(f.device.activity(activity.id)?.pushToken != nil, "the app still gets its update token")
        let shown = f.device.presentation(at: f.t0 + 6)
        #expect(shown.lockScreen.isEmpty && shown.dynamicIsland == .empty && shown.banner == nil)
        // A later stale date is the usual case: shown at once.
        var g = DeviceFixture()
        g.receive(g.push(to: g.pushToStartToken, stale.replacingOccurrences(of: "1794999000", with: "1795009000"), at: 5))
        #expect(g.device.presentation(at: g.t0 + 6).lockScreen.count == 1)
    }

    /// Seen on devices (spec §14.2.2): push-to-start has a budget of its own, apart from the
    /// priority-10 budget; past it a valid start is refused in ActivityKit's words.
    @Test func startsPastThePushToStartBudgetAreRefusedUntilItRefills() throws {
        var f = DeviceFixture(settings: DeviceRuntimeSettings(priority10BudgetPerHour: 100, pushToStartBudgetPerHour: 2))
        for second in [5.0, 6, 7] { f.receive(f.push(to: f.pushToStartToken, startAPS, at: second)) }
        #expect(f.device.activities.count == 2)
        #expect(f.lastLog.contains("push-to-start budget was exhausted (budget=-1)"), "\(f.lastLog)")
        #expect(f.lastLog.contains("again at \(f.t0 + 3605)"), "\(f.lastLog)")
        f.receive(f.push(to: f.pushToStartToken, startAPS, at: 3605))
        #expect(f.device.activities.count == 3, "the first start left the hour")
    }

    /// A state file kept by an earlier release has no push-to-start budget: it reads with the default.
    @Test func settingsKeptWithoutANewerSettingTakeItsDefault() throws {
        var kept = try JSONValue(
            parsing: String(decoding: try JSONEncoder().encode(DeviceRuntimeSettings(priority10BudgetPerHour: 3)), as: UTF8.self))
        guard case .object(let members) = kept else {
            Issue.record("settings are not an object: \(kept)")
            return
        }
        kept = .object(members.filter { $0.0 != "pushToStartBudgetPerHour" })
        let read = try JSONDecoder().decode(DeviceRuntimeSettings.self, from: Data(kept.serialized))
        #expect(read == DeviceRuntimeSettings(priority10BudgetPerHour: 3))
    }

    @Test func aStartWhoseAttributesDoNotDecodeIsDroppedWithTheReason() {
        var f = DeviceFixture()
        f.receive(f.push(to: f.pushToStartToken, startAPS.replacingOccurrences(of: #""orderNumber":7"#, with: #""orderNumber":"7""#), at: 5))
        #expect(f.device.activities.isEmpty)
        #expect(f.lastLog.contains("orderNumber"), "\(f.lastLog)")
    }

    @Test func thePushToStartTokenCanRotateAfterUse() {
        var f = DeviceFixture(settings: DeviceRuntimeSettings(rotatesPushToStartTokenAfterUse: true))
        let before = f.pushToStartToken
        f.receive(f.push(to: before, startAPS, at: 5))
        #expect(f.pushToStartToken != before)
        #expect(f.events.contains(.tokenRetired(token: before, at: f.t0 + 5, bundleID: DeviceFixture.bundle)))
    }

    @Test func updatesApplyInTimestampOrderAndUndecodableOnesAreDropped() throws {
        var f = DeviceFixture()
        let id = try f.request()
        f.advance(to: 1)
        let token = try #require(f.updateToken(id))
        f.receive(f.push(to: token, f.update(step: "delivering", timestamp: 20), at: 21))
        #expect(f.device.activity(id)?.content.state["step"] == .string("delivering"))
        f.receive(f.push(to: token, f.update(step: "preparing", timestamp: 10), at: 22))
        #expect(f.device.activity(id)?.content.state["step"] == .string("delivering"))
        #expect(f.lastLog.contains("not newer"))
        f.receive(f.push(to: token, #"{"event":"update","timestamp":1795000030,"content-state":{"step":"teleporting","eta":5}}"#, at: 31))
        #expect(f.device.activity(id)?.content.state["step"] == .string("delivering"))
        #expect(f.lastLog.contains("does not decode"), "\(f.lastLog)")
    }

    @Test func anEndPushWithADismissalDateKeepsItOnTheLockScreenUntilThen() throws {
        var f = DeviceFixture()
        let id = try f.request()
        f.advance(to: 1)
        let token = try #require(f.updateToken(id))
        let end = #"{"event":"end","timestamp":1795000100,"dismissal-date":1795000700}"#
        f.receive(f.push(to: token, end, at: 100))
        #expect(f.device.activity(id)?.state == .ended)
        #expect(f.device.activity(id)?.content.state["step"] == .string("preparing"), "no content: the last stays")
        f.advance(to: 699)
        #expect(f.device.activity(id)?.state == .ended)
        f.advance(to: 700)
        #expect(f.device.activity(id) == nil)
        #expect(f.events.contains(.tokenRetired(token: token, at: f.t0 + 700, bundleID: DeviceFixture.bundle)))
    }

    @Test func offlineTheNewestPushPerAppWaitsAndExpiredOnesAreDropped() throws {
        var f = DeviceFixture()
        let id = try f.request()
        f.advance(to: 1)
        let token = try #require(f.updateToken(id))
        _ = f.device.setOnline(false, at: f.t0 + 2)
        f.receive(f.push(to: token, f.update(step: "delivering", timestamp: 10), at: 10))
        f.receive(f.push(to: token, f.update(step: "delivered", timestamp: 11), at: 11))
        f.receive(f.push(to: token, f.update(step: "preparing", timestamp: 12), expiration: Date(timeIntervalSince1970: 0), at: 12))
        #expect(f.device.activity(id)?.content.state["step"] == .string("preparing"))
        f.events += f.device.setOnline(true, at: f.t0 + 20)
        #expect(f.device.activity(id)?.content.state["step"] == .string("delivered"), "one stored per app: the newest")

        _ = f.device.setOnline(false, at: f.t0 + 30)
        f.receive(f.push(to: token, f.update(step: "delivering", timestamp: 31), expiration: f.t0 + 40, at: 31))
        f.events += f.device.setOnline(true, at: f.t0 + 41)
        #expect(f.device.activity(id)?.content.state["step"] == .string("delivered"), "expired while offline")
    }

    @Test func priority10BeyondTheBudgetIsDeferredAndPriority5WaitsCoalesced() throws {
        var f = DeviceFixture(settings: DeviceRuntimeSettings(priority10BudgetPerHour: 2, opportunisticDelay: 30))
        let id = try f.request()
        f.advance(to: 1)
        let token = try #require(f.updateToken(id))
        f.receive(f.push(to: token, f.update(step: "delivering", timestamp: 10), at: 10))
        f.receive(f.push(to: token, f.update(step: "preparing", timestamp: 11), at: 11))
        f.receive(f.push(to: token, f.update(step: "delivered", timestamp: 12), at: 12))
        #expect(f.device.activity(id)?.content.state["step"] == .string("preparing"), "the third priority-10 push is over budget")
        f.advance(to: 3609)
        #expect(f.device.activity(id)?.content.state["step"] == .string("preparing"))
        f.advance(to: 3610)
        #expect(f.device.activity(id)?.content.state["step"] == .string("delivered"), "delivered when the first leaves the hour")

        f.receive(f.push(to: token, f.update(step: "delivering", timestamp: 4000), priority: 5, at: 4000))
        f.receive(f.push(to: token, f.update(step: "preparing", timestamp: 4001), priority: 5, at: 4001))
        #expect(f.device.activity(id)?.content.state["step"] == .string("delivered"))
        f.advance(to: 4030)
        #expect(f.device.activity(id)?.content.state["step"] == .string("preparing"), "newest wins, on the first one's turn")
    }

    /// Seen on devices (spec §14.2.4): the alert, not the priority, decides whether the person is
    /// alerted; a priority-5 update with an alert alerts once it is delivered.
    @Test func anUpdateWithAnAlertAlertsAtPriority5Too() throws {
        var f = DeviceFixture(settings: DeviceRuntimeSettings(opportunisticDelay: 30))
        let id = try f.request()
        f.advance(to: 1)
        let token = try #require(f.updateToken(id))
        let alerting = f.update(step: "delivering", timestamp: 10).replacingOccurrences(
            of: #""eta":5}"#, with: #""eta":5},"alert":{"title":"On its way","body":"5 minutes"}"#)
        f.receive(f.push(to: token, alerting, priority: 5, at: 10))
        f.advance(to: 40)
        #expect(f.device.activity(id)?.lastAlert?.title == "On its way")
        guard case .expanded(_, let alert) = f.device.presentation(at: f.t0 + 41).dynamicIsland else {
            Issue.record("no alert on screen: \(f.device.presentation(at: f.t0 + 41))")
            return
        }
        #expect(alert.title == "On its way")
    }

    @Test func frequentUpdatesRaiseTheBudget() throws {
        var f = DeviceFixture(
            settings: DeviceRuntimeSettings(priority10BudgetPerHour: 1, frequentUpdatesBudgetPerHour: 100),
            app: SimulatedApp(bundleID: DeviceFixture.bundle, supportsFrequentUpdates: true, attributeTypes: [DeviceFixture.type]))
        let id = try f.request()
        f.advance(to: 1)
        let token = try #require(f.updateToken(id))
        for second in 10..<20 {
            f.receive(
                f.push(
                    to: token, f.update(step: second % 2 == 0 ? "delivering" : "delivered", timestamp: TimeInterval(second)), at: TimeInterval(second)
                ))
        }
        #expect(f.device.activity(id)?.content.state["step"] == .string("delivered"))
        _ = f.device.setSettings(of: DeviceFixture.bundle, frequentUpdatesEnabled: false, at: f.t0 + 30)
        f.receive(f.push(to: token, f.update(step: "preparing", timestamp: 31), at: 31))
        #expect(f.device.activity(id)?.content.state["step"] == .string("delivered"), "back to the small budget")
    }

    @Test func aBroadcastReachesEverySubscribedActivity() throws {
        var f = DeviceFixture()
        let channel = "dHlwaWNhbGNoYW5uZWw="
        let subscribed = try f.request(pushType: .channel(channel))
        let other = try f.request(pushType: .token)
        f.events += f.device.receiveBroadcast(
            channelID: channel, payload: try JSONValue(parsing: #"{"aps":\#(f.update(step: "delivered", timestamp: 5))}"#), priority: 10, at: f.t0 + 5
        )
        #expect(f.device.activity(subscribed)?.content.state["step"] == .string("delivered"))
        #expect(f.device.activity(other)?.content.state["step"] == .string("preparing"))
    }
}
