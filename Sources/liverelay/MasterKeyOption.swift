import ArgumentParser
import Foundation
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore

#if canImport(Glibc)
    import Glibc
#endif

/// `--master-key-file`: the key that seals the apps' signing keys in the store. The option wins
/// over `LIVERELAY_MASTER_KEY`; without either, a SQLite store's key is `<data-dir>/master.key`,
/// made on the first start. PostgreSQL requires one: a shared database must not hold the means
/// to open itself.
struct MasterKeyOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "A file holding the key that seals the apps' signing keys in the database: 32 bytes in base64 (also LIVERELAY_MASTER_KEY). Required with PostgreSQL; with SQLite, default <data-dir>/master.key, made on the first start.",
            valueName: "path"))
    var masterKeyFile: String?

    static let environmentVariable = "LIVERELAY_MASTER_KEY"

    /// Where the key comes from, for messages.
    enum Source: Equatable {
        case file(String)
        case environment
        /// The data directory's file, made now.
        case made(String)
    }

    /// The master key for the store at `location`, and where it came from; with SQLite and no key
    /// given, the data directory's, made when there is none and `mayMake`.
    func load(for location: StoreLocation, in directory: DataDirectory, mayMake: Bool = true) throws -> (key: MasterKey, source: Source) {
        if let masterKeyFile { return (try Self.read(masterKeyFile, option: "master-key-file"), .file(masterKeyFile)) }
        if let text = ProcessInfo.processInfo.environment[Self.environmentVariable], !text.isEmpty {
            do {
                return (try MasterKey(base64: text), .environment)
            } catch {
                throw ValidationError("\(Self.environmentVariable): \(error)")
            }
        }
        guard case .sqlite = location else {
            throw ValidationError(
                "master-key-file: PostgreSQL needs a master key to seal the apps' signing keys (a shared database must not hold the means to open itself): give --master-key-file or \(Self.environmentVariable); make one with `\(MasterKey.howToMake)`"
            )
        }
        let path = directory.masterKey
        if FileManager.default.fileExists(atPath: path) { return (try Self.read(path, option: "data-dir"), .file(path)) }
        guard mayMake else { throw ValidationError("master-key-file: no master key given, and none at \(path)") }
        let key = MasterKey.generate()
        try Self.writeNew(key, to: path, option: "data-dir")
        return (key, .made(path))
    }

    static func read(_ path: String, option: String) throws -> MasterKey {
        guard let data = FileManager.default.contents(atPath: path) else { throw ValidationError("\(option): cannot read the master key at \(path)") }
        do {
            return try MasterKey(base64: String(decoding: data, as: UTF8.self))
        } catch {
            throw ValidationError("\(option): \(path): \(error)")
        }
    }

    /// Writes `key` to a file that must not exist yet, readable by its owner only from the start.
    static func writeNew(_ key: MasterKey, to path: String, option: String) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard descriptor >= 0 else {
            throw ValidationError("\(option): cannot make the master key file \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(descriptor) }
        let text = Array((key.base64 + "\n").utf8)
        guard write(descriptor, text, text.count) == text.count, fsync(descriptor) == 0 else {
            throw ValidationError("\(option): cannot write the master key file \(path): \(String(cString: strerror(errno)))")
        }
    }
}
