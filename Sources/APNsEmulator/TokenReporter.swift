import AsyncHTTPClient
import Foundation
import LiveActivityKit
import Logging
import NIOCore
import NIOHTTP1
import SimulatedDevices
import Synchronization

/// Where a simulated app reports its tokens: the LiveRelay server it belongs to, as a real app
/// reports to its backend.
public struct TokenReporting: Sendable, Hashable {
    /// The server's base URL, such as `http://127.0.0.1:8080`.
    public var url: String
    /// Sent as `Authorization: Bearer …` (a LiveRelay client key).
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

/// Makes simulated apps report what a real app reports to its server, over HTTP:
///
///     PUT  {url}/v1/contracts/{attributesType}   {bundleID, attributes, contentState}   (types given as contracts, once)
///     POST {url}/v1/push-to-start-tokens        {deviceID, bundleID, attributesType, token, frequentPushesEnabled, environment}
///     POST {url}/v1/activities/{key}/tokens     {deviceID, bundleID, activityID, attributesType, token, frequentPushesEnabled, environment}
///     POST {url}/v1/activities/{key}/ended      {deviceID, bundleID, activityID, state: ended | dismissed, cause, at}
///
/// Reports go out in the order things happened; a failed one is retried a few times with
/// backoff and then written to `reports` as failed, as an app would give up until its next launch.
public final class TokenReporter: Sendable {
    public struct Report: Sendable, Hashable {
        public var deviceID: String
        public var bundleID: String
        public var path: String
        /// The HTTP status, or `nil` when the server could not be reached.
        public var status: Int?
        public var error: String?
    }

    private struct State {
        var targets: [AppKey: TokenReporting] = [:]
        /// The key and type of each activity of a reporting app, learnt when it starts: reports
        /// are sent after the fact, when the device may have forgotten the activity.
        var activities: [String: (key: String, attributesType: String)] = [:]
        var reports: [Report] = []
        /// Contracts each server has been given, so that each is registered once per server.
        var contractsReported: Set<ContractReport> = []
    }

    private struct ContractReport: Hashable {
        var url: String
        var bundleID: String
        var contract: ActivityContract
    }

    private struct AppKey: Hashable {
        var deviceID: String
        var bundleID: String
    }

    private let fleet: DeviceFleet
    private let state = Mutex(State())
    private let logger: Logger
    /// Recent reports kept for the control API.
    static let reportsKept = 200

    init(fleet: DeviceFleet, logger: Logger = Logger(label: "liverelay.emulator.reporter")) {
        self.fleet = fleet
        self.logger = logger
        startSequence = fleet.events.lastSequence
    }

    /// Events after this one are reported, even those that happen before `run()` starts.
    private let startSequence: Int

    /// Makes the app on the device report to `target` from now on (`nil` stops it); what it has
    /// now is reported at once, as an app does at launch: its push-to-start tokens, the update
    /// tokens of its ongoing activities, and the end of those that ended while it was not
    /// reporting (the device kept them across a restart of the server, say).
    public func setTarget(_ target: TokenReporting?, deviceID: String, bundleID: String) throws {
        let device = try fleet.device(deviceID)
        state.withLock { $0.targets[AppKey(deviceID: deviceID, bundleID: bundleID)] = target }
        guard target != nil, let app = device.apps[bundleID] else { return }
        // Replayed as events so that they take the same path, in order, as later ones; an end with
        // the time it happened.
        let now = fleet.clock.now
        var current: [(event: DeviceEvent, at: Date)] = app.pushToStartTokens.sorted { $0.key < $1.key }.map {
            (.tokenIssued(token: $0.value, bundleID: bundleID, kind: .pushToStart(attributesType: $0.key), environment: app.environment), now)
        }
        for activity in device.activities where activity.bundleID == bundleID {
            current.append(
                (
                    .activityStarted(
                        activityID: activity.id, bundleID: bundleID, attributesType: activity.attributesType, attributes: activity.attributes), now
                ))
            if activity.lifecycle.isOngoing, let token = activity.pushToken {
                current.append(
                    (.tokenIssued(token: token, bundleID: bundleID, kind: .update(activityID: activity.id), environment: app.environment), now))
            } else if let cause = activity.endCause {
                current.append(
                    (.stateChanged(activityID: activity.id, bundleID: bundleID, to: activity.state, cause: cause), activity.lifecycle.endDate ?? now))
            }
        }
        for (event, at) in current { queue.continuation.yield((deviceID, event, at)) }
    }

    /// What is to be reported, in order: the fleet's events and the replays of `setTarget`.
    private let queue = AsyncStream.makeStream(of: (deviceID: String, event: DeviceEvent, at: Date).self)

    public func target(deviceID: String, bundleID: String) -> TokenReporting? {
        state.withLock { $0.targets[AppKey(deviceID: deviceID, bundleID: bundleID)] }
    }

    public var reports: [Report] { state.withLock { $0.reports } }

    /// Sends reports until cancelled.
    package func run() async {
        let client = HTTPClient.shared
        let events = fleet.events.subscribe(after: startSequence)
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [queue] in
                for await event in events { queue.continuation.yield((event.deviceID, event.event, event.at)) }
            }
            group.addTask { [queue] in
                for await item in queue.stream { await self.handle(item.deviceID, item.event, at: item.at, client: client) }
            }
            await group.next()
            group.cancelAll()
        }
    }

    private func handle(_ deviceID: String, _ event: DeviceEvent, at: Date, client: HTTPClient) async {
        let bundleID: String
        switch event {
        case .tokenIssued(_, let bundle, _, _), .stateChanged(_, let bundle, _, _), .activityStarted(_, let bundle, _, _): bundleID = bundle
        default: return
        }
        guard let target = state.withLock({ $0.targets[AppKey(deviceID: deviceID, bundleID: bundleID)] }) else { return }
        let frequent = (try? fleet.device(deviceID).apps[bundleID]?.frequentPushesEnabled) ?? false
        var body: JSONValue.Members = [("deviceID", .string(deviceID)), ("bundleID", .string(bundleID))]
        let path: String
        switch event {
        case .activityStarted(let activityID, _, let type, let attributes):
            let value = attributes[target.activityKeyAttribute]
            let key = value?.stringValue ?? (value.flatMap { if case .number(let literal) = $0 { literal } else { nil } }) ?? activityID
            state.withLock { $0.activities[activityID] = (key, type) }
            return
        case .tokenIssued(let token, _, .pushToStart(let type), let environment):
            // The app tells its server what its widget decodes before it can be started by push.
            if let contract = try? fleet.device(deviceID).apps[bundleID]?.attributeTypes[type]?.contract {
                await reportContract(contract, deviceID: deviceID, bundleID: bundleID, to: target, client: client)
            }
            path = "/v1/push-to-start-tokens"
            body += [
                ("attributesType", .string(type)), ("token", .string(token)), ("frequentPushesEnabled", .bool(frequent)),
                ("environment", .string(environment.rawValue)),
            ]
        case .tokenIssued(let token, _, .update(let activityID), let environment):
            guard let activity = state.withLock({ $0.activities[activityID] }) else { return }
            path = "/v1/activities/\(Self.pathSegment(activity.key))/tokens"
            body += [
                ("activityID", .string(activityID)), ("attributesType", .string(activity.attributesType)), ("token", .string(token)),
                ("frequentPushesEnabled", .bool(frequent)), ("environment", .string(environment.rawValue)),
            ]
        case .stateChanged(let activityID, _, let newState, let cause) where newState == .ended || newState == .dismissed:
            guard let activity = state.withLock({ $0.activities[activityID] }) else { return }
            path = "/v1/activities/\(Self.pathSegment(activity.key))/ended"
            body += [
                ("activityID", .string(activityID)), ("state", .string(newState.rawValue)), ("cause", .string(cause.rawValue)),
                ("at", .string(at.iso8601)),
            ]
            if newState == .dismissed { _ = state.withLock { $0.activities.removeValue(forKey: activityID) } }
        default:
            return
        }
        let report = await post(JSONValue.object(body), to: target, path: path, client: client)
        keep(Report(deviceID: deviceID, bundleID: bundleID, path: path, status: report.status, error: report.error))
    }

    private func reportContract(_ contract: ActivityContract, deviceID: String, bundleID: String, to target: TokenReporting, client: HTTPClient) async
    {
        let reported = ContractReport(url: target.url, bundleID: bundleID, contract: contract)
        guard state.withLock({ $0.contractsReported.insert(reported).inserted }) else { return }
        let path = "/v1/contracts/\(Self.pathSegment(contract.attributesType))"
        let schemas = contract.json.objectMembers?.filter { $0.key != "name" }.map { ($0.key, $0.value) } ?? []
        let report = await post(.object([("bundleID", .string(bundleID))] + schemas), to: target, path: path, method: .PUT, client: client)
        if report.error != nil { _ = state.withLock { $0.contractsReported.remove(reported) } }
        keep(Report(deviceID: deviceID, bundleID: bundleID, path: path, status: report.status, error: report.error))
    }

    private func keep(_ report: Report) {
        state.withLock { state in
            state.reports.append(report)
            if state.reports.count > Self.reportsKept { state.reports.removeFirst(state.reports.count - Self.reportsKept) }
        }
    }

    private static func pathSegment(_ key: String) -> String {
        key.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(CharacterSet(charactersIn: "/"))) ?? key
    }

    /// Three tries, 0.2 s and 1 s apart: the server may be starting.
    private func post(
        _ body: JSONValue, to target: TokenReporting, path: String, method: HTTPMethod = .POST, client: HTTPClient
    ) async -> (status: Int?, error: String?) {
        var request = HTTPClientRequest(url: target.url + path)
        request.method = method
        request.headers.add(name: "content-type", value: "application/json")
        if let key = target.clientKey { request.headers.add(name: "authorization", value: "Bearer \(key)") }
        request.body = .bytes(ByteBuffer(bytes: body.serialized))
        var outcome: (status: Int?, error: String?) = (nil, nil)
        for pause in [Duration.milliseconds(200), .seconds(1), .zero] {
            do {
                let response = try await client.execute(request, timeout: .seconds(10))
                let text = String(buffer: try await response.body.collect(upTo: 64 * 1024))
                let status = Int(response.status.code)
                outcome = (status, (200..<300).contains(status) ? nil : text)
                if status < 500 { break }
            } catch {
                outcome = (nil, "\(error)")
            }
            if pause > .zero { try? await Task.sleep(for: pause) }
        }
        if outcome.error != nil {
            logger.warning(
                "token report failed",
                metadata: ["path": "\(path)", "status": "\(outcome.status.map(String.init) ?? "-")", "error": "\(outcome.error ?? "")"])
        }
        return outcome
    }
}
