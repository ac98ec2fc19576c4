import Foundation
import LiveRelayStore
import Testing

@testable import LiveRelay

/// The overview's chart: pushes counted in the minute their answer came, for the last hour.
@Suite struct PushesPerMinuteTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)  // a minute's start

    @Test func pushesAreCountedInTheirMinuteByResultOldestFirst() {
        let metrics = RelayMetrics()
        metrics.countPush(result: "sent", at: t0 + 1)
        metrics.countPush(result: "sent", at: t0 + 59.9)
        metrics.countPush(result: "failed", at: t0 + 60)
        let minutes = metrics.pushesPerMinute(upTo: t0 + 61, count: 3)
        #expect(minutes.map(\.minute) == [t0 - 60, t0, t0 + 60])
        #expect(minutes.map(\.results) == [[:], ["sent": 2], ["failed": 1]])
    }

    @Test func onlyTheLastHourIsKept() {
        let metrics = RelayMetrics()
        metrics.countPush(result: "sent", at: t0)
        for minute in 1...60 { metrics.countPush(result: "retry", at: t0 + Double(minute) * 60) }
        let hour = metrics.pushesPerMinute(upTo: t0 + 60 * 60, count: 61)
        #expect(hour.first?.results == [:])
        #expect(hour.dropFirst().allSatisfy { $0.results == ["retry": 1] })
    }
}

/// The overview's keys near their priority-10 budget: as each key's last change left them, for an hour.
@Suite struct KeysNearBudgetTests {
    let t0 = Date(timeIntervalSince1970: 1_800_000_000)

    @Test func aKeyIsListedWhileItsLastChangeSpentThreeQuartersAndForAnHour() {
        let metrics = RelayMetrics()
        metrics.noteBudget(BudgetUse(used: 8, limit: 12), app: "a.b", key: "half", at: t0)
        metrics.noteBudget(BudgetUse(used: 9, limit: 12), app: "a.b", key: "near", at: t0)
        metrics.noteBudget(BudgetUse(used: 12, limit: 12), app: "a.b", key: "spent", at: t0 + 1)
        metrics.noteBudget(nil, app: "a.b", key: "spent", at: t0 + 2)
        #expect(metrics.keysNearBudget(at: t0 + 10, limit: 10).map(\.key) == ["spent", "near"], "the fullest first")
        #expect(metrics.keysNearBudget(at: t0 + 10, limit: 1).map(\.key) == ["spent"])
        // A later change that spends less takes the key off; an hour later every key is gone.
        metrics.noteBudget(BudgetUse(used: 2, limit: 12), app: "a.b", key: "near", at: t0 + 20)
        #expect(metrics.keysNearBudget(at: t0 + 30, limit: 10).map(\.key) == ["spent"])
        #expect(metrics.keysNearBudget(at: t0 + 3601, limit: 10).isEmpty)
    }

    @Test func aFullListForgetsItsOldestTenthAtOnce() {
        let metrics = RelayMetrics()
        let full = RelayMetrics.nearBudgetKept
        for index in 0...full { metrics.noteBudget(BudgetUse(used: 12, limit: 12), app: "a.b", key: "k\(index)", at: t0 + Double(index) / 1000) }
        let kept = metrics.keysNearBudget(at: t0 + 20, limit: full + 1)
        #expect(kept.count == full * 9 / 10)
        #expect(kept.contains { $0.key == "k\(full)" } && !kept.contains { $0.key == "k0" }, "the newest stay")
    }
}
