import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What a benchmark leaves behind if it is interrupted (SIGINT, Ctrl-C, or SIGTERM): the processes
/// it started (servers, endpoints) are killed, and its scratch folders are removed once they are
/// gone, before it exits, so that no server keeps running, holding its port and data.
package enum BenchInterruption {
    private static let running = Mutex<Set<pid_t>>([])
    /// Set before the children are killed: what fails from then on is the interruption's doing.
    private static let interrupting = Atomic<Bool>(false)
    private static let scratch = Mutex<[URL]>([])
    /// The signal handlers, installed with the first child or folder: kept for the life of the process.
    private static let handlers = Mutex<[any DispatchSourceSignal]>([])

    static func started(_ pid: pid_t) {
        installHandlers()
        running.withLock { _ = $0.insert(pid) }
    }

    static func stopped(_ pid: pid_t) {
        running.withLock { _ = $0.remove(pid) }
    }

    /// Makes a folder of the run's own, removed when it is interrupted. Made holding the list the
    /// interruption removes from: one made while the interruption ran was left behind.
    static func makeScratch(_ folder: URL) throws {
        installHandlers()
        try scratch.withLock { folders in
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            folders.append(folder)
        }
    }

    /// For the error a command ends with: once an interruption has begun, the error is its doing
    /// (a server it killed while the benchmark waited for it to start), and the handler exits with
    /// the signal's status. Reported, it would exit first with the error's (64), as if the
    /// benchmark had failed on its own.
    package static func waitIfInterrupted() async {
        guard interrupting.load(ordering: .acquiring) else { return }
        // Never resumed: the handler ends the process.
        await withUnsafeContinuation { (_: UnsafeContinuation<Void, Never>) in }
    }

    private static func installHandlers() {
        handlers.withLock { handlers in
            guard handlers.isEmpty else { return }
            for signalNumber in [SIGINT, SIGTERM] {
                // Handled here instead of by the default action, which would leave the children.
                // (Children started from now on inherit SIGINT ignored: each one is registered here.)
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
                source.setEventHandler { stopAll(andExitFor: signalNumber) }
                source.resume()
                handlers.append(source)
            }
        }
    }

    /// Kills the children, removes the folders and exits at once, before the benchmark could take
    /// the children's end for a failure of its own.
    private static func stopAll(andExitFor signalNumber: Int32) {
        interrupting.store(true, ordering: .releasing)
        let pids = running.withLock { $0 }
        FileHandle.standardError.write(Data("interrupted: stopping the \(pids.count) process(es) this benchmark started\n".utf8))
        // SIGKILL, not SIGTERM: a server stopping gracefully writes its last state into the scratch
        // folder, and one still starting makes the folder again, both after it was removed (a
        // folder was left behind). A killed server loses nothing: its database survives a kill.
        for pid in pids { kill(pid, SIGKILL) }
        var status: Int32 = 0
        for pid in pids { _ = waitpid(pid, &status, 0) }
        // Holding the list until the process is gone: no folder is made meanwhile.
        scratch.withLock { folders in
            for folder in folders { try? FileManager.default.removeItem(at: folder) }
            exit(128 + signalNumber)
        }
    }
}
