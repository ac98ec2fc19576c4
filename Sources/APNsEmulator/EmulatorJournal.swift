import APNs
import Foundation
import LiveActivityKit
import Synchronization

/// One request as the emulator saw it and what it answered. The provider token is elided.
public struct RecordedRequest: Sendable {
    /// Position since start (1, 2, …): poll with `requests(after:)` to read only newer ones.
    public var sequence: Int
    public var time: Date
    /// The environment whose listener took it.
    public var environment: PushEnvironment
    public var connectionID: Int
    public var method: String
    public var path: String
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// `nil` when the request was left unanswered (GOAWAY, dropped connection).
    public var status: Int?
    /// `nil` when accepted.
    public var reason: APNsReason?
    /// The fault played on this request, if any.
    public var fault: EmulatorFault.Action?
    /// Set when HTTP/2 itself refused the stream (RST_STREAM, no HTTP answer): what was wrong.
    public var streamError: String?

    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }

    /// The key this request is counted under: its reason, `Success`, `Unanswered`, or
    /// `MalformedStream`.
    public var outcome: String {
        if streamError != nil { return "MalformedStream" }
        guard status != nil else { return "Unanswered" }
        return reason?.rawValue ?? "Success"
    }
}

/// The most recent requests in a bounded ring, and how many got each answer since start.
public final class EmulatorJournal: Sendable {
    private struct State {
        var ring: [RecordedRequest] = []
        var next = 0
        var recorded = 0
        var counts: [String: Int] = [:]
    }

    public let capacity: Int
    private let state = Mutex(State())

    public init(capacity: Int = 10_000) {
        self.capacity = max(1, capacity)
    }

    func record(_ request: ReceivedRequest, in environment: PushEnvironment, verdict: Verdict, at time: Date) {
        append(request, environment, status: verdict.status, reason: verdict.reason, fault: verdict.fault, streamError: nil, at: time)
    }

    /// A stream HTTP/2 refused before it became a request.
    func recordMalformed(_ request: ReceivedRequest, in environment: PushEnvironment, error: String, at time: Date) {
        append(request, environment, status: nil, reason: nil, fault: nil, streamError: error, at: time)
    }

    private func append(
        _ request: ReceivedRequest, _ environment: PushEnvironment, status: Int?, reason: APNsReason?, fault: EmulatorFault.Action?,
        streamError: String?, at time: Date
    ) {
        let headers = request.headers.map { header in
            header.name == "authorization" ? (name: header.name, value: "bearer <provider token elided>") : header
        }
        var entry = RecordedRequest(
            sequence: 0, time: time, environment: environment, connectionID: request.connectionID, method: request.method, path: request.path,
            headers: headers, body: request.body, status: status, reason: reason, fault: fault, streamError: streamError)
        state.withLock { state in
            state.recorded += 1
            entry.sequence = state.recorded
            if state.ring.count < capacity {
                state.ring.append(entry)
            } else {
                state.ring[state.next] = entry
            }
            state.next = (state.next + 1) % capacity
            state.counts[entry.outcome, default: 0] += 1
        }
    }

    /// The recorded requests, oldest first (at most `capacity`).
    public var requests: [RecordedRequest] { requests(after: 0) }

    /// The kept requests with a sequence number above `sequence`, oldest first, at most `limit`.
    public func requests(after sequence: Int, limit: Int = .max, where include: (RecordedRequest) -> Bool = { _ in true }) -> [RecordedRequest] {
        let kept = state.withLock { state in
            state.ring.count < capacity ? state.ring : Array(state.ring[state.next...] + state.ring[..<state.next])
        }
        var found: [RecordedRequest] = []
        for entry in kept where entry.sequence > sequence && include(entry) {
            guard found.count < limit else { break }
            found.append(entry)
        }
        return found
    }

    /// Answers since start by outcome (`Success`, a reason, or `Unanswered`).
    public var counts: [String: Int] { state.withLock { $0.counts } }

    /// Requests recorded since start.
    public var recordedCount: Int { state.withLock { $0.recorded } }
}
