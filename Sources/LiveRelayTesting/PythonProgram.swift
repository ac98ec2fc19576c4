import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A Python program of the tests' (`Tests/Support`) that checks what LiveRelay sends with another
/// project's own library from PyPI (a webhook verifier, an OTLP decoder): found, started on
/// loopback, and told from the port it prints first.
package enum PythonProgram {
    /// `Tests/Support/<name>`.
    package static func script(_ name: String) -> String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Tests/Support/\(name)").path
    }

    /// The first `python3` on the PATH (or `LIVERELAY_PYTHON`).
    static let python: String? = {
        if let named = ProcessInfo.processInfo.environment["LIVERELAY_PYTHON"] { return named }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/python3" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// The interpreter that imports `module` (the program itself, not a version manager's shim:
    /// pyenv's runs a shell and several programs at every start, 0.46 s against 0.17 s here while
    /// the machine compiled), or why there is none, with what to install.
    package static func interpreter(importing module: String, install: String) -> Result<String, TestRequirement.Unavailable> {
        guard let python else { return .failure(.init(description: "python3 is not on the PATH")) }
        guard
            let check = try? ChildProcess.start(
                python, ["-c", "import \(module), sys; print(sys.executable)"], environment: ProcessInfo.processInfo.environment),
            let printed = try? check.output?.readToEnd(), check.waitUntilExit() == 0
        else {
            return .failure(.init(description: "\(python) cannot import \(module) (\(install))"))
        }
        let executable = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return .success(FileManager.default.isExecutableFile(atPath: executable) ? executable : python)
    }

    /// Starts `script` with `interpreter` and `arguments`, and waits (30 s at most) for the port
    /// it listens on, its first line; a program that fails says all it printed.
    package static func start(
        _ interpreter: String, _ script: String, _ arguments: [String], environment: [String: String] = [:]
    ) async throws -> (process: ChildProcess, port: Int) {
        let process = try ChildProcess.start(
            interpreter, [script] + arguments,
            environment: ProcessInfo.processInfo.environment.merging(environment) { _, new in new }, errors: .sameAsOutput)
        // Read as it comes, never by a blocking read: that would hold one of the cooperative
        // pool's threads (two on this machine).
        let printed = Mutex("")
        process.output?.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil } else { printed.withLock { $0 += String(decoding: data, as: UTF8.self) } }
        }
        let deadline = ContinuousClock.now + .seconds(30)
        while !printed.withLock({ $0.contains("\n") }), process.isRunning, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        let line = printed.withLock { $0.split(separator: "\n").first.map(String.init) ?? $0 }
        guard let port = Int(line) else {
            // A traceback: let it finish printing, so that the error says all of it.
            let finishing = ContinuousClock.now + .seconds(5)
            while process.isRunning, ContinuousClock.now < finishing { try await Task.sleep(for: .milliseconds(20)) }
            process.send(SIGKILL)
            _ = await process.exitCode()
            throw TestRequirement.Unavailable(description: "\((script as NSString).lastPathComponent) did not start: \(printed.withLock { $0 })")
        }
        return (process, port)
    }
}
