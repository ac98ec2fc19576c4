import APNs
import Foundation
import Synchronization

/// One request as the emulator saw it and what it answered. The provider token is elided.
public struct RecordedRequest: Sendable {
    public var time: Date
    public var connectionID: Int
    public var method: String
    public var path: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    public var status: Int
    /// `nil` when accepted.
    public var reason: APNsReason?
}

/// The most recent requests in a bounded ring, and how many got each answer since start.
public final class EmulatorJournal: Sendable {
    private struct State {
        var ring: [RecordedRequest] = []
        var next = 0
        var counts: [String: Int] = [:]
    }

    public let capacity: Int
    private let state = Mutex(State())

    public init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
    }

    func record(_ request: ReceivedRequest, verdict: Verdict, at time: Date) {
        let headers = request.headers.map { header in
            header.name == "authorization" ? (header.name, "bearer <provider token elided>") : header
        }
        let entry = RecordedRequest(
            time: time, connectionID: request.connectionID, method: request.method, path: request.path,
            headers: headers, body: request.body, status: verdict.status, reason: verdict.reason)
        state.withLock { state in
            if state.ring.count < capacity {
                state.ring.append(entry)
            } else {
                state.ring[state.next] = entry
            }
            state.next = (state.next + 1) % capacity
            state.counts[verdict.reason?.rawValue ?? "Success", default: 0] += 1
        }
    }

    /// The recorded requests, oldest first (at most `capacity`).
    public var requests: [RecordedRequest] {
        state.withLock { state in
            state.ring.count < capacity ? state.ring : Array(state.ring[state.next...] + state.ring[..<state.next])
        }
    }

    /// Answers since start by reason (`Success` for accepted requests).
    public var counts: [String: Int] { state.withLock { $0.counts } }
}
