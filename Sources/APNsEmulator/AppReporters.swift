import Foundation
import LiveActivityKit
@_spi(Adapter) import LiveRelayKit
import Logging
import SimulatedDevices
import Synchronization

/// Where a simulated app reports what ActivityKit does: the LiveRelay server it belongs to, as
/// a real app is set up with LiveRelayKit.
public struct AppReporting: Sendable, Hashable {
    /// The server's base URL, such as `http://127.0.0.1:8080`.
    public var url: String
    /// The app's LiveRelay client key.
    public var clientKey: String?
    /// The attributes field holding the key the backend chose for the activity (`order-42`);
    /// without it, the activity id stands in.
    public var activityKeyAttribute: String

    public init(url: String, clientKey: String? = nil, activityKeyAttribute: String = "activityKey") {
        self.url = url.hasSuffix("/") ? String(url.dropLast()) : url
        self.clientKey = clientKey
        self.activityKeyAttribute = activityKeyAttribute
    }
}

/// Every simulated app that reports runs LiveRelayKit, the package a real app adds: this is its
/// adapter over the simulated devices, which turns what ActivityKit does on a device (the
/// fleet's events) into LiveRelayKit's observations, exactly as the adapter over ActivityKit
/// does on an iPhone. Each app's backlog is kept beside the emulator's state file (in memory
/// without one), so a relaunched app finds what it had not sent.
public final class AppReporters: Sendable {
    /// One delivered report, for the control API and the devices page.
    public struct Report: Sendable, Hashable {
        public var deviceID: String
        public var bundleID: String
        public var path: String
        /// The HTTP status, or `nil` when the server could not be reached.
        public var status: Int?
        public var error: String?
    }

    private struct AppKey: Hashable {
        var deviceID: String
        var bundleID: String
    }

    /// An app's running LiveRelayKit: its reporter, the task sending its backlog, its settings.
    private struct Running {
        var target: AppReporting
        var reporter: LiveRelayReporter
        /// The device's iOS when the app launched.
        var systemVersion: String?
        /// The app's environment when it launched (a launch before the install takes sandbox's).
        var environment: LiveRelayKit.PushEnvironment
        /// The app's version when it launched.
        var appVersion: String?
        var sending: Task<Void, Never>
    }

    private enum Work {
        case event(FleetEvent)
        /// The app launched with LiveRelayKit set up for `target` (or stopped reporting, `nil`).
        case launch(AppKey, AppReporting?)
    }

    private let fleet: DeviceFleet
    private let folder: URL?
    private let logger: Logger
    private let state = Mutex((targets: [AppKey: AppReporting](), reports: [Report](), memory: [String: MemoryReportStorage]()))
    /// Touched only by `run`'s loop, in order.
    private let running = Mutex([AppKey: Running]())
    private let work = AsyncStream.makeStream(of: Work.self)
    /// Events after this one are reported, even those that happen before `run()` starts.
    private let startSequence: Int
    static let reportsKept = 200

    /// `folder`: where each app keeps its backlog; `nil` keeps it in memory.
    init(fleet: DeviceFleet, folder: URL?, logger: Logger = Logger(label: "liverelay.emulator.liverelaykit")) {
        self.fleet = fleet
        self.folder = folder
        self.logger = logger
        startSequence = fleet.events.lastSequence
    }

    /// Launches the app on the device with LiveRelayKit reporting to `target` (`nil` stops it):
    /// ActivityKit hands it what it holds now (its push-to-start tokens, its activities and their
    /// tokens), as at any launch, and LiveRelayKit reports what the server has not heard yet.
    public func setTarget(_ target: AppReporting?, deviceID: String, bundleID: String) throws {
        _ = try fleet.device(deviceID)
        let key = AppKey(deviceID: deviceID, bundleID: bundleID)
        state.withLock { $0.targets[key] = target }
        work.continuation.yield(.launch(key, target))
    }

    public func target(deviceID: String, bundleID: String) -> AppReporting? {
        state.withLock { $0.targets[AppKey(deviceID: deviceID, bundleID: bundleID)] }
    }

    public var reports: [Report] { state.withLock { $0.reports } }

    /// Feeds the apps' LiveRelayKit until cancelled; their senders stop with it.
    package func run() async {
        let events = fleet.events.subscribe(after: startSequence)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [work] in
                for await event in events { work.continuation.yield(.event(event)) }
            }
            group.addTask { [work] in
                for await item in work.stream { await self.handle(item) }
            }
            await group.next()
            group.cancelAll()
        }
        // No request is left in flight when the emulator stops.
        for app in running.withLock({ $0.values }) {
            app.sending.cancel()
            await app.sending.value
        }
    }

    private func handle(_ work: Work) async {
        switch work {
        case .launch(let key, let target):
            // The app quits before it launches again: its old sender stops before the new one reads the backlog.
            if let old = running.withLock({ $0.removeValue(forKey: key) }) {
                old.sending.cancel()
                await old.sending.value
            }
            guard let target else { return }
            let (version, environment, appVersion) = (systemVersion(key), environment(key), appVersion(key))
            let reporter = makeReporter(
                key, target,
                Reporter(
                    deviceID: key.deviceID, bundleID: key.bundleID, environment: environment, systemVersion: version, appVersion: appVersion))
            running.withLock {
                $0[key] = Running(
                    target: target, reporter: reporter, systemVersion: version, environment: environment, appVersion: appVersion,
                    sending: Task { await reporter.run() })
            }
            for observation in launchObservations(key, target) { await reporter.observe(observation) }
        case .event(let event):
            let key = AppKey(deviceID: event.deviceID, bundleID: event.bundleID)
            guard let app = running.withLock({ $0[key] }) else { return }
            if case .tokenIssued(_, _, .pushToStart, _) = event.event {
                // Updating iOS restarts the device, and the app with it, on its new version; so does
                // updating the app; an app launched (reporting set up) before it was installed starts
                // again as installed.
                if app.systemVersion != systemVersion(key) || app.environment != environment(key) || app.appVersion != appVersion(key) {
                    await handle(.launch(key, app.target))
                    return
                }
                // The app's types as installed (reporting may be set up before the install).
                await app.reporter.include(contracts(key))
            }
            for observation in observations(event, app.target) { await app.reporter.observe(observation) }
        }
    }

    private func systemVersion(_ key: AppKey) -> String? { (try? fleet.device(key.deviceID).systemVersion)?.description }

    /// The installed app's version and build, as LiveRelayKit reads them from its bundle.
    private func appVersion(_ key: AppKey) -> String? { (try? fleet.device(key.deviceID).apps[key.bundleID])??.version }

    /// The installed app's environment (sandbox's while it is not installed).
    private func environment(_ key: AppKey) -> LiveRelayKit.PushEnvironment {
        (try? fleet.device(key.deviceID).apps[key.bundleID])??.environment == .production ? .production : .sandbox
    }

    private func makeReporter(_ key: AppKey, _ target: AppReporting, _ reporter: Reporter) -> LiveRelayReporter {
        let server = URL(string: target.url) ?? URL(fileURLWithPath: "/")
        let storage: any ReportStorage
        // A backlog per server: what one server heard says nothing of another.
        let name = (target.url.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "server") + ".json"
        if let folder {
            storage = FileReportStorage(
                url: folder.appendingPathComponent(key.deviceID).appendingPathComponent(key.bundleID).appendingPathComponent(name))
        } else {
            storage = state.withLock { state in
                let memory = state.memory["\(key.deviceID)/\(key.bundleID)/\(name)", default: MemoryReportStorage()]
                state.memory["\(key.deviceID)/\(key.bundleID)/\(name)"] = memory
                return memory
            }
        }
        let logger = logger
        return LiveRelayReporter(
            reporter: reporter,
            contracts: contracts(key),
            transport: URLSessionTransport(server: server, clientKey: target.clientKey ?? ""), storage: storage,
            // The device's time: a test moves it, and a back-off with it.
            sleep: { [fleet] in try await fleet.clock.sleep(for: $0) }, now: { [fleet] in fleet.clock.now },
            log: { line in logger.warning("\(line)", metadata: ["device": "\(key.deviceID)", "app": "\(key.bundleID)"]) },
            delivered: { [weak self] delivered in self?.keep(delivered, key) })
    }

    /// What the app's widget decodes its types from.
    private func contracts(_ key: AppKey) -> [ActivityContractShape] {
        let app = try? fleet.device(key.deviceID).apps[key.bundleID]
        return (app?.attributeTypes.values.compactMap(\.contract) ?? []).compactMap(Self.shape)
    }

    private func keep(_ delivered: LiveRelayReporter.Delivered, _ key: AppKey) {
        let (status, error): (Int?, String?) =
            switch delivered.outcome {
            case .answered(let status, _, let message): (status, (200..<300).contains(status) ? nil : message)
            case .unreachable(let reason): (nil, reason)
            }
        let report = Report(deviceID: key.deviceID, bundleID: key.bundleID, path: delivered.request.path, status: status, error: error)
        state.withLock { state in
            state.reports.append(report)
            if state.reports.count > Self.reportsKept { state.reports.removeFirst(state.reports.count - Self.reportsKept) }
        }
    }

    // MARK: ActivityKit on a simulated device, as LiveRelayKit's observations

    /// What ActivityKit hands an app at launch: `ActivityAuthorizationInfo`, each type's
    /// `pushToStartTokenUpdates`, `Activity.activities` with their tokens and states.
    private func launchObservations(_ key: AppKey, _ target: AppReporting) -> [ActivityObservation] {
        guard let device = try? fleet.device(key.deviceID), let app = device.apps[key.bundleID] else { return [] }
        var observations: [ActivityObservation] = [
            .authorization(activitiesEnabled: app.areActivitiesEnabled, frequentPushesEnabled: app.frequentPushesEnabled)
        ]
        for (type, token) in app.pushToStartTokens.sorted(by: { $0.key < $1.key }) {
            observations.append(.pushToStartToken(attributesType: type, token: Self.data(token)))
        }
        for activity in device.activities where activity.bundleID == key.bundleID {
            observations.append(
                Self.appeared(activity.id, activity.attributesType, activity.attributes, activity.pushType, activity.state, target))
            if activity.lifecycle.isOngoing, let token = activity.pushToken {
                observations.append(.activityToken(activityID: activity.id, token: Self.data(token)))
            }
            if !activity.lifecycle.isOngoing, let state = ObservedState(rawValue: activity.state.rawValue) {
                if activity.endCause == .endedByApp { observations.append(.endedByApp(activityID: activity.id)) }
                observations.append(.activityState(activityID: activity.id, state: state))
            }
        }
        // WidgetKit calls the handlers of an extension it launches with what it holds.
        if let surfaces = device.surfaces[key.bundleID] {
            if !surfaces.widgets.isEmpty { observations.append(Self.widgetPushInfo(surfaces)) }
            if !surfaces.controls.isEmpty { observations.append(Self.controlPushInfo(surfaces)) }
        }
        return observations
    }

    /// One of the fleet's events, as the app's ActivityKit sequences give it.
    private func observations(_ event: FleetEvent, _ target: AppReporting) -> [ActivityObservation] {
        switch event.event {
        case .authorizationChanged(_, let enabled, let frequent):
            return [.authorization(activitiesEnabled: enabled, frequentPushesEnabled: frequent)]
        case .tokenIssued(let token, _, .pushToStart(let type), _):
            return [.pushToStartToken(attributesType: type, token: Self.data(token))]
        case .activityStarted(let id, _, let type, let attributes):
            let activity = try? fleet.device(event.deviceID).activity(id)
            return [Self.appeared(id, type, attributes, activity?.pushType ?? .token, activity?.state ?? .active, target)]
        case .tokenIssued(let token, _, .update(let id), _):
            return [.activityToken(activityID: id, token: Self.data(token))]
        case .stateChanged(let id, _, let state, let cause):
            guard let state = ObservedState(rawValue: state.rawValue) else { return [] }
            // The app's own `end`, which an app tells LiveRelayKit of; ActivityKit says only `.ended`.
            return (cause == .endedByApp ? [.endedByApp(activityID: id)] : []) + [.activityState(activityID: id, state: state)]
        case .widgetPushInfoChanged(let bundleID):
            return [Self.widgetPushInfo(try? fleet.device(event.deviceID).surfaces[bundleID])]
        case .controlPushInfoChanged(let bundleID):
            return [Self.controlPushInfo(try? fleet.device(event.deviceID).surfaces[bundleID])]
        case .tokenRetired, .contentUpdated, .tokenIssued(_, _, .widgets, _), .tokenIssued(_, _, .control, _), .surfacesReloaded:
            return []
        }
    }

    /// What WidgetKit's handlers are given: the widget token and the widgets, every control's token.
    private static func widgetPushInfo(_ surfaces: AppSurfaces?) -> ActivityObservation {
        .widgetPushInfo(
            token: surfaces?.widgetToken.map(data),
            widgets: surfaces?.widgets.map { LiveRelayKit.Report.Widget(kind: $0.kind, family: $0.family) } ?? [])
    }

    private static func controlPushInfo(_ surfaces: AppSurfaces?) -> ActivityObservation {
        .controlPushInfo(surfaces?.controls.map { ObservedControl(kind: $0.kind, token: data($0.token)) } ?? [])
    }

    /// A token the device issued: lowercase hex.
    private static func data(_ hex: String) -> Data { (try? DeviceToken(hex))?.data ?? Data() }

    private static func appeared(
        _ id: String, _ type: String, _ attributes: JSONValue, _ pushType: ActivityPushType, _ state: ActivityState, _ target: AppReporting
    ) -> ActivityObservation {
        let value = attributes[target.activityKeyAttribute]
        let key = value?.stringValue ?? (value.flatMap { if case .number(let literal) = $0 { literal } else { nil } }) ?? id
        let target: PushTarget =
            switch pushType {
            case .none: .none
            case .token: .token
            case .channel(let channelID): .channel(channelID)
            }
        return .activity(id: id, attributesType: type, key: key, pushType: target, scheduled: state == .pending)
    }

    /// A simulated app's contract in LiveRelayKit's terms: the same schema language.
    static func shape(_ contract: ActivityContract) -> ActivityContractShape? {
        guard let members = contract.json.objectMembers else { return nil }
        func fields(_ name: String) -> [String: ContractType]? {
            guard let value = members.first(where: { $0.key == name })?.value else { return [:] }
            return try? JSONDecoder().decode([String: ContractType].self, from: Data(value.serialized))
        }
        guard let attributes = fields("attributes"), let contentState = fields("contentState") else { return nil }
        return ActivityContractShape(attributesType: contract.attributesType, attributes: attributes, contentState: contentState)
    }
}
