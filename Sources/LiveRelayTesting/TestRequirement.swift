import Foundation

/// What some tests need from the machine (a PostgreSQL server, a browser): CI must have it, and
/// fails without it; elsewhere its tests are reported skipped, with why.
package enum TestRequirement {
    /// Whether this run is CI (`CI` set), where a missing requirement is a failure, not a skip.
    package static var isCI: Bool { !(ProcessInfo.processInfo.environment["CI"] ?? "").isEmpty }

    /// Why a requirement is missing.
    package struct Unavailable: Error, CustomStringConvertible {
        package let description: String

        package init(description: String) { self.description = description }
    }
}

extension Result where Failure == TestRequirement.Unavailable {
    /// Whether what the tests need is there.
    package var isMet: Bool { (try? get()) != nil }

    /// What a test skipped for want of it says, loudly: `notDone` (what was NOT tested) and why;
    /// nothing when it is there.
    package func skipNote(_ notDone: String) -> String {
        guard case .failure(let reason) = self else { return "" }
        return "SKIPPED: \(notDone): \(reason)"
    }
}
