import Foundation

#if canImport(os)
    import os
#endif
#if canImport(UIKit) && !os(watchOS)
    import UIKit
#endif
#if canImport(Network)
    import Network
#endif

/// An app's link to its LiveRelay server: set up at every launch with the server's address and
/// the app's client key; then `track(_:)` each attributes type (on iOS), and LiveRelayKit reports
/// by itself what ActivityKit does: push-to-start tokens, each activity's update token under its
/// key, ends and who ended them, Live Activities switched off and on.
///
///     let liveRelay = LiveRelayClient.setUp(server: URL(string: "https://relay.example.com")!, clientKey: "lr_client_…")
///     liveRelay.track(DeliveryAttributes.self)
///
/// Everything it sends waits in a small file in the app's storage until the server has it, so
/// nothing is lost to a network outage or to the app being killed.
public final class LiveRelayClient: Sendable {
    /// Who reports: this device and app, and the app's APNs environment.
    @_spi(Adapter) public let reporter: Reporter
    /// The attribute whose value is the backend's key of an activity (`"order-42"`).
    public let activityKeyAttribute: String
    /// For ActivityKit adapters (`@_spi(Adapter)`): the client's reporter.
    @_spi(Adapter) public let relay: LiveRelayReporter
    private let clientKey: String
    /// Where its lines go.
    @_spi(Adapter) public let log: @Sendable (String) -> Void
    private let tasks = Locked<(sending: Task<Void, Never>?, tracking: [Task<Void, Never>], authorization: Bool)>((nil, [], false))

    /// The app's client, made the first time and kept by LiveRelayKit for as long as the app
    /// runs: call it at every launch, background launches too (a push-to-start wakes the app with
    /// no scene), from `application(_:didFinishLaunchingWithOptions:)` or the `App`'s `init`.
    /// Called again with the same server, it returns the same client (a second would send the
    /// same backlog twice); a reference the app drops stops nothing.
    ///
    /// - Parameters:
    ///   - server: the server's base URL.
    ///   - clientKey: the app's client key (`liverelay keys create --scope client --app …`).
    ///   - activityKeyAttribute: the attributes' field holding the backend's key; without it on a
    ///     type, the activity's id stands in.
    ///   - bundleID: the running bundle's unless given (an app extension gives its app's).
    ///   - environment: the app's `aps-environment` unless given (`PushEnvironment.ofThisApp`).
    ///   - folder: where the backlog and the device id are kept: Application
    ///     Support/LiveRelayKit/<server> unless given.
    ///   - log: where its lines go: the unified log on Apple platforms unless given (tokens are
    ///     never written whole).
    public static func setUp(
        server: URL, clientKey: String, activityKeyAttribute: String = "activityKey", bundleID: String? = nil,
        environment: PushEnvironment? = nil, folder: URL? = nil, log: @escaping @Sendable (String) -> Void = LiveRelayKitLog.standard
    ) -> LiveRelayClient {
        let folder = folder ?? defaultFolder(for: server)
        return kept.withLock { kept in
            if let client = kept[folder.standardizedFileURL.path] {
                if client.clientKey != clientKey {
                    client.log("LiveRelayKit: set up again with another client key; the first is kept until the app restarts")
                }
                return client
            }
            let client = LiveRelayClient(
                server: server, clientKey: clientKey, activityKeyAttribute: activityKeyAttribute, bundleID: bundleID, environment: environment,
                folder: folder, backgroundTime: .system, log: log)
            kept[folder.standardizedFileURL.path] = client
            // What earlier launches left goes at once, before any type is tracked.
            client.start()
            return client
        }
    }

    /// The clients `setUp` made, by their folder: never released while the app runs.
    private static let kept = Locked<[String: LiveRelayClient]>([:])

    /// Hands what a system handler saw (WidgetKit's, which the system makes itself) to each client
    /// `setUp` made in this process; logged when there is none yet, and lost then.
    static func observeInEveryClient(_ observation: ActivityObservation) {
        let clients = kept.withLock { Array($0.values) }
        guard !clients.isEmpty else {
            LiveRelayKitLog.standard(
                "LiveRelayKit: WidgetKit handed over a token before LiveRelayClient.setUp ran in this process; call it in the widget bundle's init")
            return
        }
        for client in clients { Task { await client.observe(observation) } }
    }

    /// A client of its own, which stops when the last reference goes (`setUp` keeps the app's):
    /// for adapters and tests, which run many in one process. `deviceID`, `storage`: the
    /// device's id and the backlog's storage, else kept in `folder`.
    @_spi(Adapter) public init(
        server: URL, clientKey: String, activityKeyAttribute: String = "activityKey", bundleID: String? = nil,
        environment: PushEnvironment? = nil, folder: URL? = nil, deviceID: String? = nil, storage: (any ReportStorage)? = nil,
        backgroundTime: BackgroundTime = .none, log: @escaping @Sendable (String) -> Void = LiveRelayKitLog.standard
    ) {
        let folder = folder ?? Self.defaultFolder(for: server)
        // A device id that cannot be read now (a locked phone) is read again before the first
        // send: a new one would make this iPhone two devices to the server.
        let known = deviceID ?? Self.installationID(in: folder)
        reporter = Reporter(
            deviceID: known ?? "", bundleID: bundleID ?? Bundle.main.bundleIdentifier ?? "unknown",
            environment: environment ?? .ofThisApp, systemVersion: Self.systemVersion, appVersion: Self.appVersion(of: Bundle.main))
        self.activityKeyAttribute = activityKeyAttribute
        self.clientKey = clientKey
        self.log = log
        let readAgain: (@Sendable () -> String?)? = known == nil ? { @Sendable in LiveRelayClient.installationID(in: folder) } : nil
        let backlogFile = Self.backlogName(running: Bundle.main.bundleIdentifier, app: reporter.bundleID)
        let backlog: any ReportStorage = storage ?? FileReportStorage(url: folder.appendingPathComponent(backlogFile))
        relay = LiveRelayReporter(
            reporter: reporter, transport: URLSessionTransport(server: server, clientKey: clientKey), storage: backlog, deviceID: readAgain,
            backgroundTime: backgroundTime, log: log)
    }

    /// The iOS this app runs on, as `UIDevice` writes it; nil elsewhere (a Mac, Linux in tests).
    static var systemVersion: String? {
        #if os(iOS)
            let version = ProcessInfo.processInfo.operatingSystemVersion
            return "\(version.majorVersion).\(version.minorVersion).\(version.patchVersion)"
        #else
            return nil
        #endif
    }

    /// The bundle's version and build as one (`"2.1 (45)"`: `CFBundleShortVersionString` and
    /// `CFBundleVersion`); nil without either (a test, a tool).
    static func appVersion(of bundle: Bundle) -> String? {
        let info = bundle.infoDictionary ?? [:]
        let short = info["CFBundleShortVersionString"] as? String
        let build = info["CFBundleVersion"] as? String
        switch (short, build) {
        case (let short?, let build?): return "\(short) (\(build))"
        case (let one?, nil), (nil, let one?): return one
        case (nil, nil): return nil
        }
    }

    deinit {
        tasks.withLock { tasks in
            tasks.sending?.cancel()
            for task in tasks.tracking { task.cancel() }
        }
        #if canImport(UIKit) && !os(watchOS)
            if let observer = foreground.withLock({ $0 }) { NotificationCenter.default.removeObserver(observer) }
        #endif
        #if canImport(Network)
            network.withLock { $0 }?.cancel()
        #endif
    }

    #if canImport(UIKit) && !os(watchOS)
        /// The foreground's observer (`start`).
        private let foreground = Locked<(any NSObjectProtocol)?>(nil)
    #endif
    #if canImport(Network)
        /// Hears the network come back (`start`).
        private let network = Locked<NWPathMonitor?>(nil)
    #endif

    /// Starts sending the backlog (once; `track` does it too). It stops when the client goes.
    /// On iOS, what waits for an unreachable server is tried again when the app comes to the
    /// foreground and when the network comes back.
    public func start() {
        let started = tasks.withLock { tasks in
            guard tasks.sending == nil else { return false }
            tasks.sending = Task { [relay] in await relay.run() }
            return true
        }
        guard started else { return }
        #if canImport(UIKit) && !os(watchOS)
            let relay = relay
            let observer = NotificationCenter.default.addObserver(
                forName: UIApplication.willEnterForegroundNotification, object: nil, queue: nil
            ) { _ in Task { await relay.retryNow() } }
            foreground.withLock { $0 = observer }
        #endif
        #if canImport(Network)
            let reporter = relay
            let monitor = NWPathMonitor()
            monitor.pathUpdateHandler = { path in
                if path.status == .satisfied { Task { await reporter.retryNow() } }
            }
            monitor.start(queue: DispatchQueue(label: "LiveRelayKit.network"))
            network.withLock { $0 = monitor }
        #endif
    }

    /// Hands LiveRelayKit the backend's grant for `key`, before the app requests an activity
    /// under it: the server takes the activity's update token with it (where the start was not
    /// sent by the server, in production builds). Ask your backend for it (`POST /v1/grants`).
    public func grant(_ grant: String, forKey key: String) async {
        await relay.grant(grant, forKey: key)
    }

    /// The person signed in to the app as `id`, with the backend's grant for that user (`POST
    /// /v1/grants` with `user`); `nil` when they sign out. The server's starts for `{"users":
    /// [...]}` reach this device while it is that user's, and no longer once signed out.
    public func setUser(_ id: String?, grant: String?) async {
        await relay.setUser(id, grant: grant)
    }

    /// Reports the server refused for want of the backend's grant: each is sent again once the
    /// app hands over a grant for its key (`grant(_:forKey:)`) or user (`setUser(_:grant:)`).
    public var awaitingGrant: [Report] {
        get async { await relay.awaitingGrant }
    }

    /// What the widget decodes a type from, reported before its first push-to-start token
    /// (`track` derives it from the Swift types by itself).
    @_spi(Adapter) public func include(_ contract: ActivityContractShape) async {
        await relay.include(contract)
    }

    /// What ActivityKit did, for an adapter.
    @_spi(Adapter) public func observe(_ observation: ActivityObservation) async {
        await relay.observe(observation)
    }

    /// Call before ending an activity by other means than `end(_:content:dismissalPolicy:)`: the
    /// end is then reported as the app's. ActivityKit says only that an activity ended, not who
    /// ended it.
    public func appWillEnd(activityID: String) async {
        await relay.observe(.endedByApp(activityID: activityID))
    }

    /// True the first time only: Live Activities' settings are followed once, whatever the types.
    @_spi(Adapter) public func claimAuthorization() -> Bool {
        tasks.withLock { tasks in
            defer { tasks.authorization = true }
            return !tasks.authorization
        }
    }

    @_spi(Adapter) public func keep(_ task: Task<Void, Never>) {
        tasks.withLock { $0.tracking.append(task) }
    }

    /// The backend's key of an activity: the attribute's value (a string or a number), else its id.
    @_spi(Adapter) public func activityKey(of attributes: some Encodable, activityID: String) -> String {
        guard let data = try? JSONEncoder().encode(attributes),
            let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return activityID }
        switch object[activityKeyAttribute] {
        case let text as String: return text
        case let number as NSNumber: return number.stringValue
        default: return activityID
        }
    }

    /// Application Support/LiveRelayKit/<server's host and port>.
    static func defaultFolder(for server: URL) -> URL {
        let base =
            (try? FileManager.default.url(for: .applicationSupportDirectory, in: .userDomainMask, appropriateFor: nil, create: true))
            ?? FileManager.default.temporaryDirectory
        let name = [server.host ?? "server", server.port.map(String.init)].compactMap { $0 }.joined(separator: "-")
        return base.appendingPathComponent("LiveRelayKit").appendingPathComponent(name)
    }

    /// A random id made at the first launch and kept (`AppFiles`: this device's, left out of
    /// backups): which device reports, without asking UIKit (whose `identifierForVendor` lives on
    /// the main actor). Nil when the file is there but cannot be read now: never a new one then.
    static func installationID(in folder: URL) -> String? {
        let file = folder.appendingPathComponent("device-id")
        func valid(_ data: Data) -> String? {
            guard let id = String(data: data, encoding: .utf8), !id.isEmpty, id.utf8.count <= 100 else { return nil }
            return id
        }
        let id = UUID().uuidString
        if FileManager.default.fileExists(atPath: file.path) {
            // Unreadable now (a locked phone): read again before the first send.
            guard let data = try? Data(contentsOf: file) else { return nil }
            if let kept = valid(data) { return kept }
            try? AppFiles.write(Data(id.utf8), to: file)
            return id
        }
        // The app and its widget extension may share the folder (an app group) and start at
        // once: the id written first is the device's, in both.
        if (try? AppFiles.write(Data(id.utf8), to: file, replacing: false)) == nil,
            let first = (try? Data(contentsOf: file)).flatMap(valid)
        {
            return first
        }
        return id
    }

    /// The backlog's file: the app's own, `backlog.json`; an extension that reports for its app
    /// (a widget extension sharing the app's folder through an app group) keeps its own beside
    /// it, so that two processes never write one file, and shares the app's device id.
    static func backlogName(running: String?, app: String) -> String {
        guard let running, running != app else { return "backlog.json" }
        return "backlog-\(running).json"
    }

    /// What LiveRelayKit is doing: up to date, sending (and why the last attempt failed), or
    /// refused by the server (the client key).
    public var status: ReportingStatus {
        get async { await relay.status }
    }

    /// The status now, then each change: for an app's diagnostics screen or its logs.
    public func statusUpdates() async -> AsyncStream<ReportingStatus> {
        await relay.statusUpdates()
    }
}

extension PushEnvironment {
    /// The running app's `aps-environment`, as its provisioning profile says: `development` is
    /// the sandbox; an App Store build has no profile in its bundle and is production. A
    /// Simulator build has none either, and its tokens are the sandbox's.
    public static var ofThisApp: PushEnvironment {
        #if targetEnvironment(simulator)
            let isSimulator = true
        #else
            let isSimulator = false
        #endif
        let profile = Bundle.main.url(forResource: "embedded", withExtension: "mobileprovision").flatMap { try? Data(contentsOf: $0) }
        return environment(profile: profile, isSimulator: isSimulator)
    }

    /// The environment of an app with this provisioning profile (nil: none in its bundle).
    static func environment(profile: Data?, isSimulator: Bool) -> PushEnvironment {
        if isSimulator { return .sandbox }
        return profile.map(environment(inProfile:)) ?? .production
    }

    /// The `aps-environment` of a provisioning profile: its property list sits in the signed
    /// file as text.
    static func environment(inProfile data: Data) -> PushEnvironment {
        let text = String(decoding: data, as: UTF8.self)
        guard let key = text.range(of: "<key>aps-environment</key>") else { return .production }
        let rest = text[key.upperBound...].drop(while: { $0.isWhitespace })
        return rest.hasPrefix("<string>development</string>") ? .sandbox : .production
    }
}

/// Where LiveRelayKit's lines go unless the app says otherwise.
public enum LiveRelayKitLog {
    /// The unified log on Apple platforms (subsystem `LiveRelayKit`, seen in Console), standard
    /// output elsewhere. A line names reports by key and type, and a token by its first and last
    /// four digits only (`Report.description`).
    public static let standard: @Sendable (String) -> Void = {
        #if canImport(os)
            let logger = os.Logger(subsystem: "LiveRelayKit", category: "reports")
            return { line in logger.notice("\(line, privacy: .public)") }
        #else
            return { line in print(line) }
        #endif
    }()
}
