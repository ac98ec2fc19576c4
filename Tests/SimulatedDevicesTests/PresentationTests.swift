import Foundation
import LiveActivityKit
import SimulatedDevices
import Testing

/// What the device shows (spec §8.5, §8.6): Lock Screen order, the Dynamic Island's
/// presentations, the banner without an island, the Watch.
@Suite struct PresentationTests {
    static let sports = "com.example.scores"
    static let sportsType = ActivityAttributesType(
        name: "MatchAttributes", attributes: SwiftStruct("MatchAttributes", [.init("match", .string)]),
        contentState: SwiftStruct("ContentState", [.init("home", .int), .init("away", .int)]))

    func device(_ model: DeviceModel = .iPhoneWithDynamicIsland, watch: Bool = false) -> DeviceFixture {
        var f = DeviceFixture(model: model)
        f.device.hasPairedWatch = watch
        f.events += f.device.install(SimulatedApp(bundleID: Self.sports, attributeTypes: [Self.sportsType]), at: f.t0)
        return f
    }

    func start(_ f: inout DeviceFixture, order: Int, relevance: Double, at offset: TimeInterval) throws -> String {
        let (id, events) = try f.device.request(
            bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: .object([("orderNumber", .integer(order))]),
            content: ActivityContentState(state: f.content("preparing").state, relevanceScore: relevance), at: f.t0 + offset)
        f.events += events
        return id
    }

    func startMatch(_ f: inout DeviceFixture, at offset: TimeInterval) throws -> String {
        let (id, events) = try f.device.request(
            bundleID: Self.sports, attributesType: "MatchAttributes", attributes: .object([("match", .string("final"))]),
            content: ActivityContentState(state: .object([("home", .integer(0)), ("away", .integer(0))])), at: f.t0 + offset)
        f.events += events
        return id
    }

    @Test func theLockScreenOrdersByRelevanceThenByStart() throws {
        var f = device()
        let low = try start(&f, order: 1, relevance: 10, at: 0)
        let high = try start(&f, order: 2, relevance: 100, at: 1)
        let tieLater = try start(&f, order: 3, relevance: 10, at: 2)
        let shown = f.device.presentation(at: f.t0 + 3).lockScreen.map(\.activityID)
        #expect(shown == [high, low, tieLater])
    }

    @Test func oneAppIsCompactTwoAppsAreMinimalAttachedAndDetached() throws {
        var f = device()
        #expect(f.device.presentation(at: f.t0).dynamicIsland == .empty)
        let delivery = try start(&f, order: 1, relevance: 0, at: 0)
        _ = try start(&f, order: 2, relevance: 0, at: 1)
        guard case .compact(let compact) = f.device.presentation(at: f.t0 + 2).dynamicIsland else {
            Issue.record("not compact")
            return
        }
        #expect(compact.activityID == delivery, "ties go to the earliest start")
        let match = try startMatch(&f, at: 3)
        guard case .minimal(let attached, let detached) = f.device.presentation(at: f.t0 + 4).dynamicIsland else {
            Issue.record("not minimal")
            return
        }
        #expect(attached.activityID == delivery && detached.activityID == match)
    }

    @Test func anEndedActivityLeavesTheIslandButStaysOnTheLockScreen() throws {
        var f = device()
        let id = try start(&f, order: 1, relevance: 0, at: 0)
        f.events += f.device.end(activityID: id, content: nil, dismissalPolicy: .default, at: f.t0 + 10)
        let shown = f.device.presentation(at: f.t0 + 11)
        #expect(shown.dynamicIsland == .empty)
        #expect(shown.lockScreen.map(\.state) == [.ended])
        f.advance(to: 10 + 4 * 3600)
        #expect(f.device.presentation(at: f.t0 + 10 + 4 * 3600).lockScreen.isEmpty, "dismissed after 4 hours")
    }

    @Test func anAlertingUpdateExpandsTheIslandBriefly() throws {
        var f = device()
        let id = try f.request(pushType: .token)
        let token = f.withToken(id)
        f.receive(
            f.push(
                to: try #require(token),
                #"{"event":"update","timestamp":\#(Int(f.t0.timeIntervalSince1970) + 5),"content-state":{"step":"delivering","eta":3},"alert":{"title":"On its way","body":"3 minutes"}}"#,
                at: 5))
        guard case .expanded(let expanded, let alert) = f.device.presentation(at: f.t0 + 6).dynamicIsland else {
            Issue.record("not expanded")
            return
        }
        #expect(expanded.activityID == id && alert.title == "On its way")
        let duration = f.device.settings.alertPresentationDuration
        guard case .compact = f.device.presentation(at: f.t0 + 5 + duration).dynamicIsland else {
            Issue.record("still expanded")
            return
        }
    }

    @Test func withoutAnIslandAnAlertIsABannerAndTheWatchShowsIt() throws {
        var f = device(.iPhone, watch: true)
        let id = try start(&f, order: 1, relevance: 0, at: 0)
        let alert = ShownAlert(title: "Delivered", body: "Enjoy", at: f.t0 + 5)
        f.events += f.device.update(activityID: id, content: f.content("delivered"), alert: alert, at: f.t0 + 5)
        let shown = f.device.presentation(at: f.t0 + 6)
        #expect(shown.dynamicIsland == nil)
        #expect(shown.banner?.alert == alert && shown.banner?.activityID == id)
        #expect(shown.watch?.alert?.alert == alert && shown.watch?.smartStack?.activityID == id)
        #expect(device().device.presentation(at: f.t0).watch == nil, "no Watch, no Watch presentation")
    }

    @Test func aStaleActivityIsFlaggedStale() throws {
        var f = device()
        let (id, events) = try f.device.request(
            bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: f.attributes,
            content: f.content("preparing", staleAfter: 60), at: f.t0)
        f.events += events
        f.advance(to: 61)
        let shown = try #require(f.device.presentation(at: f.t0 + 61).lockScreen.first)
        #expect(shown.activityID == id && shown.isStale && shown.state == .stale)
    }
}

extension DeviceFixture {
    /// The activity's update token once issued (time is moved past the issue delay).
    mutating func withToken(_ id: String) -> String? {
        advance(to: device.settings.tokenIssueDelay)
        return updateToken(id)
    }
}
