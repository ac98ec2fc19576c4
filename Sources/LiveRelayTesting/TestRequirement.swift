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
