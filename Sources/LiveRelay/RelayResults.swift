import Foundation
import LiveActivityKit
import LiveRelayStore

/// What an accepted start, update or end did.
public struct Acceptance: Sendable, Hashable {
    public var key: String
    /// `start`, `update` or `end`.
    public var action: LiveActivityPayload.Event
    /// Shared by the request's pushes in the outbox.
    public var requestID: String
    /// The payload's `timestamp`, which orders the key's pushes on the device.
    public var timestamp: Int64
    /// How many pushes were queued (a broadcast counts one).
    public var deliveries: Int
    /// The key's state after the request.
    public var state: ActivityKeyState
    /// The broadcast channels the key's updates go through, one per APNs environment, when it has any.
    public var channelIDs: [PushEnvironment: String]
    /// What the sender should know although the request was accepted: that it reached no device,
    /// or that a date was probably meant in another unit.
    public var warnings: [String]
    /// The most of one target's hourly priority-10 budget the request spent, when it spent any
    /// (not answered; the dashboard's overview keeps it).
    public var budgetUse: BudgetUse?

    public init(
        key: String, action: LiveActivityPayload.Event, requestID: String, timestamp: Int64, deliveries: Int, state: ActivityKeyState,
        channelIDs: [PushEnvironment: String] = [:],
        warnings: [String] = [], budgetUse: BudgetUse? = nil
    ) {
        self.budgetUse = budgetUse
        self.key = key
        self.action = action
        self.requestID = requestID
        self.timestamp = timestamp
        self.deliveries = deliveries
        self.state = state
        self.channelIDs = channelIDs
        self.warnings = warnings
    }
}

/// A start, update or end done now, or kept to run at its time.
public enum AcceptedRequest: Sendable, Hashable {
    case accepted(Acceptance)
    case scheduled(ScheduleRecord)
}

/// A key as the service knows it: its record, its tokens with their last results, its schedules.
public struct ActivityDescription: Sendable, Hashable {
    public var activity: ActivityRecord
    public var tokens: [ActivityTokenRecord]
    public var schedules: [ScheduleRecord]
}

/// What the service needs of the API's wire format, which `LiveRelayHTTP` owns: a scheduled
/// request waits in the store as the API's own JSON body (so it runs when due exactly as the
/// request would have), and an accepted request's answer is kept with the write that accepts it
/// (replayed for its idempotency key, and shown as a schedule's result).
public protocol RelayWireFormat: Sendable {
    func json(of request: ScheduledRequest) -> JSONValue
    /// Throws when the stored body no longer reads as a request of `action`.
    func request(action: LiveActivityPayload.Event, json: JSONValue) throws -> ScheduledRequest
    func answer(_ accepted: AcceptedRequest) -> StoredResponse
}
