import Foundation
import LiveActivityKit
import LiveRelayStore
import Testing

@testable import LiveRelay

/// What a device that reports its update token late is sent: the key's latest state, once.
struct CatchUpPlannerTests {
    let planner = CatchUpPlanner(governor: budgetGovernor)

    func snapshot(_ key: ActivityRecord, sentLatest: Bool = false, used: Int = 0) -> CatchUpSnapshot {
        CatchUpSnapshot(activity: key, token: liveToken("iphone-1"), sentLatest: sentLatest, priority10Used: used)
    }

    func sent(_ plan: CatchUpPlan?) throws -> JSONValue { try JSONValue(parsing: try #require(plan).payload) }

    @Test func aDeviceThatMissedAChangeIsSentTheLatestContentAtTheKeysTimestamp() throws {
        var key = activity(content: content("on the way"), lastTimestamp: 1_800_000_100)
        key.staleDate = t0 + 600
        let plan = planner.plan(snapshot(key), at: t0, requestID: "r")
        let aps = try sent(plan)["aps"]
        #expect(aps?["event"] == .string("update"))
        #expect(aps?["content-state"] == content("on the way"))
        #expect(aps?["timestamp"] == .integer(1_800_000_100))
        #expect(aps?["alert"] == nil)
        #expect(plan?.delivery.push.priority == .immediate)
        #expect(plan?.delivery.push.priorityReason == "caught up, within budget (1 of 12 an hour)")
        // Its budget spent, the catch-up goes at 5 as any push would.
        #expect(planner.plan(snapshot(key, used: 12), at: t0, requestID: "r")?.delivery.push.priority == .powerConsiderate)
    }

    @Test func aDeviceSentTheLatestChangeOrAKeyWithoutContentGetsNothing() {
        let key = activity(lastTimestamp: 1_800_000_100)
        #expect(planner.plan(snapshot(key, sentLatest: true), at: t0, requestID: "r") == nil)
        #expect(planner.plan(snapshot(activity(content: nil, lastTimestamp: 1_800_000_100)), at: t0, requestID: "r") == nil)
    }

    @Test func anEndedKeyIsSentItsEndWithTheDismissalTheOthersSaw() throws {
        var key = activity(state: .ended, content: content("delivered"), lastTimestamp: 1_800_000_100)
        key.endedAt = t0
        // No dismissal date: off four hours after the key ended, as an end seen in time would be.
        let fourHours = try sent(planner.plan(snapshot(key), at: t0 + 600, requestID: "r"))["aps"]
        #expect(fourHours?["event"] == .string("end"))
        #expect(fourHours?["dismissal-date"] == .integer(Int64(t0.timeIntervalSince1970) + 4 * 3600))
        // Its dismissal date passed: off at once.
        key.dismissalDate = t0 + 60
        let passed = try sent(planner.plan(snapshot(key), at: t0 + 600, requestID: "r"))["aps"]
        #expect(passed?["dismissal-date"] == .integer(0))
    }

    @Test func theLastAlertIsHeardOnlyWhileFresh() throws {
        var key = activity(content: content("on the way"), lastTimestamp: 1_800_000_100)
        key.alert = AlertConfiguration(title: "On the way", body: "10 minutes")
        key.alertAt = t0
        let fresh = planner.plan(snapshot(key), at: t0 + CatchUpPlanner.alertFreshFor, requestID: "r")
        #expect(try sent(fresh)["aps"]?["alert"] != nil)
        #expect(fresh?.delivery.push.priorityReason == "caught up, alert")
        let old = planner.plan(snapshot(key), at: t0 + CatchUpPlanner.alertFreshFor + 1, requestID: "r")
        #expect(try sent(old)["aps"]?["alert"] == nil)
    }
}
