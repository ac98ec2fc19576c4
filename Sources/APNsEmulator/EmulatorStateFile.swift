import Foundation
import Logging
import SimulatedDevices
import Synchronization

/// Keeps an emulator's devices and what APNs knows of them (keys, tokens, channels) in one file,
/// so that a restart finds the iPhones as they were, as a real iPhone does not lose its
/// activities when a server restarts. Read at start; written whole soon after each change (a
/// temporary file renamed over the old one, so that a kill leaves the last complete state) and at
/// shutdown.
final class EmulatorStateFile: Sendable {
    /// How soon after a change it is written: a kill loses at most this much.
    static let writeDelay = Duration.milliseconds(200)

    struct Contents: Codable {
        var devices: FleetSnapshot
        var registry: EmulatorRegistry.Snapshot
    }

    let path: String
    private let logger: Logger
    /// What was last written and at which revisions, so that an unchanged state is not encoded again.
    private let written = Mutex<(revisions: Revisions?, bytes: Data?)>((nil, nil))

    private struct Revisions: Equatable {
        var fleet: Int
        var registry: Int
        var clock: TimeInterval
    }

    init(path: String, logger: Logger) {
        self.path = path
        self.logger = logger
    }

    /// Restores what the file holds into an empty fleet and registry. A file this version cannot
    /// read is moved aside (never deleted), said in the log, and the emulator starts afresh.
    func load(into fleet: DeviceFleet, registry: EmulatorRegistry) {
        guard let data = FileManager.default.contents(atPath: path) else { return }
        do {
            let contents = try JSONDecoder().decode(Contents.self, from: data)
            registry.restore(contents.registry)
            try fleet.restore(contents.devices)
            logger.notice("simulated devices restored", metadata: ["file": "\(path)", "devices": "\(contents.devices.devices.count)"])
        } catch {
            let aside = path + ".unreadable"
            try? FileManager.default.removeItem(atPath: aside)
            try? FileManager.default.moveItem(atPath: path, toPath: aside)
            logger.warning(
                "the kept simulated devices cannot be read: starting with new ones",
                metadata: [
                    "file": "\(path)", "moved to": "\(aside)", "error": "\(error)",
                ])
        }
    }

    /// Writes the state if it changed since the last write.
    func saveIfChanged(fleet: DeviceFleet, registry: EmulatorRegistry) {
        let revisions = Revisions(fleet: fleet.revision, registry: registry.revision, clock: fleet.clock.advanced)
        guard written.withLock({ $0.revisions }) != revisions else { return }
        do {
            let encoder = JSONEncoder()
            encoder.outputFormatting = .sortedKeys
            let bytes = try encoder.encode(Contents(devices: fleet.snapshot, registry: registry.snapshot))
            if written.withLock({ $0.bytes }) != bytes {
                try Self.writePrivately(bytes, to: path)
            }
            written.withLock { $0 = (revisions, bytes) }
        } catch {
            logger.error("the simulated devices cannot be kept", metadata: ["file": "\(path)", "error": "\(error)"])
            // Tried again at the next change only: an error every 200 ms would flood the log.
            written.withLock { $0.revisions = revisions }
        }
    }

    /// Replaces the file at once with `bytes`, the owner's alone from the start: it holds every
    /// token of the devices, as the database does. (Written then narrowed, it was readable by
    /// others for a moment after each change.)
    static func writePrivately(_ bytes: Data, to path: String) throws {
        let temporary = path + ".writing"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: temporary]) }
        let file = FileHandle(fileDescriptor: descriptor, closeOnDealloc: true)
        // An older file made by hand may be wider: narrowed before anything is written to it.
        fchmod(descriptor, 0o600)
        try file.write(contentsOf: bytes)
        try file.close()
        guard rename(temporary, path) == 0 else { throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: path]) }
    }
}
