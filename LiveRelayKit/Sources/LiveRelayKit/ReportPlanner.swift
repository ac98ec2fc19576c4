import Foundation

/// LiveRelayKit's decisions, as a value: from what ActivityKit did (`ActivityObservation`), what the
/// server is to hear (`Report`), and nothing twice. Kept with the backlog, so that a relaunched
/// app, to which ActivityKit hands its current tokens again, does not report them again.
@_spi(Adapter) public struct ReportPlanner: Sendable, Hashable, Codable {
    /// The contracts of the app's attributes types, by type name: each is reported before the
    /// type's first push-to-start token, and again only when it changes (`include`).
    public private(set) var contracts: [String: ActivityContractShape]
    public private(set) var activitiesEnabled = true
    public private(set) var frequentPushesEnabled = false
    /// The user signed in to the app, reported with each push-to-start token.
    public private(set) var user: String?
    /// The latest push-to-start token per type, reported or not (held while Live Activities are off).
    private var pushToStartTokens: [String: String] = [:]
    /// What the server holds: the push-to-start token per type, the contracts.
    private var reportedPushToStart: [String: String] = [:]
    private var reportedContracts: [String: ActivityContractShape] = [:]
    /// Activities seen and not yet dismissed, by ActivityKit's id.
    private var activities: [String: Tracked] = [:]
    /// What WidgetKit handed over last, and what the server holds of it (optional: a backlog of
    /// LiveRelayKit 0.2 has none).
    private var widgets: Surfaces?

    struct Surfaces: Sendable, Hashable, Codable {
        var widgetToken: String?
        var widgets: [Report.Widget]?
        var controls: [Report.Control]?
        var reportedWidgets: Report?
        var reportedControls: Report?
    }

    struct Tracked: Sendable, Hashable, Codable {
        var key: String
        var attributesType: String
        var pushType: PushTarget
        /// When LiveRelayKit first heard of it.
        var since: Date
        var token: String?
        /// Scheduled and not started yet (`pending`): its token or channel is reported when it
        /// starts, since until then it takes no update. (`nil` in a backlog of LiveRelayKit 0.1.)
        var waitingForStart: Bool?
        var endedByApp = false
        var end: Report.EndCause?
    }

    /// No activity lives longer (8 hours active, 4 more on the Lock Screen), so one first heard
    /// of earlier is forgotten: its dismissal may have happened while the app was not running.
    static let forgottenAfter: TimeInterval = 13 * 3600

    public init(contracts: [ActivityContractShape] = []) {
        self.contracts = Dictionary(contracts.map { ($0.attributesType, $0) }, uniquingKeysWith: { _, last in last })
    }

    /// What to report, in order, now that `observation` happened at `now`.
    public mutating func plan(_ observation: ActivityObservation, at now: Date) -> [Report] {
        activities = activities.filter { $0.value.since > now - Self.forgottenAfter }
        switch observation {
        case .pushToStartToken(let type, let token):
            pushToStartTokens[type] = token.hex
            return pushToStartReports(for: type)

        case .activity(let id, let type, let key, let pushType, let scheduled):
            guard activities[id] == nil else { return [] }
            activities[id] = Tracked(key: key, attributesType: type, pushType: pushType, since: now, waitingForStart: scheduled)
            return scheduled ? [] : arrival(of: id)

        case .activityToken(let id, let token):
            guard var activity = activities[id], activity.end == nil, activity.token != token.hex else { return [] }
            activity.token = token.hex
            activities[id] = activity
            return activity.waitingForStart == true ? [] : arrival(of: id)

        case .endedByApp(let id):
            activities[id]?.endedByApp = true
            return []

        case .activityState(let id, let state):
            guard var activity = activities[id] else { return [] }
            switch state {
            case .pending:
                return []
            case .active, .stale:
                // A scheduled activity started: the server may update it now.
                guard activity.waitingForStart == true, activity.end == nil else { return [] }
                activities[id]?.waitingForStart = false
                return arrival(of: id)
            case .ended:
                guard activity.end == nil else { return [] }
                let cause: Report.EndCause = activity.endedByApp ? .app : .system
                activity.end = cause
                activities[id] = activity
                return [.ended(key: activity.key, activityID: id, state: .ended, cause: cause, at: now)]
            case .dismissed:
                // Gone from the Lock Screen before it ended: the person removed it.
                activities[id] = nil
                return [.ended(key: activity.key, activityID: id, state: .dismissed, cause: activity.end ?? .person, at: now)]
            }

        case .user(let id):
            guard id != user else { return [] }
            // Every push-to-start token again, with the user (or without, signed out): the
            // server's `{"users": [...]}` audiences reach this device only while it is theirs.
            // The widget and control tokens likewise.
            user = id
            reportedPushToStart = [:]
            return pushToStartTokens.keys.sorted().flatMap { pushToStartReports(for: $0) } + surfaceReports()

        case .widgetPushInfo(let token, let placed):
            var surfaces = widgets ?? Surfaces()
            // Without a widget placed a reload reaches nothing: the server forgets the token.
            (surfaces.widgetToken, surfaces.widgets) = (placed.isEmpty ? nil : token?.hex, placed)
            widgets = surfaces
            return surfaceReports()

        case .controlPushInfo(let controls):
            var surfaces = widgets ?? Surfaces()
            surfaces.controls = controls.map { Report.Control(kind: $0.kind, token: $0.token.hex) }
            widgets = surfaces
            return surfaceReports()

        case .authorization(let enabled, let frequent):
            let (wasEnabled, wasFrequent) = (activitiesEnabled, frequentPushesEnabled)
            (activitiesEnabled, frequentPushesEnabled) = (enabled, frequent)
            if !enabled {
                // Switched off: the server's push-to-start tokens no longer start anything. They
                // are reported again once switched on (iOS then issues new ones).
                guard wasEnabled else { return [] }
                let held = !reportedPushToStart.isEmpty
                reportedPushToStart = [:]
                return held ? [.pushToStartWithdrawn] : []
            }
            var reports: [Report] = []
            if !wasEnabled || wasFrequent != frequent {
                if wasFrequent != frequent { reportedPushToStart = [:] }
                for type in pushToStartTokens.keys.sorted() { reports += pushToStartReports(for: type) }
            }
            if wasFrequent != frequent {
                for (id, activity) in activities.sorted(by: { $0.key < $1.key }) where activity.end == nil && activity.waitingForStart != true {
                    guard let token = activity.token else { continue }
                    reports.append(
                        .activityToken(
                            key: activity.key, activityID: id, attributesType: activity.attributesType, token: token,
                            frequentPushesEnabled: frequent))
                }
            }
            return reports
        }
    }

    /// How the server reaches the activity: its update token once it has one, or the channel it
    /// listens to (a channel-bound activity never has a token).
    private func arrival(of id: String) -> [Report] {
        guard let activity = activities[id] else { return [] }
        switch activity.pushType {
        case .none:
            return []
        case .token:
            guard let token = activity.token else { return [] }
            return [
                .activityToken(
                    key: activity.key, activityID: id, attributesType: activity.attributesType, token: token,
                    frequentPushesEnabled: frequentPushesEnabled)
            ]
        case .channel(let channelID):
            return [.listening(key: activity.key, activityID: id, channelID: channelID)]
        }
    }

    /// Adds or replaces contracts. One the server should have now (its type's push-to-start
    /// token is registered) and does not, new or changed, is reported at once: it may come after
    /// the token (an app that learns its types late, a new version of the app).
    public mutating func include(_ added: [ActivityContractShape]) -> [Report] {
        var reports: [Report] = []
        for contract in added {
            let type = contract.attributesType
            contracts[type] = contract
            guard reportedPushToStart[type] != nil, reportedContracts[type] != contract else { continue }
            reportedContracts[type] = contract
            reports.append(.contract(contract))
        }
        return reports
    }

    /// The app runs another version than the one that reported last (an update): the server is
    /// told everything again under it, the contracts first (each version registers its own, and
    /// its devices are checked against it), the push-to-start tokens and the live activities'
    /// tokens.
    public mutating func appVersionChanged() -> [Report] {
        (reportedPushToStart, reportedContracts) = ([:], [:])
        var reports = pushToStartTokens.keys.sorted().flatMap { pushToStartReports(for: $0) }
        for type in contracts.keys.sorted() where reportedContracts[type] == nil && reportedPushToStart[type] == nil {
            // A type without a push-to-start token: its contract still goes, for its activities.
            reportedContracts[type] = contracts[type]
            reports.insert(.contract(contracts[type]!), at: 0)
        }
        for id in activities.keys.sorted() where activities[id]?.end == nil && activities[id]?.waitingForStart != true {
            reports += arrival(of: id)
        }
        widgets?.reportedWidgets = nil
        widgets?.reportedControls = nil
        return reports + surfaceReports()
    }

    /// The widget token and the controls' tokens, each when the server does not hold what
    /// WidgetKit last handed over (with the user signed in now).
    private mutating func surfaceReports() -> [Report] {
        guard var surfaces = widgets else { return [] }
        defer { widgets = surfaces }
        var reports: [Report] = []
        if let placed = surfaces.widgets {
            let report = Report.widgetTokens(token: surfaces.widgetToken, widgets: placed, userID: user)
            if report != surfaces.reportedWidgets { reports.append(report) }
            surfaces.reportedWidgets = report
        }
        if let controls = surfaces.controls {
            let report = Report.controlTokens(controls, userID: user)
            if report != surfaces.reportedControls { reports.append(report) }
            surfaces.reportedControls = report
        }
        return reports
    }

    /// The server never took `report` (it refused it for good): what it reported is no longer
    /// taken as held there, so that the next time ActivityKit hands it over it is sent again.
    public mutating func forget(_ report: Report) {
        switch report {
        case .pushToStartToken(let type, let token, _, _) where reportedPushToStart[type] == token: reportedPushToStart[type] = nil
        case .activityToken(_, let id, _, let token, _) where activities[id]?.token == token: activities[id]?.token = nil
        case .contract(let contract) where reportedContracts[contract.attributesType] == contract: reportedContracts[contract.attributesType] = nil
        case .widgetTokens where widgets?.reportedWidgets == report: widgets?.reportedWidgets = nil
        case .controlTokens where widgets?.reportedControls == report: widgets?.reportedControls = nil
        default: break
        }
    }

    /// The type's push-to-start token if the server does not hold it, its contract first.
    private mutating func pushToStartReports(for type: String) -> [Report] {
        guard activitiesEnabled, let token = pushToStartTokens[type], reportedPushToStart[type] != token else { return [] }
        reportedPushToStart[type] = token
        var reports: [Report] = []
        if let contract = contracts[type], reportedContracts[type] != contract {
            reportedContracts[type] = contract
            reports.append(.contract(contract))
        }
        return reports + [.pushToStartToken(attributesType: type, token: token, frequentPushesEnabled: frequentPushesEnabled, userID: user)]
    }
}
