import Foundation
import LiveRelayStore

/// A real PostgreSQL server for the tests: the one `LIVERELAY_TEST_POSTGRES` names, else one this
/// process starts from the system's PostgreSQL (Debian's `postgresql`: `initdb` and `pg_ctl`),
/// listening on a Unix socket only, in a temporary folder, stopped when the process exits. Each
/// caller gets its own empty schema, so tests run in parallel on one server.
///
/// Without either, `availability` says why: CI (`CI` set) must fail on it, and a developer's run
/// says loudly that the PostgreSQL tests were skipped (`PostgresTests`).
package enum TestPostgres {
    /// The server's address, or why there is none.
    package static let availability: Result<String, Unavailable> = {
        if let url = ProcessInfo.processInfo.environment["LIVERELAY_TEST_POSTGRES"], !url.isEmpty { return .success(url) }
        return Result { () throws(Unavailable) in try LocalServer.start() }
    }()

    /// Two instances' stores on one new database, migrated, running while `body` runs.
    package static func twoInstances(_ body: (PostgresStore, PostgresStore) async throws -> Void) async throws {
        let url = try await freshDatabase()
        let (one, two) = (try PostgresStore(url: url), try PostgresStore(url: url))
        try await one.running {
            try await two.running {
                try await one.migrate()
                try await body(one, two)
            }
        }
    }

    package static var isAvailable: Bool { availability.isMet }

    /// What a skipped PostgreSQL test says: loudly, that PostgreSQL was not tested, and why.
    package static var skipNote: String { availability.skipNote("PostgreSQL was NOT tested") }

    /// Whether this run is CI, where a missing PostgreSQL is a failure, not a skip.
    package static var isCI: Bool { TestRequirement.isCI }

    package typealias Unavailable = TestRequirement.Unavailable

    /// The address of a new, empty schema on the server, as its only search path: what one test
    /// or one group of `serve` instances shares.
    package static func freshDatabase() async throws -> String {
        let base = try availability.get()
        let schema = "t_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try await psql(base, "CREATE SCHEMA \(schema)")
        let separator = base.contains("?") ? "&" : "?"
        return base + separator + "options=-c%20search_path%3D\(schema)"
    }

    /// The schema `freshDatabase()` made for `url`.
    package static func schema(of url: String) -> String? {
        url.components(separatedBy: "search_path%3D").last.map { String($0.prefix { $0 != "&" }) }
    }

    /// Runs PostgreSQL's `pg_dump` or `pg_restore` with `arguments`; throws with what it said when it fails.
    package static func tool(_ name: String, _ arguments: [String]) async throws {
        let log = TestFiles.path(name, pathExtension: "log")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let command = ([LocalServer.tool(name)] + arguments).map(quoted).joined(separator: " ") + " > \(quoted(log)) 2>&1"
        let status = await BlockingWork.run { shell(command) }
        guard status == 0 else {
            throw Unavailable(description: "\(name) exited with \(status): \((try? String(contentsOfFile: log, encoding: .utf8)) ?? "")")
        }
    }

    /// Runs one statement with `psql`.
    package static func psql(_ url: String, _ sql: String) async throws {
        _ = try await psqlOutput(url, sql)
    }

    /// Runs statements (`;`-separated, in one session) with `psql`; what they printed, rows as
    /// unaligned lines. `psql` is waited for on a thread of its own (`BlockingWork`): seconds of
    /// a large insert on a cooperative thread once held up every other test until its deadline.
    package static func psqlOutput(_ url: String, _ sql: String) async throws -> String {
        let log = TestFiles.path("psql", pathExtension: "log")
        defer { try? FileManager.default.removeItem(atPath: log) }
        let command = "\(quoted(LocalServer.tool("psql"))) -X -q -A -t -v ON_ERROR_STOP=1 -d \(quoted(url)) -c \(quoted(sql)) > \(quoted(log)) 2>&1"
        let status = await BlockingWork.run { shell(command) }
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        guard status == 0 else { throw Unavailable(description: "psql \(sql): \(output.isEmpty ? "exit \(status)" : output)") }
        return output
    }

    /// Runs a shell command and waits for it; its exit status. (Not with Foundation's `Process`,
    /// whose wait never returned when called while the test runner was still planning, where
    /// `availability` is first read.)
    static func shell(_ command: String) -> Int32 {
        let child = try? ChildProcess.start("/bin/sh", ["-c", command], environment: ProcessInfo.processInfo.environment, output: .null)
        return child?.waitUntilExit() ?? -1
    }

    /// `text` as one shell word.
    static func quoted(_ text: String) -> String { "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'" }

    /// A server of this process's own.
    enum LocalServer {
        /// The folder of PostgreSQL's programs: `pg_config --bindir`, else Debian's newest.
        static let binaries: String? = {
            let manager = FileManager.default
            let debian = "/usr/lib/postgresql"
            let versions = (try? manager.contentsOfDirectory(atPath: debian))?.compactMap(Int.init).sorted() ?? []
            if let newest = versions.last, manager.fileExists(atPath: "\(debian)/\(newest)/bin/initdb") { return "\(debian)/\(newest)/bin" }
            for folder in ["/usr/local/pgsql/bin", "/usr/bin", "/usr/local/bin"] where manager.fileExists(atPath: "\(folder)/initdb") {
                return folder
            }
            return nil
        }()

        static func tool(_ name: String) -> String {
            if let binaries, FileManager.default.fileExists(atPath: "\(binaries)/\(name)") { return "\(binaries)/\(name)" }
            return "/usr/bin/\(name)"
        }

        static func start() throws(Unavailable) -> String {
            guard let binaries else {
                throw Unavailable(
                    description: "no PostgreSQL found (no initdb in /usr/lib/postgresql/*/bin): install Debian's postgresql, "
                        + "or set LIVERELAY_TEST_POSTGRES to a server's address")
            }
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("liverelay-postgres-\(UUID().uuidString.prefix(8))").path
            let data = folder + "/data"
            // A socket's port number only names its file: any will do, none is listened on.
            let port = Int.random(in: 20000..<60000)
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                // initdb refuses to run as root: the server runs as the `postgres` user, which must own the folder.
                let asRoot = getuid() == 0
                if asRoot { try FileManager.default.setAttributes([.ownerAccountName: "postgres"], ofItemAtPath: folder) }
                func asServerUser(_ command: String) throws(Unavailable) {
                    let status = shell(asRoot ? "su postgres -s /bin/sh -c \(quoted(command))" : command)
                    guard status == 0 else { throw Unavailable(description: "\(command) failed (see its log in \(folder))") }
                }
                try asServerUser("\(binaries)/initdb -D \(data) -A trust -U postgres --no-sync > \(folder)/initdb.log 2>&1")
                try asServerUser(
                    "\(binaries)/pg_ctl -D \(data) -l \(folder)/server.log -w -o \"-k \(folder) -p \(port) -c listen_addresses= -c fsync=off -c max_connections=200\" start > \(folder)/pg_ctl.log 2>&1"
                )
            } catch let error as Unavailable {
                throw error
            } catch {
                throw Unavailable(description: "could not prepare \(folder): \(error)")
            }
            stopAtExit(binaries: binaries, folder: folder, asRoot: getuid() == 0)
            return "postgres://postgres@/postgres?host=\(folder)&port=\(port)"
        }

        nonisolated(unsafe) private static var stop: String = ""

        /// Stops the server when the process exits, and removes its cluster (about 140 MB).
        private static func stopAtExit(binaries: String, folder: String, asRoot: Bool) {
            let command = "\(binaries)/pg_ctl -D \(folder)/data -m immediate stop > /dev/null 2>&1"
            stop = (asRoot ? "su postgres -s /bin/sh -c \(TestPostgres.quoted(command))" : command) + "; rm -rf \(TestPostgres.quoted(folder))"
            atexit { _ = TestPostgres.shell(TestPostgres.LocalServer.stop) }
        }
    }
}
