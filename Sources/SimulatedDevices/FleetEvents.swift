import Foundation
import Synchronization

/// Something that happened on a device, numbered in the order it happened across the fleet.
public struct FleetEvent: Sendable, Hashable {
    /// 1, 2, 3, …: resume after the last one seen.
    public var sequence: Int
    public var at: Date
    public var deviceID: String
    public var event: DeviceEvent

    /// The app concerned, when there is one.
    public var bundleID: String {
        switch event {
        case .tokenIssued(_, let bundleID, _, _), .activityStarted(_, let bundleID, _, _), .contentUpdated(_, let bundleID, _),
            .stateChanged(_, let bundleID, _, _):
            bundleID
        case .tokenRetired(_, _, let bundleID), .authorizationChanged(let bundleID, _, _):
            bundleID
        case .widgetPushInfoChanged(let bundleID), .controlPushInfoChanged(let bundleID), .surfacesReloaded(let bundleID, _, _):
            bundleID
        }
    }

    /// The activity concerned, when there is one.
    public var activityID: String? {
        switch event {
        case .activityStarted(let id, _, _, _), .contentUpdated(let id, _, _), .stateChanged(let id, _, _, _): id
        case .tokenIssued(_, _, .update(let id), _): id
        case .tokenIssued, .tokenRetired, .authorizationChanged, .widgetPushInfoChanged, .controlPushInfoChanged, .surfacesReloaded: nil
        }
    }
}

/// The fleet's recent events, kept in a ring for readers that poll, and streamed to readers
/// that subscribe. A subscriber first gets what the ring holds after the sequence it gives, then
/// everything new, with no gap and no repeat.
public final class FleetEventLog: Sendable {
    private struct State {
        var ring: [FleetEvent] = []
        /// Where the next event goes once the ring is full.
        var oldest = 0
        var lastSequence = 0
        var subscribers: [Int: AsyncStream<FleetEvent>.Continuation] = [:]
        var nextSubscriber = 0
    }

    public let capacity: Int
    private let state = Mutex(State())

    public init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
    }

    public var lastSequence: Int { state.withLock { $0.lastSequence } }

    func append(_ events: [DeviceEvent], deviceID: String, at now: Date) {
        state.withLock { state in
            for event in events {
                state.lastSequence += 1
                let entry = FleetEvent(sequence: state.lastSequence, at: now, deviceID: deviceID, event: event)
                if state.ring.count < capacity {
                    state.ring.append(entry)
                } else {
                    state.ring[state.oldest] = entry
                    state.oldest = (state.oldest + 1) % capacity
                }
                for continuation in state.subscribers.values { continuation.yield(entry) }
            }
        }
    }

    /// Events after `sequence` still in the ring, oldest first, at most `limit`, that match.
    public func events(after sequence: Int, limit: Int = .max, where matches: (FleetEvent) -> Bool = { _ in true }) -> [FleetEvent] {
        state.withLock { state in
            var found: [FleetEvent] = []
            for event in Self.events(after: sequence, in: state) where matches(event) {
                guard found.count < limit else { break }
                found.append(event)
            }
            return found
        }
    }

    /// Every event after `sequence` (those the ring still holds, then new ones) until the
    /// iterating task is cancelled. `nil` starts with the next new event.
    public func subscribe(after sequence: Int? = nil) -> AsyncStream<FleetEvent> {
        let (stream, continuation) = AsyncStream.makeStream(of: FleetEvent.self, bufferingPolicy: .bufferingNewest(capacity))
        let id = state.withLock { state in
            if let sequence {
                for event in Self.events(after: sequence, in: state) { continuation.yield(event) }
            }
            state.nextSubscriber += 1
            state.subscribers[state.nextSubscriber] = continuation
            return state.nextSubscriber
        }
        continuation.onTermination = { [weak self] _ in
            _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
        }
        return stream
    }

    /// Events after `sequence` that match; if there are none yet, waits up to `timeout` for one.
    public func wait(after sequence: Int, limit: Int, timeout: Duration, where matches: @escaping @Sendable (FleetEvent) -> Bool) async
        -> [FleetEvent]
    {
        let ready = events(after: sequence, limit: limit, where: matches)
        guard ready.isEmpty, limit > 0, timeout > .zero else { return ready }
        let stream = subscribe(after: sequence)
        return await withTaskGroup(of: [FleetEvent].self) { group in
            group.addTask {
                for await event in stream where matches(event) { return [event] }
                return []
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return []
            }
            let first = await group.next() ?? []
            group.cancelAll()
            guard let event = first.first else { return [] }
            return [event] + self.events(after: event.sequence, limit: limit - 1, where: matches)
        }
    }

    /// The ring's events after `sequence`, oldest first; sequences are consecutive, so the first
    /// one wanted is found by arithmetic.
    private static func events(after sequence: Int, in state: State) -> some Sequence<FleetEvent> {
        let firstHeld = state.lastSequence - state.ring.count + 1
        let skip = min(max(0, sequence + 1 - firstHeld), state.ring.count)
        return (skip..<state.ring.count).lazy.map { state.ring[(state.oldest + $0) % state.ring.count] }
    }
}

/// Devices in the order of the moment at which time alone next changes them: a binary min-heap
/// with lazy deletion, so that applying time visits only the devices it concerns.
struct DeadlineQueue {
    private var heap: [(at: Date, deviceID: String)] = []
    /// The one deadline that counts per device; heap entries that disagree are stale.
    private var current: [String: Date] = [:]

    mutating func schedule(_ deviceID: String, at deadline: Date?) {
        guard current[deviceID] != deadline else { return }
        current[deviceID] = deadline
        guard let deadline else { return }
        push((deadline, deviceID))
        if heap.count > 2 * current.count + 1024 { compact() }
    }

    /// Removes and returns the devices due at `now`.
    mutating func popDue(at now: Date) -> [String] {
        var due: [String] = []
        while let top = heap.first, top.at <= now {
            pop()
            if current[top.deviceID] == top.at {
                current[top.deviceID] = nil
                due.append(top.deviceID)
            }
        }
        return due
    }

    private mutating func compact() {
        heap = []
        for (id, at) in current { push((at, id)) }
    }

    private mutating func push(_ entry: (at: Date, deviceID: String)) {
        heap.append(entry)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].at < heap[parent].at else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func pop() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count, heap[left].at < heap[smallest].at { smallest = left }
            if right < heap.count, heap[right].at < heap[smallest].at { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
