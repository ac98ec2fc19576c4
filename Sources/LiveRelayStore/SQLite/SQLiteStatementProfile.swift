import Foundation
import GRDBSQLite
import Synchronization

/// Where the store's CPU goes, statement by statement: the CPU time of the thread that ran each,
/// from its first step to its end (the decoding of its rows between steps included), summed by
/// its text; a trigger's statements count in the one that fired them. On when
/// `LIVERELAY_SQLITE_PROFILE` names a file, which `serve` writes when it stops: a diagnostic for
/// the benchmarks (`Documentation/benchmarks.md`), at two system calls and a lock a statement.
package final class SQLiteStatementProfile: Sendable {
    package static let shared = ProcessInfo.processInfo.environment["LIVERELAY_SQLITE_PROFILE"].map(SQLiteStatementProfile.init(file:))

    package let file: String
    private struct State {
        /// The thread's CPU time when each statement now running began, by the statement.
        var running: [Int: Int64] = [:]
        var totals: [String: (runs: Int, nanoseconds: Int64)] = [:]
    }
    private let state = Mutex(State())

    init(file: String) { self.file = file }

    func started(_ statement: OpaquePointer) {
        let now = Self.threadCPUNanoseconds()
        state.withLock { state in
            if state.running[Int(bitPattern: statement)] == nil { state.running[Int(bitPattern: statement)] = now }
        }
    }

    func finished(_ statement: OpaquePointer) {
        let now = Self.threadCPUNanoseconds()
        let text = sqlite3_sql(statement).map { String(cString: $0) } ?? "?"
        guard let began = state.withLock({ $0.running.removeValue(forKey: Int(bitPattern: statement)) }) else { return }
        add(text, now - began)
    }

    private func add(_ name: String, _ nanoseconds: Int64) {
        state.withLock { state in
            let total = state.totals[name] ?? (0, 0)
            state.totals[name] = (total.runs + 1, total.nanoseconds + nanoseconds)
        }
    }

    /// Runs work of the store's that is no statement (a checkpoint), counted under `name` when
    /// a profile is on.
    static func measuring<Value>(_ name: String, _ body: () throws -> Value) rethrows -> Value {
        guard let profile = shared else { return try body() }
        let began = threadCPUNanoseconds()
        defer { profile.add(name, threadCPUNanoseconds() - began) }
        return try body()
    }

    /// The statements by CPU, most first: total µs, runs, µs a run, and the text on one line.
    package func report() -> String {
        let totals = state.withLock { $0.totals }
        return "cpu_us\truns\tus_a_run\tstatement\n"
            + totals.sorted { $0.value.nanoseconds > $1.value.nanoseconds }.map { text, total in
                let micros = Double(total.nanoseconds) / 1000
                let line = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.joined(separator: " ")
                return String(format: "%.0f\t%d\t%.1f\t", micros, total.runs, micros / Double(total.runs)) + line
            }.joined(separator: "\n") + "\n"
    }

    package func write() throws {
        try report().write(toFile: file, atomically: true, encoding: .utf8)
    }

    private static func threadCPUNanoseconds() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }
}
