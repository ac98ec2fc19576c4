import Foundation
import LiveRelayStore
import Logging
import Synchronization

/// Deleting what is past its time (`RetentionPolicy`).
extension RelayService {
    /// What one run deleted, by table, and how long its longest batch held the store.
    package struct PruneRun: Sendable {
        package var deleted: [String: Int] = [:]
        package var longestBatch: Duration = .zero
        /// Whether the run stopped at its budget with more to delete.
        package var unfinished = false
    }

    /// Deletes, kind after kind, a batch at a time, until nothing of the kind is past its time or
    /// the run's budget is spent (the next run goes on). The ticker's holder runs it every
    /// `retention.interval`; tests call it with the time they set.
    @discardableResult
    package func prune(at date: Date) async throws -> PruneRun {
        let policy = configuration.retention
        let clock = ContinuousClock()
        let began = clock.now
        var run = PruneRun()
        for kind in PruneKind.allCases {
            while true {
                let batchStart = clock.now
                let deleted = try await store.prune(kind, before: policy.cutoff(for: kind, at: date), limit: policy.batchSize)
                run.longestBatch = max(run.longestBatch, clock.now - batchStart)
                for (table, count) in deleted where count > 0 {
                    run.deleted[table, default: 0] += count
                    metrics.count(Metric.retentionDeletedTotal, ["table": table], by: count)
                }
                if (deleted[kind.table] ?? 0) < policy.batchSize { break }
                if clock.now - began >= policy.runBudget {
                    run.unfinished = true
                    break
                }
            }
            if run.unfinished { break }
        }
        metrics.noteRetentionBatch(run.longestBatch)
        if run.deleted.values.contains(where: { $0 > 0 }) {
            noteChange()
            logger.info(
                "retention deleted what was past its time",
                metadata: [
                    "deleted": "\(run.deleted.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))",
                    "longest.batch.ms": "\(run.longestBatch.milliseconds)",
                ])
        }
        return run
    }

    /// Runs `prune` when its interval has passed since the last run (or a run stopped unfinished).
    func pruneWhenDue(at date: Date) async throws {
        guard pruneDue.withLock({ $0.map { date >= $0 } ?? true }) else { return }
        let run = try await prune(at: date)
        pruneDue.withLock { $0 = run.unfinished ? date : date + configuration.retention.interval }
    }
}

extension Duration {
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}
