import Foundation
import LiveActivityKit
import LiveRelayStore

/// A key as the service knows it: its record, its tokens with their last results, its schedules.
public struct ActivityDescription: Sendable, Hashable {
    public var activity: ActivityRecord
    public var tokens: [ActivityTokenRecord]
    public var schedules: [ScheduleRecord]
}

/// What the service needs of the API's wire format, which `LiveRelayHTTP` owns: a scheduled
/// request waits in the store as the API's own JSON body (so it runs when due exactly as the
/// request would have). Answers are not the service's: it keeps what a request did
/// (`AcceptedRequest`), and the API renders it.
public protocol RelayWireFormat: Sendable {
    func json(of request: ScheduledRequest) -> JSONValue
    /// Throws when the stored body no longer reads as a request of `action`.
    func request(action: LiveActivityPayload.Event, json: JSONValue) throws -> ScheduledRequest
}
