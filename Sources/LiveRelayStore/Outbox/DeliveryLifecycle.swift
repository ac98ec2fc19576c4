import Foundation
import LiveActivityKit

/// What can happen to one push in the outbox. Each event applies to some statuses only and leads
/// to one; `DeliveryStatus.after(_:)` is the whole lifecycle:
///
///     queued ──claim──▶ sending ──sent──▶ sent
///       ▲ │ ▲             │ │ ├──fail──▶ failed
///       │ │ └──claim──────┘ │ └──withdraw──▶ skipped
///       │ │ (again, once    │
///       │ │  its lease ran out)
///       └─┼───retry, release┘
///         ├──supersede──▶ superseded
///         └──skip───────▶ skipped
///
/// A push in flight is never superseded or skipped: its answer must still be recorded. An answer
/// to a push no longer claimed (its lease ran out, or a restart released it) changes nothing.
/// Only its claimer withdraws a push, before sending it.
package enum DeliveryEvent: String, Sendable, Hashable, CaseIterable {
    /// A dispatcher takes it to send, leased until a time: when it is queued and due, or again when
    /// an earlier claim's lease ran out without an answer (its dispatcher died).
    case claim
    /// APNs accepted it.
    case sent
    /// No answer came, or APNs advised trying again: due again later.
    case retry
    /// Failed for good: a dead letter.
    case fail
    /// Due again at once: after a restart no dispatcher holds a claim.
    case release
    /// A newer change to its activity or channel makes it pointless.
    case supersede
    /// Pointless for another reason: its token died, its activity ended on the device or expired,
    /// or its start already arrived.
    case skip
    /// Not sent after all by the one that just claimed it: a start taken again after its lease ran
    /// out, whose device has since reported the activity (it arrived; its answer was lost).
    case withdraw

    /// The statuses the event moves a delivery from, in declaration order: what a store's
    /// statement requires of the rows it changes.
    package var sources: [DeliveryStatus] { DeliveryStatus.allCases.filter { $0.after(self) != nil } }

    /// The status the event moves a delivery to.
    package var destination: DeliveryStatus {
        // Every event has a source and one destination (DeliveryLifecycleTests).
        sources.first!.after(self)!
    }
}

extension DeliveryStatus {
    /// The status `event` moves a delivery in this status to, or nil when the event does not apply.
    package func after(_ event: DeliveryEvent) -> DeliveryStatus? {
        switch (self, event) {
        case (.queued, .claim), (.sending, .claim): .sending
        case (.sending, .sent): .sent
        case (.sending, .retry), (.sending, .release): .queued
        case (.sending, .fail): .failed
        case (.queued, .supersede): .superseded
        case (.queued, .skip), (.sending, .withdraw): .skipped
        default: nil
        }
    }

    /// Nothing happens to it any more.
    package var isFinal: Bool { DeliveryEvent.allCases.allSatisfy { after($0) == nil } }

    /// It was sent, or may still be: it counts against its key's priority-10 budget, which
    /// counts what reaches devices (APNs throttles what it delivers, not what it refuses).
    package var countsTowardBudget: Bool { self == .sent || !isFinal }
}

extension DeliveryOutcome {
    /// The event that records this outcome.
    package var event: DeliveryEvent {
        switch self {
        case .sent: .sent
        case .retry: .retry
        case .failed: .fail
        }
    }
}

/// A delivery's target kind, as stored.
package enum DeliveryTargetKind: String, Sendable, Hashable, CaseIterable {
    case pushToStart = "push-to-start"
    case activity
    case channel
    /// An app's widget token, or a control's (iOS 26, iOS 18).
    case widgets, controls
}

/// What a push does: an activity's start, update or end (`aps.event`), or a reload of an app's
/// widgets or a control.
package enum DeliveryAction: String, Sendable, Hashable, CaseIterable, Codable {
    case start, update, end, reload

    package init(_ event: LiveActivityPayload.Event) {
        switch event {
        case .start: self = .start
        case .update: self = .update
        case .end: self = .end
        }
    }
}

extension DeliveryTarget {
    package var kind: DeliveryTargetKind {
        switch self {
        case .pushToStartToken: .pushToStart
        case .activityToken: .activity
        case .channel: .channel
        case .surface(.widgets, _, _): .widgets
        case .surface(.controls, _, _): .controls
        }
    }

    /// The channel's id; nil for a token.
    package var channelID: String? {
        if case .channel(let id) = self { id } else { nil }
    }

    /// The device a token belongs to; nil for a channel.
    package var deviceID: String? {
        switch self {
        case .pushToStartToken(let deviceID, _), .activityToken(let deviceID, _), .surface(_, let deviceID, _): deviceID
        case .channel: nil
        }
    }
}
