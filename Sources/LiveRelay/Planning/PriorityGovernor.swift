import Foundation
import LiveActivityKit
import LiveRelayStore

/// Chooses each push's priority. With `auto`, an alerting push goes at 10, and so does a push
/// within the activity's hourly priority-10 budget; the rest go at 5, which the device never
/// counts against the budget. Pure: the counts come from the store.
struct PriorityGovernor {
    let policy: BudgetPolicy

    /// The budget's window: the pushes of the last hour count.
    static let window: TimeInterval = 3600

    struct Decision: Equatable {
        let priority: APNsPriority
        let reason: String
        /// How much of the target's hourly budget is spent with this push, when `auto` counted it.
        var budget: BudgetUse? = nil

        /// `auto` went to priority 5 because the target's budget is spent.
        var isOverBudget: Bool { priority == .powerConsiderate && budget != nil }
    }

    /// `used`: priority-10 pushes already queued or sent to this activity in the last hour.
    func decide(_ choice: PriorityChoice, alerting: Bool, used: Int, frequentPushesEnabled: Bool) -> Decision {
        switch choice {
        case .fixed(let priority):
            return Decision(priority: priority, reason: "requested")
        case .auto:
            if alerting { return Decision(priority: .immediate, reason: "alert") }
            let budget = frequentPushesEnabled ? policy.frequentPriority10PerHour : policy.priority10PerHour
            if used < budget {
                return Decision(
                    priority: .immediate, reason: "within budget (\(used + 1) of \(budget) an hour)", budget: BudgetUse(used: used + 1, limit: budget)
                )
            }
            return Decision(priority: .powerConsiderate, reason: "over budget (\(budget) an hour)", budget: BudgetUse(used: used, limit: budget))
        }
    }
}
