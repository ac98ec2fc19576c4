import Foundation
import LiveActivityKit
import LiveRelayStore

/// A key as the service knows it: its record, its tokens with their last results, its schedules.
package struct ActivityDescription: Sendable, Hashable {
    package var activity: ActivityRecord
    package var tokens: [ActivityTokenRecord]
    /// The devices whose channel-bound activity listens to the key's channel.
    package var listeners: [ChannelListenerRecord]
    package var schedules: [ScheduleRecord]
}

/// What the service still needs of the API's wire format, which `LiveRelayHTTP` owns: the reader
/// of schedules an earlier release kept as the API's request body (the service keeps a scheduled
/// request as its own JSON now, `ScheduledRequest.stored()`). Answers are not the service's either:
/// it keeps what a request did (`AcceptedRequest`), and the API renders it.
package protocol RelayWireFormat: Sendable {
    /// Throws when the stored body no longer reads as a request of `action`.
    func request(action: LiveActivityPayload.Event, json: JSONValue) throws -> ScheduledRequest
}
