import APNs
import Foundation
import Synchronization

/// A misbehaviour of Apple's infrastructure, played on purpose so that retry logic can be tested:
/// error answers, slowness, GOAWAY, dropped connections, shutdown.
public struct EmulatorFault: Sendable, Hashable {
    /// Which requests a fault applies to.
    public enum Scope: Sendable, Hashable {
        case all
        /// Requests for one app: the `apns-topic` of device pushes (with or without its
        /// `.push-type.` suffix) or the bundle id in a broadcast or channel path.
        case bundleID(String)
        /// Device pushes to one token.
        case token(String)
    }

    public enum Action: Sendable, Hashable {
        /// Answer with this status and `{"reason": …}` instead of judging the request.
        case respond(status: Int, reason: APNsReason)
        /// Judge and answer the request as usual, but only after this delay.
        case delay(Duration)
        /// Leave the request unprocessed and close the connection with GOAWAY (NO_ERROR) whose
        /// debug data is `{"reason": …}`; the client may retry it on a new connection.
        case goAway(reason: APNsReason)
        /// Drop the connection without answering.
        case resetConnection
        /// Leave the request unjudged and unanswered, its stream open, as a hung server does:
        /// the push never reaches the device and the client learns nothing until it gives up.
        case stall
        /// Judge the request, then freeze its connection for this long: its answer and everything
        /// else the connection would write meanwhile, PING acknowledgements included, are held,
        /// then written together, as when a path congests or a server hangs and recovers.
        case freeze(Duration)
        /// `503 Shutdown`, then GOAWAY with the same reason, as a server going down does.
        case shutdown
    }

    public var scope: Scope
    public var action: Action
    /// Matching requests let through unharmed before the fault starts (GOAWAY "after N streams").
    public var skip: Int
    /// Matching requests the fault then applies to; `nil` means until it is removed.
    public var count: Int?

    public init(_ action: Action, scope: Scope = .all, skip: Int = 0, count: Int? = 1) {
        self.scope = scope
        self.action = action
        self.skip = skip
        self.count = count
    }

    /// `status` defaults to the reason's documented status.
    public static func respond(_ reason: APNsReason, status: Int? = nil) -> Action {
        .respond(status: status ?? reason.known?.status ?? 500, reason: reason)
    }

    func matches(bundleID: String?, token: String?) -> Bool {
        switch scope {
        case .all: true
        case .bundleID(let wanted): bundleID == wanted
        case .token(let wanted): token == wanted.lowercased()
        }
    }
}

/// The faults in force, each with an id; the first matching one applies to a request.
public final class EmulatorFaults: Sendable {
    public struct Installed: Sendable, Hashable {
        public var id: Int
        public var fault: EmulatorFault
        /// Requests it has applied to so far.
        public var applied: Int
    }

    private struct State {
        var faults: [Installed] = []
        var nextID = 1
    }

    private let state = Mutex(State())

    public init() {}

    /// Installs a fault; it applies to matching requests after those installed before it.
    @discardableResult
    public func add(_ fault: EmulatorFault) -> Int {
        state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.faults.append(Installed(id: id, fault: fault, applied: 0))
            return id
        }
    }

    @discardableResult
    public func remove(id: Int) -> Bool {
        state.withLock { state in
            guard let index = state.faults.firstIndex(where: { $0.id == id }) else { return false }
            state.faults.remove(at: index)
            return true
        }
    }

    public func removeAll() {
        state.withLock { $0.faults.removeAll() }
    }

    /// The faults still in force.
    public var installed: [Installed] { state.withLock { $0.faults } }

    /// The action for one request, if a fault takes it; spent faults are removed. Without faults
    /// this is one lock and an empty check: the request is not even looked at.
    func take(for request: ReceivedRequest) -> EmulatorFault.Action? {
        state.withLock { state in
            guard !state.faults.isEmpty else { return nil }
            let bundleID = request.bundleID
            let token = request.deviceToken
            for index in state.faults.indices where state.faults[index].fault.matches(bundleID: bundleID, token: token) {
                if state.faults[index].fault.skip > 0 {
                    state.faults[index].fault.skip -= 1
                    continue
                }
                let action = state.faults[index].fault.action
                state.faults[index].applied += 1
                if let count = state.faults[index].fault.count {
                    if count <= 1 {
                        state.faults.remove(at: index)
                    } else {
                        state.faults[index].fault.count = count - 1
                    }
                }
                return action
            }
            return nil
        }
    }
}
