import Foundation

/// Work that blocks its thread (opening a SQLite file under its lock, waiting for a child
/// process, a system call that sleeps), run on a thread of its own and awaited. Swift's
/// cooperative pool has as many threads as cores (two here): one blocked call holds half of every
/// task in the process, and two hold all of them, deadlines included.
package enum BlockingWork {
    package static func run<Value: Sendable>(_ work: @escaping @Sendable () throws -> Value) async throws -> Value {
        try await withCheckedThrowingContinuation { continuation in
            Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
        }
    }

    package static func run<Value: Sendable>(_ work: @escaping @Sendable () -> Value) async -> Value {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: work()) }
        }
    }
}
