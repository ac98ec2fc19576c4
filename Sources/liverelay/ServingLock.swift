import ArgumentParser
import Foundation
import LiveRelayStore

#if canImport(Glibc)
    import Glibc
#endif

/// Who works on a SQLite database now: every `serve` holds a shared lock on `<database>.serving`
/// for as long as it runs, and what must not run beside a server (rotating the master key, which a
/// running server would go on sealing with the old one) takes it alone, or refuses. The kernel
/// drops the lock when its process ends, however it ends: a server killed a moment ago holds
/// nothing. (The database file itself is never opened for this: closing a descriptor of it would
/// drop the locks SQLite holds on it in this process.)
enum ServingLock {
    static func file(of database: String) -> String { database + ".serving" }

    /// Taken by `serve` for the life of the process: the descriptor is never closed.
    static func holdShared(database: String) throws {
        let descriptor = try open(database)
        guard flock(descriptor, LOCK_SH | LOCK_NB) == 0 else {
            close(descriptor)
            throw ValidationError("data-dir: `liverelay keys rotate-master` is working on \(database): start the server once it has finished")
        }
    }

    /// Runs `body` holding the lock alone; refuses while a server runs on the database.
    static func exclusively<Value>(database: String, _ body: () async throws -> Value) async throws -> Value {
        let descriptor = try open(database)
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            throw ValidationError(
                "data-dir: a server is running on \(database) (it holds \(file(of: database))): stop it first; a running server would go on sealing new keys with the old master key"
            )
        }
        return try await body()
    }

    private static func open(_ database: String) throws -> Int32 {
        let descriptor = Glibc.open(file(of: database), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw ValidationError("data-dir: cannot open \(file(of: database)): \(String(cString: strerror(errno)))")
        }
        return descriptor
    }
}
