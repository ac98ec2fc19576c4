import Foundation

/// Hands an app's tokens and activities to a LiveRelay server: adapters give it what ActivityKit
/// did (`observe`), it decides what to report (`ReportPlanner`), keeps the reports in order in
/// its storage until the server acknowledges them, and sends them (`run`), retrying while the
/// server cannot be reached, across launches.
@_spi(Adapter) public actor LiveRelayReporter {
    /// Who reports; its device id is filled before the first send when it was not known at launch.
    public private(set) var reporter: Reporter
    private let resolveDeviceID: (@Sendable () -> String?)?
    private let transport: any ReportTransport
    private let storage: any ReportStorage
    private let policy: RetryPolicy
    private let sleep: @Sendable (Duration) async throws -> Void
    private let now: @Sendable () -> Date
    private let log: @Sendable (String) -> Void
    private let delivered: @Sendable (Delivered) -> Void
    private let backgroundTime: BackgroundTime
    private var backlog: ReportBacklog
    private let wake = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    /// The latest outcomes, newest last, for an app's diagnostics (and the emulator's page).
    public private(set) var recent: [Delivered] = []

    /// A report that left the backlog, and how.
    public struct Delivered: Sendable, Hashable {
        public var report: Report
        public var request: ReportRequest
        /// The last attempt's.
        public var outcome: SendOutcome
        public var decision: DeliveryDecision
        public var attempts: Int
    }

    /// `contracts`: what the widget decodes each attributes type from, reported before its first
    /// push-to-start token. `deviceID`: where the device id is read again when `reporter` has none
    /// yet (its file could not be read at launch); nothing is sent until it reads. `sleep` and
    /// `now` are the clock (tests give their own); `log` hears every dropped report and every
    /// storage failure; `delivered`, each report that left the backlog (for an app's diagnostics);
    /// `backgroundTime`, what each send is wrapped in so that a suspended app finishes it.
    public init(
        reporter: Reporter, contracts: [ActivityContractShape] = [], transport: any ReportTransport, storage: any ReportStorage,
        deviceID resolveDeviceID: (@Sendable () -> String?)? = nil, policy: RetryPolicy = RetryPolicy(),
        backgroundTime: BackgroundTime = .none,
        sleep: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) },
        now: @escaping @Sendable () -> Date = { Date() }, log: @escaping @Sendable (String) -> Void = LiveRelayKitLog.standard,
        delivered: @escaping @Sendable (Delivered) -> Void = { _ in }
    ) {
        self.delivered = delivered
        self.backgroundTime = backgroundTime
        self.reporter = reporter
        self.resolveDeviceID = resolveDeviceID
        self.transport = transport
        self.storage = storage
        self.policy = policy
        self.sleep = sleep
        self.now = now
        self.log = log
        self.contracts = contracts
        let loaded = Self.loadBacklog(
            storage: storage, contracts: contracts, appVersion: reporter.appVersion, observed: [], quietly: false, log: log)
        (backlog, backlogUnread) = (loaded.backlog, loaded.unread)
    }

    /// This launch's contracts, given at set-up.
    private let contracts: [ActivityContractShape]
    /// The backlog file exists but could not be read (a locked phone, before its first unlock):
    /// nothing is written over it, and nothing sent, until it reads (`loadBacklog`).
    private var backlogUnread: Bool

    /// Reads the backlog kept by earlier launches, and adds what this launch changes: its types
    /// (one changed since is reported) and, under another app version, everything again, then
    /// what this launch `observed` before the file could be read. A file that cannot be read now
    /// is read again later, never replaced; one that reads but is not a backlog (damaged, or too
    /// large to be ours) is begun anew.
    private static func loadBacklog(
        storage: any ReportStorage, contracts: [ActivityContractShape], appVersion: String?, observed: [Report], quietly: Bool,
        log: @Sendable (String) -> Void
    ) -> (backlog: ReportBacklog, unread: Bool) {
        var backlog = ReportBacklog(planner: ReportPlanner(contracts: contracts))
        let data: Data?
        do {
            data = try storage.load()
        } catch let error as BacklogTooLarge {
            log(error.description)
            data = nil
        } catch {
            if !quietly { log("LiveRelayKit: the backlog cannot be read now; it is read again before anything is sent: \(error)") }
            backlog.append(observed)
            return (backlog, true)
        }
        if let data {
            do {
                backlog = try JSONDecoder().decode(ReportBacklog.self, from: data)
                backlog.append(backlog.planner.include(contracts))
            } catch {
                log("LiveRelayKit: the backlog is damaged, a new one is begun: \(error)")
            }
        }
        if let appVersion, backlog.appVersion != appVersion {
            // Updated: the server hears it all again under the new version. A backlog that never
            // said its version needs nothing again: the next report with one gives the device's
            // tokens that version on the server.
            if backlog.appVersion != nil { backlog.append(backlog.planner.appVersionChanged()) }
            backlog.appVersion = appVersion
        }
        backlog.append(observed)
        return (backlog, false)
    }

    /// Reads the backlog again, after it could not be read: what this launch observed meanwhile
    /// joins it (the planner's memory of those observations is the file's then, which decides
    /// again when ActivityKit repeats them).
    private func readBacklogAgain() {
        let observed = backlog.pending.map(\.report)
        let loaded = Self.loadBacklog(
            storage: storage, contracts: contracts, appVersion: reporter.appVersion, observed: observed, quietly: true, log: log)
        guard !loaded.unread else { return }
        (backlog, backlogUnread) = (loaded.backlog, false)
        save()
    }

    /// Cut short by `retryNow()`, or by a new report: a back-off after the server could not be
    /// reached (a new report means the app is running, and perhaps the network came back).
    private var backingOffUnreachable = false
    private var nudged = false
    private var cutShort: CheckedContinuation<Void, Never>?

    /// Tries again at once what waits after the server could not be reached: the app came to the
    /// foreground, the network came back (`LiveRelayClient` calls it on both, on iOS). A pause the
    /// server asked for (`Retry-After`, a refused key) is not cut short.
    public func retryNow() {
        guard backingOffUnreachable else { return }
        nudged = true
        stopWaitingForANudge()
    }

    private func stopWaitingForANudge() {
        cutShort?.resume()
        cutShort = nil
    }

    private func waitForANudge() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                if nudged || Task.isCancelled { continuation.resume() } else { cutShort = continuation }
            }
        } onCancel: {
            Task { await self.stopWaitingForANudge() }
        }
    }

    /// Waits `pause` after the server could not be reached, or less when `retryNow()` or a new
    /// report comes; false when the sender is cancelled.
    private func backOff(_ pause: Duration) async -> Bool {
        (backingOffUnreachable, nudged) = (true, false)
        defer { (backingOffUnreachable, nudged) = (false, false) }
        let sleep = self.sleep
        let waited = await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                do {
                    try await sleep(pause)
                    return true
                } catch { return false }
            }
            group.addTask {
                await self.waitForANudge()
                return true
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
        return waited && !Task.isCancelled
    }

    /// What it is doing now; `statusUpdates()` hears each change.
    public private(set) var status: ReportingStatus = .upToDate {
        didSet {
            guard status != oldValue else { return }
            for watcher in watchers.values { watcher.yield(status) }
        }
    }
    private var watchers: [Int: AsyncStream<ReportingStatus>.Continuation] = [:]
    private var nextWatcher = 0

    /// The status now, then each change, until the caller stops reading.
    public func statusUpdates() -> AsyncStream<ReportingStatus> {
        let (stream, continuation) = AsyncStream.makeStream(of: ReportingStatus.self, bufferingPolicy: .bufferingNewest(8))
        let id = nextWatcher
        nextWatcher += 1
        watchers[id] = continuation
        continuation.yield(status)
        continuation.onTermination = { [weak self] _ in Task { await self?.stopWatching(id) } }
        return stream
    }

    private func stopWatching(_ id: Int) { watchers[id] = nil }

    /// After a report left the backlog or waits: what is pending now, and why not sent if not.
    private func noteProgress(failure: String? = nil) {
        status = backlog.pending.isEmpty ? .upToDate : .sending(pending: backlog.pending.count, lastFailure: failure)
    }

    /// Reports not acknowledged yet, oldest first.
    public var pending: [Report] { backlog.pending.map(\.report) }

    /// The backend's grants, by what they name: each goes with the reports it covers.
    private var grants: [Report.GrantScope: String] = [:]

    /// Keeps the backend's grant for `key` (`POST /v1/grants`), sent with the reports made under
    /// it: an activity the app requests itself is taken with it where reports need one.
    public func grant(_ grant: String, forKey key: String) {
        grants[.key(key)] = grant
        release(.key(key))
    }

    /// The person signed in as `id` (nil: signed out), with the backend's grant for that user:
    /// the push-to-start tokens are reported again with the user, or without.
    public func setUser(_ id: String?, grant: String?) {
        if let id, let grant {
            grants[.user(id)] = grant
            release(.user(id))
        }
        observe(.user(id))
    }

    /// Reports the server refused for want of a grant, waiting for one (`grant(_:forKey:)`).
    public var awaitingGrant: [Report] { (backlog.awaitingGrant ?? []).map(\.report) }

    /// Sends again, first, the reports that waited for a grant for `scope`.
    private func release(_ scope: Report.GrantScope) {
        let waiting = backlog.awaitingGrant ?? []
        let released = waiting.filter { $0.report.grantScope == scope }
        if !released.isEmpty {
            backlog.awaitingGrant = waiting.filter { $0.report.grantScope != scope }
            // Behind the first, which may be on its way now (the sender removes it when answered).
            let fresh = released.map { waiting in
                var again = waiting
                again.attempts = 0
                return again
            }
            backlog.pending.insert(contentsOf: fresh, at: backlog.pending.isEmpty ? 0 : 1)
            save()
        }
        wake.continuation.yield()
    }

    /// Adds or replaces what the widget decodes attributes types from: each is reported before its
    /// type's push-to-start token, or at once if the server has that token already and not this
    /// contract (`ReportPlanner.include`).
    public func include(_ contracts: [ActivityContractShape]) {
        let before = backlog
        add(backlog.planner.include(contracts), changedSince: before)
    }

    public func include(_ contract: ActivityContractShape) {
        include([contract])
    }

    /// What ActivityKit did: the reports it calls for join the backlog (saved before this returns).
    public func observe(_ observation: ActivityObservation) {
        let before = backlog
        add(backlog.planner.plan(observation, at: now()), changedSince: before)
    }

    /// Puts `reports` in the backlog and wakes the sender; writes the file if anything changed.
    private func add(_ reports: [Report], changedSince before: ReportBacklog) {
        backlog.append(reports)
        // What ActivityKit repeats at each launch changes nothing: nothing to write.
        if backlog != before { save() }
        if !reports.isEmpty {
            if case .refused = status {} else { noteProgress() }
            wake.continuation.yield()
            retryNow()
        }
    }

    /// Whether `run` is sending: one sender at a time keeps the order.
    private var sending = false

    /// Sends the backlog, oldest first, until the task is cancelled. A second call while one
    /// sends returns at once.
    public func run() async {
        guard !sending else {
            log("LiveRelayKit: run() called while already sending; ignored")
            return
        }
        sending = true
        defer { sending = false }
        var signals = wake.stream.makeAsyncIterator()
        var unreadAttempts = 0
        while !Task.isCancelled {
            if reporter.deviceID.isEmpty, let id = resolveDeviceID?() { reporter.deviceID = id }
            if backlogUnread { readBacklogAgain() }
            // Nothing is sent before what earlier launches kept is read, and whose it is.
            if backlogUnread || (reporter.deviceID.isEmpty && resolveDeviceID != nil) {
                unreadAttempts += 1
                do { try await sleep(policy.backOff(attempt: unreadAttempts)) } catch { return }
                continue
            }
            guard let next = backlog.pending.first else {
                guard await signals.next() != nil else { return }
                continue
            }
            let request: ReportRequest
            let outcome: SendOutcome
            do {
                request = try next.report.request(from: reporter, grant: next.report.grantScope.flatMap { grants[$0] })
                let timeOver = backgroundTime.begin("LiveRelayKit sends a report")
                outcome = await transport.send(request)
                timeOver()
            } catch {
                request = ReportRequest(method: "", path: "", body: Data())
                outcome = .answered(status: 400, retryAfter: nil, message: "could not be encoded: \(error)")
            }
            if Task.isCancelled { return }
            let attempt = next.attempts + 1
            let decision = policy.decide(outcome, attempt: attempt)
            switch decision {
            case .acknowledged, .drop:
                if case .drop(let reason) = decision {
                    log("LiveRelayKit: dropped \(next.report): \(reason)")
                    // Not held by the server: sent again when ActivityKit hands it over again.
                    backlog.planner.forget(next.report)
                }
                backlog.pending.removeFirst()
                save()
                remember(Delivered(report: next.report, request: request, outcome: outcome, decision: decision, attempts: attempt))
                noteProgress()
            case .retry(let pause):
                backlog.pending[0].attempts = attempt
                save()
                noteProgress(failure: Self.failure(outcome))
                if case .unreachable = outcome {
                    guard await backOff(pause) else { return }
                } else {
                    do { try await sleep(pause) } catch { return }
                }
            case .pause(let pause, let reason):
                // The server refuses this app's key: nothing is dropped, the app is told, and the
                // reports wait (the operator may put the key right, or a new build ship one).
                if status != .refused(reason) { log("LiveRelayKit: the server refuses this app's reports, they wait: \(reason)") }
                status = .refused(reason)
                backlog.pending[0].attempts = attempt
                save()
                do { try await sleep(pause) } catch { return }
            case .awaitGrant(let reason):
                log("LiveRelayKit: \(next.report) waits for the backend's grant: \(reason)")
                let waiting = backlog.pending.removeFirst()
                backlog.awaitingGrant = ((backlog.awaitingGrant ?? []) + [waiting]).suffix(ReportBacklog.mostAwaitingGrant)
                save()
                remember(Delivered(report: next.report, request: request, outcome: outcome, decision: decision, attempts: attempt))
                noteProgress()
            }
        }
    }

    private static func failure(_ outcome: SendOutcome) -> String {
        switch outcome {
        case .answered(let status, _, let message): "\(status): \(message.prefix(200))"
        case .unreachable(let why): "unreachable: \(why)"
        }
    }

    private func remember(_ delivered: Delivered) {
        self.delivered(delivered)
        recent.append(delivered)
        if recent.count > 50 { recent.removeFirst(recent.count - 50) }
    }

    private func save() {
        // Written over, a file that could not be read would lose what it holds.
        guard !backlogUnread else { return }
        do {
            try storage.save(try JSONEncoder().encode(backlog))
        } catch {
            log("LiveRelayKit: the backlog could not be saved: \(error)")
        }
    }
}
