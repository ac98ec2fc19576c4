import Foundation

/// A backlog kept in memory only: for previews and tests, and for simulated apps of an emulator
/// that keeps no state. Shared by the instances given the same one, as a file would be.
@_spi(Adapter) public final class MemoryReportStorage: ReportStorage {
    private let data = Locked<Data?>(nil)

    public init() {}

    public func load() throws -> Data? { data.withLock { $0 } }
    public func save(_ data: Data) throws { self.data.withLock { $0 = data } }
}
