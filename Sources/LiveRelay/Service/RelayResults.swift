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
