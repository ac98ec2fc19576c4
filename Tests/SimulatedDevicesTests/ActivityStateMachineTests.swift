import Foundation
import LiveActivityKit
import SimulatedDevices
import Testing

/// ActivityKit's lifecycle rules (spec §8.1), each driven by explicit times.
@Suite struct ActivityStateMachineTests {
    let t0 = Date(timeIntervalSince1970: 1_795_000_000)
    let hour: TimeInterval = 3600

    func content(_ step: String, staleAfter: TimeInterval? = nil, relevance: Double = 0) -> ActivityContentState {
        ActivityContentState(state: .object([("step", .string(step))]), staleDate: staleAfter.map { t0 + $0 }, relevanceScore: relevance)
    }

    func started(_ content: ActivityContentState? = nil) -> ActivityStateMachine {
        ActivityStateMachine(content: content ?? self.content("preparing"), startDate: t0, now: t0, timestamp: t0)
    }

    @Test func aScheduledActivityIsPendingUntilItsStartDate() {
        var activity = ActivityStateMachine(content: content("preparing"), startDate: t0 + hour, now: t0)
        #expect(activity.state == .pending)
        #expect(activity.update(content("x"), timestamp: t0 + 1, at: t0 + 1).0 == .ignoredWhilePending)
        #expect(activity.advance(to: t0 + hour - 1).isEmpty)
        let transitions = activity.advance(to: t0 + hour)
        #expect(transitions.map(\.to) == [.active] && transitions.first?.cause == .scheduledStart)
    }

    @Test func itGoesStaleAtTheStaleDateAndANewerUpdateMakesItActive() {
        var activity = started(content("preparing", staleAfter: 900))
        #expect(activity.advance(to: t0 + 899).isEmpty)
        #expect(activity.advance(to: t0 + 900).map(\.to) == [.stale])
        // An update whose stale date has also passed keeps it stale.
        #expect(activity.update(content("late", staleAfter: 950), timestamp: t0 + 960, at: t0 + 1000).1.isEmpty)
        #expect(activity.state == .stale)
        let (outcome, transitions) = activity.update(content("delivering", staleAfter: 1900), timestamp: t0 + 1000, at: t0 + 1000)
        #expect(outcome == .applied)
        #expect(transitions.map(\.to) == [.active] && transitions.first?.cause == .update)
        #expect(activity.content.state["step"] == .string("delivering"))
    }

    @Test func anUpdateThatIsNotNewerIsIgnored() {
        var activity = started()
        #expect(activity.update(content("b"), timestamp: t0 + 10, at: t0 + 20).0 == .applied)
        #expect(activity.update(content("a"), timestamp: t0 + 5, at: t0 + 21).0 == .ignoredAsOlder(last: t0 + 10))
        #expect(activity.update(content("same"), timestamp: t0 + 10, at: t0 + 22).0 == .ignoredAsOlder(last: t0 + 10))
        #expect(activity.content.state["step"] == .string("b"))
    }

    @Test func afterEightHoursTheSystemEndsItAndItLeavesTheLockScreenFourHoursLater() {
        var activity = started()
        #expect(activity.advance(to: t0 + 8 * hour - 1).isEmpty)
        let ended = activity.advance(to: t0 + 8 * hour)
        #expect(ended.map(\.to) == [.ended] && ended.first?.cause == .eightHourLimit)
        #expect(activity.update(content("x"), timestamp: t0 + 8 * hour + 1, at: t0 + 8 * hour + 1).0 == .ignoredAfterEnd)
        #expect(activity.advance(to: t0 + 12 * hour - 1).isEmpty)
        #expect(activity.advance(to: t0 + 12 * hour).map(\.to) == [.dismissed])
        #expect(activity.nextDeadline == nil)
    }

    @Test func advancingFarRunsEveryTransitionInOrder() {
        var activity = started(content("preparing", staleAfter: hour))
        let transitions = activity.advance(to: t0 + 24 * hour)
        #expect(transitions.map(\.to) == [.stale, .ended, .dismissed])
        #expect(transitions.map(\.at) == [t0 + hour, t0 + 8 * hour, t0 + 12 * hour])
    }

    @Test(arguments: [
        (ActivityUIDismissalPolicy.default, 4 * 3600.0),
        (.immediate, 0),
        (.after(Date(timeIntervalSince1970: 1_795_000_000 + 3600 + 600)), 600),
        (.after(Date(timeIntervalSince1970: 1_795_000_000)), 0),  // in the past: at once
        (.after(Date(timeIntervalSince1970: 1_795_000_000 + 3600 + 5 * 3600)), 4 * 3600),  // capped at 4 h
    ])
    func dismissalPoliciesDecideWhenItLeavesTheLockScreen(policy: ActivityUIDismissalPolicy, after: TimeInterval) {
        var activity = started()
        let end = t0 + hour
        let (outcome, transitions) = activity.end(nil, timestamp: end, dismissal: policy, cause: .endedByPush, at: end)
        #expect(outcome == .applied)
        #expect(activity.dismissalDate == end + after)
        if after == 0 {
            #expect(transitions.map(\.to) == [.ended, .dismissed])
        } else {
            #expect(transitions.map(\.to) == [.ended])
            #expect(activity.advance(to: end + after - 1).isEmpty)
            #expect(activity.advance(to: end + after).map(\.to) == [.dismissed])
        }
    }

    @Test func anEndWithoutContentKeepsTheLastContent() {
        var activity = started()
        _ = activity.update(content("delivering"), timestamp: t0 + 10, at: t0 + 10)
        _ = activity.end(nil, timestamp: t0 + 20, dismissal: .default, cause: .endedByPush, at: t0 + 20)
        #expect(activity.state == .ended && activity.content.state["step"] == .string("delivering"))
        var other = started()
        _ = other.end(content("delivered"), timestamp: t0 + 20, dismissal: .default, cause: .endedByApp, at: t0 + 20)
        #expect(other.content.state["step"] == .string("delivered"))
        #expect(other.end(content("again"), timestamp: t0 + 30, dismissal: .default, cause: .endedByApp, at: t0 + 30).0 == .ignoredAfterEnd)
    }

    @Test func anOlderEndIsIgnoredLikeAnOlderUpdate() {
        var activity = started()
        _ = activity.update(content("b"), timestamp: t0 + 10, at: t0 + 10)
        #expect(activity.end(nil, timestamp: t0 + 9, dismissal: .immediate, cause: .endedByPush, at: t0 + 11).0 == .ignoredAsOlder(last: t0 + 10))
        #expect(activity.state == .active)
    }

    @Test func thePersonDismissingItEndsItAtOnce() {
        var activity = started()
        #expect(activity.dismissByPerson(at: t0 + 60).map(\.to) == [.ended, .dismissed])
        var ended = started()
        _ = ended.end(nil, timestamp: nil, dismissal: .default, cause: .endedByApp, at: t0 + 10)
        #expect(ended.dismissByPerson(at: t0 + 60).map(\.to) == [.dismissed])
        #expect(ended.dismissByPerson(at: t0 + 61).isEmpty)
    }
}
