import Testing

@testable import LiveRelay

/// Apple publishes no priority-10 budget; the governor spends the configured one per activity
/// and hour, and never on a fixed priority or an alert.
@Suite struct PriorityGovernorTests {
    static let governor = PriorityGovernor(policy: BudgetPolicy(priority10PerHour: 2, frequentPriority10PerHour: 4))

    @Test(arguments: [
        (PriorityChoice.fixed(5), false, 99, false, 5, "requested"),
        (.fixed(10), false, 99, false, 10, "requested"),
        (.auto, true, 99, false, 10, "alert"),
        (.auto, false, 0, false, 10, "within budget (1 of 2 an hour)"),
        (.auto, false, 1, false, 10, "within budget (2 of 2 an hour)"),
        (.auto, false, 2, false, 5, "over budget (2 an hour)"),
        (.auto, false, 2, true, 10, "within budget (3 of 4 an hour)"),
        (.auto, false, 4, true, 5, "over budget (4 an hour)"),
    ])
    func decides(choice: PriorityChoice, alerting: Bool, used: Int, frequent: Bool, priority: Int, reason: String) {
        let decision = Self.governor.decide(choice, alerting: alerting, used: used, frequentPushesEnabled: frequent)
        #expect(decision == PriorityGovernor.Decision(priority: priority, reason: reason))
    }
}
