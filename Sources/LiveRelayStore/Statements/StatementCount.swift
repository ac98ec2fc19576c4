import Synchronization

/// The statements a store has run since it opened, `BEGIN` and `COMMIT` included: what requests
/// cost the database, counted rather than timed (`bench server` reports it a request; a test
/// pins how many a change runs on each engine).
package final class StatementCount: Sendable {
    private let count = Atomic<Int>(0)

    package init() {}

    package var total: Int { count.load(ordering: .relaxed) }

    func add() { count.add(1, ordering: .relaxed) }

    /// The count of the store whose connection the running task holds: PostgreSQL's statements
    /// run in their caller's task, so the statement functions find it here.
    @TaskLocal static var current: StatementCount?
}
