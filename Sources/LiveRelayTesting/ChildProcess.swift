import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A program run as a child process, started with `posix_spawn`. Foundation's `Process.run()` on
/// Linux crashes now and then in a process with many open descriptors (it over-reads the entries
/// of `/proc/self/fd`: swift-corelibs-foundation pull request 5472), and a test process holding
/// servers, connection pools and other children is one. The child gets only the descriptors
/// given here: every other one is closed in it, so that it never holds another child's pipe open.
package final class ChildProcess: Sendable {
    /// Where one of the child's standard streams goes.
    package enum Stream: Sendable {
        /// Nowhere (`/dev/null`).
        case null
        /// A pipe whose other end this process holds.
        case pipe
        /// Standard error only: wherever standard output goes.
        case sameAsOutput
    }

    package let pid: pid_t
    /// This process's ends of the pipes asked for.
    package let input: FileHandle?
    package let output: FileHandle?
    package let errors: FileHandle?
    private let exit = Mutex<Int32?>(nil)

    private init(pid: pid_t, input: FileHandle?, output: FileHandle?, errors: FileHandle?) {
        self.pid = pid
        self.input = input
        self.output = output
        self.errors = errors
    }

    /// Starts `executable` with `arguments` and `environment` (nothing of this process's own).
    /// `yielding`: at the lowest CPU priority (`nice -n 19`), for load that must not starve the
    /// tests running beside it. `ownGroup`: in a process group of its own, whose every process
    /// `sendToGroup` reaches (a program that starts others, as chromedriver starts Chromium).
    package static func start(
        _ executable: String, _ arguments: [String], environment: [String: String], input: Stream = .null, output: Stream = .pipe,
        errors: Stream = .null, yielding: Bool = false, ownGroup: Bool = false
    ) throws -> ChildProcess {
        let (executable, arguments) = yielding ? ("/usr/bin/nice", ["-n", "19", executable] + arguments) : (executable, arguments)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        var childEnds: [Int32] = []
        defer { for descriptor in childEnds { close(descriptor) } }
        var parentEnds: [Int32?] = [nil, nil, nil]
        for (target, stream) in [(Int32(0), input), (1, output), (2, errors)] {
            switch stream {
            case .null:
                posix_spawn_file_actions_addopen(&actions, target, "/dev/null", target == 0 ? O_RDONLY : O_WRONLY, 0)
            case .sameAsOutput:
                posix_spawn_file_actions_adddup2(&actions, 1, target)
            case .pipe:
                var ends: [Int32] = [0, 0]
                guard pipe(&ends) == 0 else { throw SpawnFailed(executable: executable, code: errno) }
                for end in ends { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
                // The child reads its input from the pipe's read end and writes to a write end.
                let (child, parent) = target == 0 ? (ends[0], ends[1]) : (ends[1], ends[0])
                childEnds.append(child)
                parentEnds[Int(target)] = parent
                posix_spawn_file_actions_adddup2(&actions, child, target)
            }
        }
        closeFrom(3, &actions)
        var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for word in argv + envp { free(word) } }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        if ownGroup {
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
            posix_spawnattr_setpgroup(&attributes, 0)
        }
        var pid: pid_t = 0
        let code = posix_spawn(&pid, executable, &actions, &attributes, &argv, &envp)
        let handles = parentEnds.map { $0.map { FileHandle(fileDescriptor: $0, closeOnDealloc: true) } }
        guard code == 0 else { throw SpawnFailed(executable: executable, code: code) }
        return ChildProcess(pid: pid, input: handles[0], output: handles[1], errors: handles[2])
    }

    /// The environment of this process, without the variables `dropping` starts.
    package static func environment(dropping prefix: String) -> [String: String] {
        ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix(prefix) }
    }

    package var isRunning: Bool { reap(blocking: false) == nil }

    /// Its exit code, once it has exited (128 + the signal when one killed it).
    package func exitCode() async -> Int32 {
        while true {
            if let code = reap(blocking: false) { return code }
            try? await Task.sleep(for: .milliseconds(5))
        }
    }

    /// Waits, blocking the thread, until it has exited; its exit code.
    @discardableResult
    package func waitUntilExit() -> Int32 {
        reap(blocking: true) ?? -1
    }

    /// Its exit code, reaping it the first time: nil while it runs (when not `blocking`).
    private func reap(blocking: Bool) -> Int32? {
        exit.withLock { code in
            if let code { return code }
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &status, blocking ? 0 : WNOHANG) } while result == -1 && errno == EINTR
            guard result == pid else { return nil }
            // Exited: its code; killed by a signal: 128 and the signal, as a shell says.
            code = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
            return code
        }
    }

    /// Sends `signal` while it runs.
    package func send(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// The processes of process group `group` that have not exited (zombies left out), from `/proc`.
    package static func processes(inGroup group: pid_t) -> [pid_t] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return entries.compactMap { pid_t($0) }.filter { pid in
            // "pid (name) state parent group …": the name may hold spaces, so read after its ")".
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 2
            else { return false }
            return fields[0] != "Z" && pid_t(fields[2]) == group
        }
    }

    /// Sends `signal` to every process of its group (started with `ownGroup`), its own children
    /// included, which would otherwise outlive it.
    package func sendToGroup(_ signal: Int32) {
        kill(-pid, signal)
    }

    /// Closes every descriptor from `lowest` up in the child (glibc 2.34 and later; looked up at
    /// run time, since Swift's Glibc module does not declare it). Without it, the child would
    /// keep whatever this process opened without close-on-exec.
    private static func closeFrom(_ lowest: Int32, _ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") else { return }
        _ = unsafeBitCast(symbol, to: CloseFrom.self)(&actions, lowest)
    }
}

package struct SpawnFailed: Error, CustomStringConvertible {
    package var executable: String
    package var code: Int32
    package var description: String { "cannot start \(executable): \(String(cString: strerror(code)))" }
}

/// A loopback port free now, for a program that cannot be told to pick one (chromedriver, nghttpd,
/// prometheus). Taken below Linux's ephemeral range (32768 and up): a port the kernel picked
/// there could be any connection's source port by the time the program binds it, and under CI's
/// load one was (a receiver died with "address in use").
package func freeLoopbackPort() throws -> Int {
    for _ in 0..<200 {
        let port = Int.random(in: 20_000..<32_768)
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestRequirement.Unavailable(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        if bound { return port }
    }
    throw TestRequirement.Unavailable(description: "no free loopback port below 32768: \(String(cString: strerror(errno)))")
}
