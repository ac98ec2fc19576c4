import LiveActivityKit
import LiveRelayStore
import Testing

@testable import LiveRelay

/// Apple publishes no priority-10 budget; the governor spends the configured one per activity
/// and hour, and never on a fixed priority or an alert.
@Suite struct PriorityGovernorTests {
    static let governor = PriorityGovernor(policy: BudgetPolicy(priority10PerHour: 2, frequentPriority10PerHour: 4))

    @Test(
        arguments: [
            (PriorityChoice.fixed(.powerConsiderate), false, 99, false, 5, "requested", nil),
            (.fixed(.immediate), false, 99, false, 10, "requested", nil),
            (.auto, true, 99, false, 10, "alert", nil),
            (.auto, false, 0, false, 10, "within budget (1 of 2 an hour)", BudgetUse(used: 1, limit: 2)),
            (.auto, false, 1, false, 10, "within budget (2 of 2 an hour)", BudgetUse(used: 2, limit: 2)),
            (.auto, false, 2, false, 5, "over budget (2 an hour)", BudgetUse(used: 2, limit: 2)),
            (.auto, false, 2, true, 10, "within budget (3 of 4 an hour)", BudgetUse(used: 3, limit: 4)),
            (.auto, false, 4, true, 5, "over budget (4 an hour)", BudgetUse(used: 4, limit: 4)),
        ] as [(PriorityChoice, Bool, Int, Bool, Int, String, BudgetUse?)])
    func decides(choice: PriorityChoice, alerting: Bool, used: Int, frequent: Bool, priority: Int, reason: String, budget: BudgetUse?) {
        let decision = Self.governor.decide(choice, alerting: alerting, used: used, frequentPushesEnabled: frequent)
        #expect(decision == PriorityGovernor.Decision(priority: APNsPriority(rawValue: priority)!, reason: reason, budget: budget))
    }

    @Test func threeQuartersOfABudgetIsNearItsLimit() {
        #expect(!BudgetUse(used: 8, limit: 12).isNearLimit)
        #expect(BudgetUse(used: 9, limit: 12).isNearLimit)
        #expect(BudgetUse(used: 3, limit: 4).isNearLimit && !BudgetUse(used: 2, limit: 4).isNearLimit)
    }
}
