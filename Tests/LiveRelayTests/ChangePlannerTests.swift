import Foundation
import LiveActivityKit
import LiveRelayStore
import Testing

@testable import LiveRelay

@Suite struct ChangePlannerTests {
    static func update(priority: PriorityChoice = .auto, alert: Bool = false, expiration: Date? = nil) -> ChangeRequest {
        ChangeRequest(
            event: .update, contentState: content("on the way"), alert: alert ? AlertConfiguration(title: "On the way", body: "10 min") : nil,
            priority: priority, expiration: expiration)
    }

    struct BudgetCase: Sendable, CustomTestStringConvertible {
        var used: Int
        var frequent: Bool
        var priority: Int
        var reason: String
        var testDescription: String { "\(used) used, frequent \(frequent)" }
    }

    /// `auto` without an alert spends each token's own hourly budget of priority 10.
    @Test(arguments: [
        BudgetCase(used: 0, frequent: false, priority: 10, reason: "within budget (1 of 12 an hour)"),
        BudgetCase(used: 11, frequent: false, priority: 10, reason: "within budget (12 of 12 an hour)"),
        BudgetCase(used: 12, frequent: false, priority: 5, reason: "over budget (12 an hour)"),
        BudgetCase(used: 12, frequent: true, priority: 10, reason: "within budget (13 of 120 an hour)"),
        BudgetCase(used: 120, frequent: true, priority: 5, reason: "over budget (120 an hour)"),
    ])
    func autoSpendsEachTokensBudget(_ budgetCase: BudgetCase) throws {
        let snapshot = ChangeSnapshot(
            activity: activity(), liveTokens: [liveToken("a", frequent: budgetCase.frequent)], liveTokenCount: 1,
            priority10Counts: ["a": budgetCase.used])
        let (plan, acceptance) = try ChangePlanner.standard.plan(Self.update(), snapshot)
        #expect(plan.fanOut == nil)
        #expect(plan.deliveries.map(\.push.priority.rawValue) == [budgetCase.priority])
        #expect(plan.deliveries.map(\.push.priorityReason) == [budgetCase.reason])
        #expect(acceptance.deliveries == 1)
    }

    @Test func eachTokenHasItsOwnCount() throws {
        let snapshot = ChangeSnapshot(
            activity: activity(), liveTokens: [liveToken("a"), liveToken("b")], liveTokenCount: 2, priority10Counts: ["a": 12])
        let (plan, acceptance) = try ChangePlanner.standard.plan(Self.update(), snapshot)
        #expect(plan.deliveries.map(\.target) == [.activityToken(deviceID: "a", token: "tok-a"), .activityToken(deviceID: "b", token: "tok-b")])
        #expect(plan.deliveries.map(\.push.priority.rawValue) == [5, 10])
        #expect(acceptance.budgetUse == BudgetUse(used: 12, limit: 12), "the fullest budget of the request's targets")
    }

    /// One priority fits every token: the store writes the fan-out from its own rows.
    @Test(arguments: [
        (PriorityChoice.auto, true, 10, "alert"), (.fixed(.powerConsiderate), false, 5, "requested"), (.fixed(.immediate), true, 10, "requested"),
    ])
    func onePriorityForAllIsAFanOut(choice: PriorityChoice, alert: Bool, priority: Int, reason: String) throws {
        let request = Self.update(priority: choice, alert: alert)
        #expect(ChangePlanner.standard.budget(for: request, at: t0) == .notCounted)
        let (plan, acceptance) = try ChangePlanner.standard.plan(request, ChangeSnapshot(activity: activity(), liveTokenCount: 1000))
        #expect(plan.deliveries.isEmpty)
        #expect(plan.fanOut?.priority.rawValue == priority)
        #expect(plan.fanOut?.priorityReason == reason)
        #expect(acceptance.deliveries == 1000)
    }

    @Test func onlyAutoWithoutAnAlertReadsTheBudgetOfTheLastHour() {
        #expect(ChangePlanner.standard.budget(for: Self.update(), at: t0) == .perDevice(windowStart: t0 - 3600))
    }

    @Test func aChannelBoundKeyBroadcastsOnceAndCountsItsBudgetOnTheChannel() throws {
        let channels = [channel("chan-1")]
        let snapshot = ChangeSnapshot(activity: activity(channels: channels), priority10Counts: ["chan-1": 12], channels: channels)
        let (plan, acceptance) = try ChangePlanner.standard.plan(Self.update(), snapshot)
        #expect(plan.deliveries.map(\.target) == [.channel("chan-1")])
        #expect(plan.deliveries.map(\.push.priority.rawValue) == [5])
        #expect(acceptance.deliveries == 1)
        // A broadcast payload has no token-only fields.
        #expect(try aps(plan.payload)["event"] == .string("update"))
    }

    /// A channel-bound key's update tokens are those of devices that could not join its channel
    /// (before iOS 18): each gets the change as a push of its own, beside the broadcast, from its
    /// own budget or in the store's fan-out.
    @Test func aChannelBoundKeyAlsoReachesItsUpdateTokensOneByOne() throws {
        let channels = [channel("chan-1")]
        let tokens = [liveToken("old-1"), liveToken("old-2")]
        let counted = ChangeSnapshot(activity: activity(channels: channels), liveTokens: tokens, liveTokenCount: 2, channels: channels)
        let (plan, acceptance) = try ChangePlanner.standard.plan(Self.update(), counted)
        #expect(
            plan.deliveries.map(\.target) == [
                .channel("chan-1"), .activityToken(deviceID: "old-1", token: "tok-old-1"), .activityToken(deviceID: "old-2", token: "tok-old-2"),
            ])
        #expect(acceptance.deliveries == 3)
        let fannedOut = ChangeSnapshot(activity: activity(channels: channels), liveTokenCount: 2, channels: channels)
        let (alerting, _) = try ChangePlanner.standard.plan(Self.update(alert: true), fannedOut)
        #expect(alerting.deliveries.map(\.target) == [.channel("chan-1")] && alerting.fanOut != nil)
    }

    @Test func aKeyWithAChannelInEachEnvironmentBroadcastsOnEachWithItsOwnBudget() throws {
        let channels = [channel("chan-p", in: .production), channel("chan-s", in: .sandbox)]
        let snapshot = ChangeSnapshot(activity: activity(channels: channels), priority10Counts: ["chan-s": 12], channels: channels)
        let (plan, acceptance) = try ChangePlanner.standard.plan(Self.update(), snapshot)
        #expect(plan.deliveries.map(\.target) == [.channel("chan-s"), .channel("chan-p")])
        #expect(plan.deliveries.map(\.environment) == [.sandbox, .production])
        #expect(plan.deliveries.map(\.push.priority.rawValue) == [5, 10], "the sandbox channel spent its budget, the production one did not")
        #expect(acceptance.deliveries == 2)
    }

    @Test func eachUpdateTokenIsSentInItsOwnEnvironment() throws {
        let tokens = [liveToken("a", environment: .production), liveToken("b")]
        let snapshot = ChangeSnapshot(activity: activity(), liveTokens: tokens, liveTokenCount: 2)
        let (plan, _) = try ChangePlanner.standard.plan(Self.update(), snapshot)
        #expect(plan.deliveries.map(\.environment) == [.production, .sandbox])
    }

    struct ExpirationCase: Sendable {
        var storagePolicy: Int
        var requested: Date?
        var expected: Int64
    }

    /// A No-Message-Stored channel takes only 0; a stored message lives at most the storage window.
    @Test(arguments: [
        ExpirationCase(storagePolicy: 0, requested: nil, expected: 0),
        ExpirationCase(storagePolicy: 0, requested: t0 + 60, expected: 0),
        ExpirationCase(storagePolicy: 1, requested: nil, expected: 1_800_000_000 + 8 * 3600),
        ExpirationCase(storagePolicy: 1, requested: t0 + 60, expected: 1_800_000_060),
    ])
    func channelExpiration(_ expirationCase: ExpirationCase) throws {
        let channels = [channel("chan-1", storagePolicy: expirationCase.storagePolicy)]
        let snapshot = ChangeSnapshot(activity: activity(channels: channels), channels: channels)
        let (plan, _) = try ChangePlanner.standard.plan(Self.update(expiration: expirationCase.requested), snapshot)
        #expect(plan.deliveries.first?.push.expiration == expirationCase.expected)
    }

    @Test func theTimestampAlwaysMovesPastTheKeysLast() throws {
        let later = activity(lastTimestamp: 1_800_000_500)
        let (plan, acceptance) = try ChangePlanner.standard.plan(Self.update(), ChangeSnapshot(activity: later, liveTokenCount: 1))
        #expect(acceptance.timestamp == 1_800_000_501)
        #expect(plan.activity.lastTimestamp == 1_800_000_501)
        #expect(try aps(plan.payload)["timestamp"] == .integer(1_800_000_501))
        let (_, now) = try ChangePlanner.standard.plan(Self.update(), ChangeSnapshot(activity: activity(), liveTokenCount: 1))
        #expect(now.timestamp == 1_800_000_000)
    }

    @Test func anUpdateKeepsTheKeyActiveWithTheNewContent() throws {
        let (plan, acceptance) = try ChangePlanner.standard.plan(Self.update(), ChangeSnapshot(activity: activity(), liveTokenCount: 1))
        #expect(plan.activity.contentState == content("on the way"))
        #expect(plan.activity.state == .active)
        #expect(plan.channelDeleteAfter == nil)
        #expect(acceptance.state == .active)
        #expect(plan.acceptance == acceptance)
    }

    struct EndCase: Sendable {
        var storagePolicy: Int
        var channelDeletedAfter: TimeInterval
    }

    /// An ended key's channel is deleted once a stored message can no longer be delivered.
    @Test(arguments: [EndCase(storagePolicy: 0, channelDeletedAfter: 0), EndCase(storagePolicy: 1, channelDeletedAfter: 8 * 3600)])
    func anEndEndsTheKeyAndSchedulesItsChannelsDeletion(_ endCase: EndCase) throws {
        let channels = [channel("chan-1", storagePolicy: endCase.storagePolicy)]
        let end = ChangeRequest(event: .end, contentState: nil, dismissalDate: t0 + 900)
        let (plan, acceptance) = try ChangePlanner.standard.plan(end, ChangeSnapshot(activity: activity(channels: channels), channels: channels))
        #expect(plan.activity.state == .ended)
        #expect(plan.activity.endedAt == t0)
        #expect(plan.activity.endReason == .ended)
        #expect(plan.activity.dismissalDate == t0 + 900)
        #expect(plan.activity.contentState == content("preparing"))
        #expect(plan.channelDeleteAfter == t0 + endCase.channelDeletedAfter)
        #expect(acceptance.state == .ended)
        let ended = try aps(plan.payload)
        #expect(ended["event"] == .string("end"))
        #expect(ended["dismissal-date"] == .integer(1_800_000_900))
    }

    @Test func aDismissalDateNotInTheFutureDismissesAtOnce() throws {
        let end = ChangeRequest(event: .end, contentState: content("delivered"), dismissalDate: t0 - 5)
        let (plan, _) = try ChangePlanner.standard.plan(end, ChangeSnapshot(activity: activity(), liveTokenCount: 1))
        let ended = try aps(plan.payload)
        #expect(ended["dismissal-date"] != nil)
        #expect(ended["dismissal-date"]?.doubleValue ?? .infinity <= 1_800_000_000)
    }

    @Test func refusals() throws {
        #expect(throws: RelayError.notFound("key", "no activity key \"order-42\"; start it first")) {
            try ChangePlanner.standard.plan(Self.update(), ChangeSnapshot(activity: nil))
        }
        #expect {
            try ChangePlanner.standard.plan(Self.update(), ChangeSnapshot(activity: activity(state: .ended)))
        } throws: { ($0 as? RelayError)?.code == .activityEnded }
        #expect {
            try ChangePlanner.standard.plan(ChangeRequest(event: .end, contentState: nil), ChangeSnapshot(activity: activity(content: nil)))
        } throws: { ($0 as? RelayError)?.code == .missing && ($0 as? RelayError)?.field == "contentState" }
    }
}
