import LiveActivityKit
import LiveRelayStore
import Synchronization

/// The contracts of the server's app by attributes type, as requests are checked against them.
/// Read from the store when first needed and again once `refreshInterval` has passed, so that a
/// contract registered through another process sharing the store applies within it; one
/// registered here applies to the next request.
final class ContractBook: Sendable {
    static let refreshInterval = Duration.seconds(5)

    private struct State {
        var contracts: [String: ActivityContract] = [:]
        var readAt: ContinuousClock.Instant?
        /// Counts registrations, so that a read begun before one never overwrites it.
        var generation = 0
    }

    private let state = Mutex(State())

    func contracts(bundleID: String, from store: any RelayStore) async throws -> [String: ActivityContract] {
        let (fresh, generation) = state.withLock { state in
            (state.readAt.map { ContinuousClock.now - $0 < Self.refreshInterval } == true ? state.contracts : nil, state.generation)
        }
        if let fresh { return fresh }
        var read: [String: ActivityContract] = [:]
        for record in try await store.contracts() where record.bundleID == bundleID {
            // Stored contracts were read when registered; one that no longer reads is left out.
            if let contract = try? ActivityContract(json: record.contract, name: record.attributesType) { read[record.attributesType] = contract }
        }
        return state.withLock { state in
            guard state.generation == generation else { return state.contracts.merging(read) { kept, _ in kept } }
            state.contracts = read
            state.readAt = .now
            return read
        }
    }

    func registered(_ contract: ActivityContract) {
        state.withLock { state in
            state.contracts[contract.attributesType] = contract
            state.generation += 1
            state.readAt = nil
        }
    }
}
