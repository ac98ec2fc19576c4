import Foundation
import LiveActivityKit

/// How the service behaves; every default is what `liverelay serve` runs with.
package struct RelayConfiguration: Sendable {
    package var budget: BudgetPolicy
    /// How long an activity may run before the system ends it (Apple: 8 hours).
    package var activityLifetime: TimeInterval
    /// How long APNs may still deliver a Most-Recent-Message-Stored channel's message, so how
    /// long a channel outlives its ended key before LiveRelay deletes it (Apple: 8 hours).
    package var channelStorageWindow: TimeInterval
    package var dispatch: DispatchPolicy
    /// How long the instance that runs what time does (schedules, expiry, channel clean-up) holds
    /// that work between two ticks: when it dies, another instance takes over within this long.
    package var tickerLease: TimeInterval
    /// How long after APNs accepted a push-to-start a device must report the activity before the
    /// start is `activity.start_unconfirmed`: the iPhone may have dropped it without a word (§14).
    package var startConfirmationWindow: TimeInterval
    /// How events are posted to webhook endpoints, and to which addresses.
    package var webhooks: WebhookRules
    /// How long what is done is kept.
    package var retention: RetentionPolicy
    /// What one device's app may report (every client key is public).
    package var deviceReports: DeviceReportLimits

    /// What `startConfirmationWindow` may be set to.
    package static let startConfirmationWindows: ClosedRange<TimeInterval> = 10...86_400

    package init(
        budget: BudgetPolicy = .init(), activityLifetime: TimeInterval = 8 * 3600,
        channelStorageWindow: TimeInterval = 8 * 3600, dispatch: DispatchPolicy = .init(), tickerLease: TimeInterval = 10,
        startConfirmationWindow: TimeInterval = 120, webhooks: WebhookRules = .init(), retention: RetentionPolicy = .init(),
        deviceReports: DeviceReportLimits = .init()
    ) {
        self.deviceReports = deviceReports
        self.webhooks = webhooks
        self.retention = retention
        self.tickerLease = tickerLease
        self.startConfirmationWindow = startConfirmationWindow
        self.budget = budget
        self.activityLifetime = activityLifetime
        self.channelStorageWindow = channelStorageWindow
        self.dispatch = dispatch
    }
}

/// What one device's app may report, and what an app may keep, through its client key: every app
/// ships its client key, so a broken or hostile install must not flood the registry. The key's own
/// request rate bounds all of its installs together (`RelayAPIConfiguration.requestsPerSecond`).
package struct DeviceReportLimits: Sendable, Hashable {
    /// Reports (tokens, listeners, ends, withdrawals) a device may make at once, then `perSecond`:
    /// an app reports a handful at launch and one per activity and rotation after.
    package var burst: Double
    package var perSecond: Double
    /// Attributes types an app may keep a contract of: a client key adds one per type it names.
    package var contractsPerApp: Int

    package init(burst: Double = 30, perSecond: Double = 1, contractsPerApp: Int = 100) {
        self.burst = burst
        self.perSecond = perSecond
        self.contractsPerApp = contractsPerApp
    }
}

/// Priority-10 pushes each activity may get per hour with `priority: "auto"`. Apple publishes no
/// figure; community reports suggest about 15 an hour, far more with frequent updates enabled.
package struct BudgetPolicy: Sendable, Hashable {
    package var priority10PerHour: Int
    /// When the device reported `frequentPushesEnabled`.
    package var frequentPriority10PerHour: Int

    /// What either figure may be set to.
    package static let allowed = 0...100_000

    package init(priority10PerHour: Int = 12, frequentPriority10PerHour: Int = 120) {
        self.priority10PerHour = priority10PerHour
        self.frequentPriority10PerHour = frequentPriority10PerHour
    }
}

/// How the dispatcher sends.
package struct DispatchPolicy: Sendable, Hashable {
    /// Pushes in flight at once: at least the lower bound, more as the round trip to APNs needs
    /// (`InFlightSizing`), at most the upper (`serve --max-in-flight`). Many streams let both ends
    /// read and write in large batches: on loopback a fan-out ran at a median 92% of `bench client`
    /// with 800 in flight, 84% with 400. The APNs client opens connections as these need
    /// (`ConnectionPlan`).
    package var inFlight: ClosedRange<Int>
    /// Deliveries claimed per round trip to the store.
    package var batchSize: Int
    /// A request with at most this many pushes claims them itself, in the transaction that
    /// accepts it, while the dispatcher runs with room: they are sent at once, and the dispatcher
    /// saves the transaction that would claim them. Bigger requests are queued.
    package var handOverLimit: Int
    /// How long a claim lasts without an outcome before the push is due again (a crash).
    package var lease: TimeInterval
    /// The first retry waits this long; each next one twice as long, up to `maximumBackoff`.
    package var initialBackoff: TimeInterval
    package var maximumBackoff: TimeInterval
    /// After this many attempts a retryable failure becomes a dead letter.
    package var maximumAttempts: Int
    /// How long one push may take.
    package var requestTimeout: Duration
    /// How long an outcome may wait to be recorded with others (real time): one transaction per
    /// push would cost more than the push when updates come one by one. At 1,000 single-key
    /// updates a second, 50 ms rather than 10 took 28 µs of the server's CPU off each (`bench
    /// server`, four runs of each alternated); a crash sends again what was answered in that time.
    package var recordingDelay: Duration

    package init(
        inFlight: ClosedRange<Int> = 800...10_000, batchSize: Int = 1000, handOverLimit: Int = 100, lease: TimeInterval = 60,
        initialBackoff: TimeInterval = 1,
        maximumBackoff: TimeInterval = 300, maximumAttempts: Int = 8, requestTimeout: Duration = .seconds(10),
        recordingDelay: Duration = .milliseconds(50)
    ) {
        self.inFlight = inFlight
        self.batchSize = batchSize
        self.handOverLimit = handOverLimit
        self.lease = lease
        self.initialBackoff = initialBackoff
        self.maximumBackoff = maximumBackoff
        self.maximumAttempts = maximumAttempts
        self.requestTimeout = requestTimeout
        self.recordingDelay = recordingDelay
    }

    /// Whether a push claimed until `leasedUntil` may still be sent at `now`: only in the first
    /// half of its lease. Its answer (or the request timeout, less than half a lease) then comes
    /// while the claim still stands, with time left to record it; one sent later could be claimed
    /// again by another instance meanwhile, and sent twice. A dispatcher that falls this far
    /// behind gives the push back (`RelayStore.abandonClaims`).
    package func maySend(leasedUntil: Date, at now: Date) -> Bool {
        leasedUntil.timeIntervalSince(now) >= lease / 2
    }

    /// The wait before attempt `attempts + 1`.
    package func backoff(afterAttempts attempts: Int) -> TimeInterval {
        min(maximumBackoff, initialBackoff * pow(2, Double(max(0, attempts - 1))))
    }
}
