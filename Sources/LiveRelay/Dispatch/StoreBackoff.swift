import Logging
import ServiceLifecycle

/// How a loop that lives on the store behaves while the store fails (a full disk, a database that
/// went away): each failure in a row doubles the wait before the next attempt, up to `maximum`,
/// and the log says so once when the failures start and once when the store works again, never
/// once per attempt.
package struct StoreBackoff: Sendable, Hashable {
    /// What to log, on a change of state only.
    package enum Change: Sendable, Hashable {
        case startedFailing
        case recovered(failures: Int)
    }

    package let initial: Duration
    package let maximum: Duration
    package private(set) var failuresInARow = 0

    package init(initial: Duration = .milliseconds(50), maximum: Duration = .seconds(5)) {
        self.initial = initial
        self.maximum = max(initial, maximum)
    }

    package var isFailing: Bool { failuresInARow > 0 }

    /// After a failed attempt: how long to wait before the next, and whether the state changed.
    package mutating func failed() -> (wait: Duration, change: Change?) {
        failuresInARow += 1
        var wait = initial
        for _ in 1..<failuresInARow where wait < maximum { wait *= 2 }
        return (min(wait, maximum), failuresInARow == 1 ? .startedFailing : nil)
    }

    /// Waits `duration` between attempts; false, at once, when the loop must end instead: its task
    /// was cancelled or the service group is shutting down. (A cancelled `Task.sleep` returns at
    /// once, so a loop that ignored that would spin.)
    package static func pause(for duration: Duration) async -> Bool {
        do {
            try await cancelWhenGracefulShutdown { try await Task.sleep(for: duration) }
            return !Task.isShuttingDownGracefully && !Task.isCancelled
        } catch {
            return false
        }
    }

    /// After an attempt that worked.
    package mutating func succeeded() -> Change? {
        defer { failuresInARow = 0 }
        return failuresInARow > 0 ? .recovered(failures: failuresInARow) : nil
    }
}

extension Logger {
    /// The log line of a change of the store's state, as seen by `who` (the dispatcher, the ticker).
    func log(_ change: StoreBackoff.Change?, who: String, error: (any Error)? = nil) {
        switch change {
        case nil: break
        case .startedFailing:
            self.error("store failing: \(who) backs off until it works again", metadata: ["error": "\(error.map { "\($0)" } ?? "-")"])
        case .recovered(let failures):
            notice("store works again: \(who) goes on", metadata: ["failed.attempts": "\(failures)"])
        }
    }
}
