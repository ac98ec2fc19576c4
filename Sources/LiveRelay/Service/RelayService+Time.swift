import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// What time does on its own.
extension RelayService {
    /// What time does on its own: schedules run, activities past their lifetime end, channels of
    /// ended keys are deleted once their storage window has passed, and what is past its
    /// retention is deleted (`prune`).
    /// One instance at a time does it: the one holding the `ticker` lease, which it renews on every
    /// tick; when it dies, another takes the lease once it runs out (`tickerLease`). Returns
    /// whether this instance did the work.
    @discardableResult
    package func tick() async throws -> Bool {
        let start = now()
        guard try await store.takeLease("ticker", holder: instanceID, until: start + configuration.tickerLease, at: start) else { return false }
        try await runDueSchedules()
        let date = now()
        let expired = try await store.expireActivities(
            startedBefore: date - configuration.activityLifetime, at: date, channelDeleteAfter: date + configuration.channelStorageWindow)
        if !expired.isEmpty {
            noteChange()
            metrics.count(Metric.activitiesExpiredTotal, [:], by: expired.count)
            logger.info("activities expired", metadata: ["count": "\(expired.count)"])
        }
        try await recordUnconfirmedStarts(at: date)
        for channel in try await store.channelsToDelete(at: date) where apns != nil {
            // A channel kept from before apps, for an app not named yet, waits for it.
            guard try await appBook.value(from: store)[channel.bundleID] != nil else { continue }
            do {
                try await deleteChannel(channel.channelID)
            } catch {
                logger.warning("channel deletion failed", metadata: ["channel": "\(channel.channelID)", "error": "\(error)"])
            }
        }
        try await pruneWhenDue(at: date)
        return true
    }

    /// Push-to-starts APNs accepted that no device confirmed within the window: each an
    /// `activity.start_unconfirmed`, looked for once per span of time. After a restart (or when
    /// this instance takes the ticker over) it looks back over the window again, and the store
    /// writes each key and device's event once.
    func recordUnconfirmedStarts(at date: Date) async throws {
        let window = configuration.startConfirmationWindow
        let until = date - window
        let from = startsCheckedUntil.withLock { $0 } ?? until - max(window, 600)
        guard until > from else { return }
        let recorded = try await store.recordUnconfirmedStarts(sentAfter: from, sentBefore: until, at: date)
        startsCheckedUntil.withLock { $0 = until }
        guard recorded > 0 else { return }
        noteChange()
        metrics.count(Metric.unconfirmedStartsTotal, [:], by: recorded)
        logger.warning("push-to-starts no device confirmed", metadata: ["count": "\(recorded)", "window": "\(Int(window)) s"])
    }
}
