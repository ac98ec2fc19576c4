import Foundation

/// What LiveRelayKit keeps across launches, in one small file: the planner's memory and the
/// reports not yet acknowledged, in order. Rewritten whole (atomically) at each change: a few
/// kilobytes, written only when something happens.
struct ReportBacklog: Sendable, Hashable, Codable {
    var planner: ReportPlanner
    var pending: [PendingReport] = []
    var nextSequence = 1
    /// Reports the server refused for want of the backend's grant, kept until the app hands one
    /// over (nil in a backlog of LiveRelayKit 0.2).
    var awaitingGrant: [PendingReport]?
    /// The app version the reports were made under (`Reporter.appVersion`): another at launch is
    /// an update, and everything is reported again (`ReportPlanner.appVersionChanged`).
    var appVersion: String?

    /// At most this many reports wait for a grant; the oldest go first.
    static let mostAwaitingGrant = 50

    struct PendingReport: Sendable, Hashable, Codable {
        var sequence: Int
        var report: Report
        /// Attempts that failed so far.
        var attempts = 0
    }

    /// Adds reports at the end. A token replaces an older one of the same type or activity still
    /// waiting behind the first (which may be on its way): the server needs only the newest, and
    /// the file stays small however long the server is away.
    mutating func append(_ reports: [Report]) {
        for report in reports {
            if let slot = report.tokenSlot {
                pending = pending.enumerated().filter { $0.offset == 0 || $0.element.report.tokenSlot != slot }.map(\.element)
            }
            pending.append(PendingReport(sequence: nextSequence, report: report))
            nextSequence += 1
        }
    }

    /// A file too big for a few tokens is not read: it is not ours, or it was damaged.
    static let largestFile = 4 * 1_024 * 1_024
}

/// Where the backlog lives.
@_spi(Adapter) public protocol ReportStorage: Sendable {
    /// The saved bytes, or `nil` when nothing was saved yet.
    func load() throws -> Data?
    func save(_ data: Data) throws
}

/// A file in the app's storage (by default under Application Support), replaced atomically.
@_spi(Adapter) public struct FileReportStorage: ReportStorage {
    public let url: URL

    public init(url: URL) {
        self.url = url
    }

    public func load() throws -> Data? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        let size = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int ?? 0
        guard size <= ReportBacklog.largestFile else { throw BacklogTooLarge(path: url.path, size: size) }
        return try Data(contentsOf: url)
    }

    public func save(_ data: Data) throws {
        try AppFiles.write(data, to: url)
    }
}

/// How LiveRelayKit writes its files (the backlog, the device id): in a folder only the app
/// reads (0700), each file only the app reads (0600); on a phone, readable once the phone was
/// unlocked after it started (a push-to-start wakes the app on a locked phone), and left out of
/// backups (restored onto another iPhone, the device id would be two devices').
enum AppFiles {
    /// Writes the file whole; with `replacing: false`, only when there is none (and throws if there is).
    static func write(_ data: Data, to url: URL, replacing: Bool = true) throws {
        let folder = url.deletingLastPathComponent()
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        #if os(iOS) || os(watchOS) || os(tvOS) || os(visionOS)
            var options: Data.WritingOptions = [.completeFileProtectionUntilFirstUserAuthentication]
        #else
            var options: Data.WritingOptions = []
        #endif
        options.insert(replacing ? .atomic : .withoutOverwriting)
        try data.write(to: url, options: options)
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: url.path)
        #if canImport(Darwin)
            var values = URLResourceValues()
            values.isExcludedFromBackup = true
            var excluded = url
            try? excluded.setResourceValues(values)
        #endif
    }
}

/// The backlog file is larger than any backlog of ours.
@_spi(Adapter) public struct BacklogTooLarge: Error, CustomStringConvertible {
    public var path: String
    public var size: Int
    public var description: String {
        "LiveRelayKit: \(path) holds \(size) bytes, more than a backlog ever does; a new one replaces it"
    }
}
