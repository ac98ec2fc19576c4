import Dispatch
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The processes a benchmark started (servers, endpoints), stopped with it: interrupted by
/// SIGINT (Ctrl-C) or SIGTERM, a benchmark sends them SIGTERM before it exits, so that no server
/// it started keeps running, holding its port and data.
enum BenchChildren {
    private static let running = Mutex<Set<pid_t>>([])
    /// The signal handlers, installed with the first child: kept for the life of the process.
    private static let handlers = Mutex<[any DispatchSourceSignal]>([])

    static func started(_ pid: pid_t) {
        installHandlers()
        running.withLock { _ = $0.insert(pid) }
    }

    static func stopped(_ pid: pid_t) {
        running.withLock { _ = $0.remove(pid) }
    }

    private static func installHandlers() {
        handlers.withLock { handlers in
            guard handlers.isEmpty else { return }
            for signalNumber in [SIGINT, SIGTERM] {
                // Handled here instead of by the default action, which would leave the children.
                signal(signalNumber, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
                source.setEventHandler { stopAll(andExitFor: signalNumber) }
                source.resume()
                handlers.append(source)
            }
        }
    }

    /// Sends the children SIGTERM (each stops gracefully by itself) and exits at once, before the
    /// benchmark could take their end for a failure of its own.
    private static func stopAll(andExitFor signalNumber: Int32) {
        let pids = running.withLock { $0 }
        FileHandle.standardError.write(Data("interrupted: stopping the \(pids.count) process(es) this benchmark started\n".utf8))
        for pid in pids { kill(pid, SIGTERM) }
        exit(128 + signalNumber)
    }
}
