import APNs
import Foundation
import LiveActivityKit
import NIOCore
import SimulatedDevices

/// What one emulator connection remembers: its provider-token session and its stream limit.
public struct EmulatedConnection: ConnectionState {
    public internal(set) var maxConcurrentStreams: Int
    var session = ProviderTokenSession()
}

/// Answers the APNs provider API as Apple documents it (spec §5, in the order of §11): device
/// pushes and broadcasts on the push port, channel management on its own port.
struct APNsResponder: RequestResponder {
    enum Service { case push, channelManagement }

    let service: Service
    /// The environment this listener plays: tokens and channels of the other are unknown here.
    let environment: PushEnvironment
    let settings: APNsEmulator.Configuration
    let registry: EmulatorRegistry
    let journal: EmulatorJournal
    let faults: EmulatorFaults
    /// Where accepted pushes go: the simulated devices holding the tokens and channels.
    let devices: DeviceFleet

    func makeConnection(id: Int) -> EmulatedConnection {
        EmulatedConnection(maxConcurrentStreams: settings.initialStreamLimit)
    }

    func answer(_ request: ReceivedRequest, connection: inout EmulatedConnection) -> ServerAnswer {
        let now = settings.now()
        if let fault = faults.take(for: request) {
            return play(fault, request, connection: &connection, now: now)
        }
        let verdict = judge(request, connection: &connection, now: now)
        journal.record(request, in: environment, verdict: verdict, at: now)
        return verdict.answer
    }

    func malformed(_ request: ReceivedRequest, error: any Error, connection: inout EmulatedConnection) {
        journal.recordMalformed(request, in: environment, error: "\(error)", at: settings.now())
    }

    private func judge(_ request: ReceivedRequest, connection: inout EmulatedConnection, now: Date) -> Verdict {
        switch service {
        case .push: push(request, connection: &connection, now: now)
        case .channelManagement: channelManagement(request, connection: &connection, now: now)
        }
    }

    // MARK: Faults

    private func play(_ fault: EmulatorFault.Action, _ request: ReceivedRequest, connection: inout EmulatedConnection, now: Date) -> ServerAnswer {
        let idHeader = service == .push && !request.path.hasPrefix("/4/") ? "apns-id" : "apns-request-id"
        let reply = Reply(idHeader: idHeader, id: request.header(idHeader))
        let answer: ServerAnswer
        var verdict: Verdict
        switch fault {
        case .respond(let status, let reason):
            verdict = reply.reject(reason, status: status)
            answer = verdict.answer
        case .delay(let delay):
            verdict = judge(request, connection: &connection, now: now)
            answer = .delayed(TimeAmount(delay), verdict.answer)
        case .goAway(let reason):
            verdict = Verdict.unanswered(reason)
            answer = .goAway(answer: nil, debugData: APNsError(status: 0, reason: reason).body)
        case .resetConnection:
            verdict = Verdict.unanswered(nil)
            answer = .closeConnection
        case .stall:
            verdict = Verdict.unanswered(nil)
            answer = .noAnswer
        case .freeze(let duration):
            verdict = judge(request, connection: &connection, now: now)
            answer = .frozen(TimeAmount(duration), verdict.answer)
        case .shutdown:
            verdict = reply.reject(.shutdown)
            answer = .goAway(answer: verdict.answer, debugData: APNsError(status: 503, reason: .shutdown).body)
        }
        verdict.fault = fault
        journal.record(request, in: environment, verdict: verdict, at: now)
        return answer
    }

    // MARK: Device pushes and broadcasts

    private func push(_ request: ReceivedRequest, connection: inout EmulatedConnection, now: Date) -> Verdict {
        let isBroadcast = request.path.hasPrefix("/4/")
        let idHeader = isBroadcast ? "apns-request-id" : "apns-id"
        var reply = Reply(idHeader: idHeader, id: request.header(idHeader))

        if repeatsAHeader(request) { return reply.reject(.duplicateHeaders) }
        if let id = request.header(idHeader), (try? APNsMessageID(id, field: idHeader)) == nil {
            reply.id = nil
            return reply.reject(.badMessageId)
        }
        guard request.method == "POST" else { return reply.reject(.methodNotAllowed) }
        if isBroadcast { return broadcast(request, reply: reply, connection: &connection, now: now) }

        guard request.path.hasPrefix("/3/device/") else { return reply.reject(.badPath) }
        let token = String(request.path.dropFirst("/3/device/".count))
        guard !token.isEmpty else { return reply.reject(.missingDeviceToken) }
        guard let topic = request.header("apns-topic"), !topic.isEmpty else { return reply.reject(.missingTopic) }
        guard Self.isWellFormed(topic: topic) else { return reply.reject(.badTopic) }
        if let collapseID = request.header("apns-collapse-id"), collapseID.utf8.count > 64 {
            return reply.reject(.badCollapseId)
        }
        let pushType = request.header("apns-push-type")
        if let priority = request.header("apns-priority") {
            guard Self.allowedPriorities(pushType, settings: settings).contains(priority) else { return reply.reject(.badPriority) }
        }
        if let pushType, !Self.pushTypes.contains(pushType) { return reply.reject(.invalidPushType) }
        if let expiration = request.header("apns-expiration"), Int64(expiration) == nil || expiration.hasPrefix("-") {
            return reply.reject(.badExpirationDate)
        }
        guard let parsed = try? DeviceToken(token), let known = registry.token(parsed), known.environment == environment else {
            return reply.reject(.badDeviceToken)
        }
        switch known.state {
        case .active: break
        case .unregistered(let since): return reply.reject(.unregistered, timestamp: since)
        case .expired: return reply.reject(.expiredToken)
        }
        guard pushType == known.pushType.rawValue, topic == known.bundleID + known.pushType.topicSuffix else {
            return reply.reject(.deviceTokenNotForTopic)
        }
        return finishPush(request, bundleID: known.bundleID, destination: .device, reply: reply, connection: &connection, now: now) {
            devices.deliver(to: token) {
                DevicePush(
                    token: token, payload: Self.payload(request.body), priority: Int(request.header("apns-priority") ?? "10") ?? 10,
                    expiration: request.header("apns-expiration").flatMap(Int64.init).map { Date(timeIntervalSince1970: TimeInterval($0)) },
                    receivedAt: now)
            }
            return reply.accept(uniqueID: environment == .sandbox)
        }
    }

    /// The checks device pushes and broadcasts end with: provider token, then body; on success the
    /// connection gets its full stream limit.
    private func finishPush(
        _ request: ReceivedRequest, bundleID: String, destination: LiveActivityPayload.Destination, reply: Reply,
        connection: inout EmulatedConnection, now: Date, accepted: () -> Verdict
    ) -> Verdict {
        if let reason = connection.session.authenticate(
            authorization: request.header("authorization"), bundleID: bundleID, environment: environment,
            now: now, registry: registry, topicRejection: destination == .device ? .topicDisallowed : .topicMismatch)
        {
            return reply.reject(reason)
        }
        guard !request.body.isEmpty else { return reply.reject(.payloadEmpty) }
        guard request.body.count <= destination.maximumPayloadSize else { return reply.reject(.payloadTooLarge) }
        connection.maxConcurrentStreams = settings.authenticatedStreamLimit
        return accepted()
    }

    /// The body as the device reads it; not JSON is `null`, which the device drops and logs.
    static func payload(_ body: [UInt8]) -> JSONValue {
        (try? JSONValue(parsing: body)) ?? .null
    }

    /// A bundle id (letters, digits, hyphens, dot-separated parts), optionally with a push-type suffix.
    static func isWellFormed(topic: String) -> Bool {
        var partLength = 0
        for byte in topic.utf8 {
            switch byte {
            case UInt8(ascii: "."):
                guard partLength > 0 else { return false }
                partLength = 0
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"):
                partLength += 1
            default:
                return false
            }
        }
        return partLength > 0
    }

    /// The priorities a device push of a type may ask for. Live Activity pushes take 10 and 5 (1
    /// only when the emulator is told to accept it); widget and control pushes are assumed to
    /// take the same, as both are budgeted by the system (Apple documents no list for them).
    static func allowedPriorities(_ pushType: String?, settings: APNsEmulator.Configuration) -> [String] {
        switch pushType {
        case "liveactivity": settings.allowsPriority1ForLiveActivity ? ["10", "5", "1"] : ["10", "5"]
        case "widgets", "controls": ["10", "5"]
        default: ["10", "5", "1"]
        }
    }

    /// The push types Apple documents for `apns-push-type`.
    static let pushTypes: Set<String> = [
        "alert", "background", "voip", "complication", "fileprovider", "location", "liveactivity", "pushtotalk",
        "widgets", "controls", "mdm",
    ]

    private func broadcast(_ request: ReceivedRequest, reply: Reply, connection: inout EmulatedConnection, now: Date) -> Verdict {
        let prefix = "/4/broadcasts/apps/"
        guard request.path.hasPrefix(prefix), !request.path.dropFirst(prefix.count).contains("/") else {
            return reply.reject(.badPath)
        }
        let bundleID = String(request.path.dropFirst(prefix.count))
        guard !bundleID.isEmpty else { return reply.reject(.badPath) }
        guard !bundleID.contains(".push-type.") else { return reply.reject(.topicDisallowed) }
        guard let channelID = request.header("apns-channel-id"), !channelID.isEmpty else {
            return reply.reject(.missingChannelId)
        }
        guard let pushType = request.header("apns-push-type") else { return reply.reject(.missingPushType) }
        guard pushType.lowercased() == "liveactivity" else { return reply.reject(.invalidPushType) }
        guard let expirationText = request.header("apns-expiration"), let expiration = Int64(expirationText), expiration >= 0 else {
            return reply.reject(.badExpirationDate)
        }
        guard let priority = request.header("apns-priority"), ["10", "5", "1"].contains(priority) else {
            return reply.reject(.badPriority)
        }
        guard Data(base64Encoded: channelID) != nil else { return reply.reject(.badChannelId) }
        guard let channel = registry.channel(channelID), channel.bundleID == bundleID, channel.environment == environment else {
            return reply.reject(.channelNotRegistered)
        }
        if channel.storagePolicy == 0, expiration != 0 { return reply.reject(.badExpirationDate) }
        guard registry.broadcastEnabled(bundleID) else { return reply.reject(.featureNotEnabled) }
        return finishPush(request, bundleID: bundleID, destination: .broadcast, reply: reply, connection: &connection, now: now) {
            devices.broadcast(
                channelID: channelID, payload: Self.payload(request.body), priority: Int(priority) ?? 10,
                storagePolicy: channel.storagePolicy, expiration: Date(timeIntervalSince1970: TimeInterval(expiration)))
            return reply.accept(uniqueID: true)
        }
    }

    // MARK: Channel management

    private func channelManagement(_ request: ReceivedRequest, connection: inout EmulatedConnection, now: Date) -> Verdict {
        var reply = Reply(idHeader: "apns-request-id", id: request.header("apns-request-id"))
        if repeatsAHeader(request) { return reply.reject(.duplicateHeaders) }
        if let id = request.header("apns-request-id"), (try? APNsMessageID(id, field: "apns-request-id")) == nil {
            reply.id = nil
            return reply.reject(.badMessageId)
        }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: false)
        // "", "1", "apps", <bundle>, "channels" | "all-channels"
        guard parts.count == 5, parts[0].isEmpty, parts[1] == "1", parts[2] == "apps", !parts[3].isEmpty,
            parts[4] == "channels" || parts[4] == "all-channels"
        else { return reply.reject(.badPath) }
        let bundleID = String(parts[3])
        let listing = parts[4] == "all-channels"
        let allowedMethods = listing ? ["GET"] : ["GET", "POST", "DELETE"]
        guard allowedMethods.contains(request.method) else { return reply.reject(.methodNotAllowed) }
        guard !bundleID.contains(".push-type.") else { return reply.reject(.topicDisallowed) }
        if let reason = connection.session.authenticate(
            authorization: request.header("authorization"), bundleID: bundleID, environment: environment,
            now: now, registry: registry, topicRejection: .topicMismatch)
        {
            return reply.reject(reason)
        }
        guard registry.broadcastEnabled(bundleID) else { return reply.reject(.featureNotEnabled) }
        connection.maxConcurrentStreams = settings.authenticatedStreamLimit

        if listing {
            let ids = registry.channels(of: bundleID, in: environment).map(JSONValue.string)
            return reply.accept(status: 200, body: .object([("channels", .array(ids))]))
        }
        if request.method == "POST" { return createChannel(request, bundleID: bundleID, reply: reply) }

        guard let channelID = request.header("apns-channel-id"), !channelID.isEmpty else {
            return reply.reject(.missingChannelId)
        }
        guard Data(base64Encoded: channelID) != nil else { return reply.reject(.badChannelId) }
        guard let channel = registry.channel(channelID), channel.bundleID == bundleID, channel.environment == environment else {
            return reply.reject(.channelNotRegistered)
        }
        if request.method == "DELETE" {
            _ = registry.deleteChannel(channelID)
            return reply.accept(status: 204)
        }
        return reply.accept(
            status: 200,
            body: .object([
                ("message-storage-policy", .integer(channel.storagePolicy)), ("push-type", .string("LiveActivity")),
            ]))
    }

    private func createChannel(_ request: ReceivedRequest, bundleID: String, reply: Reply) -> Verdict {
        guard !request.body.isEmpty else { return reply.reject(.payloadEmpty) }
        guard let body = try? JSONValue(parsing: request.body), let members = body.objectMembers else {
            return reply.reject(.badRequestPayload)
        }
        guard members.allSatisfy({ ["message-storage-policy", "push-type"].contains($0.key) }),
            let policy = body["message-storage-policy"], policy == .number("0") || policy == .number("1")
        else { return reply.reject(.badRequestParams) }
        guard let pushType = body["push-type"]?.stringValue else { return reply.reject(.badRequestParams) }
        guard pushType.lowercased() == "liveactivity" else { return reply.reject(.invalidPushType) }
        guard let channel = registry.createChannel(bundleID: bundleID, environment: environment, storagePolicy: policy == .number("1") ? 1 : 0) else {
            return reply.reject(.cannotCreateChannelConfig)
        }
        return reply.accept(status: 201, extraHeaders: [("apns-channel-id", channel.id)])
    }

    /// Whether a header was sent twice (HTTP/2 allows split `cookie` headers; APNs takes none).
    private func repeatsAHeader(_ request: ReceivedRequest) -> Bool {
        // Each against those after it: a request has about ten headers, fewer compares than a
        // set's hashing and allocation for every push.
        let names = request.headers.lazy.map(\.name)
        return names.indices.contains { index in
            names[index] != "cookie" && names[names.index(after: index)...].contains(names[index])
        }
    }
}

/// The outcome of one request, as recorded and as answered.
struct Verdict: Sendable {
    /// `nil` when the request was left unanswered (GOAWAY, dropped connection).
    var status: Int?
    var reason: APNsReason?
    var headers: [(name: String, value: String)]
    var body: [UInt8]?
    /// The fault played instead of (or on top of) the normal answer.
    var fault: EmulatorFault.Action?

    var answer: ServerAnswer {
        guard let status else { return .noAnswer }
        return .respond(status: status, headers: headers, body: body)
    }

    static func unanswered(_ reason: APNsReason?) -> Verdict {
        Verdict(status: nil, reason: reason, headers: [], body: nil)
    }
}

/// Builds answers that carry the request's id back, as APNs does.
private struct Reply {
    let idHeader: String
    var id: String?

    private var idValue: String { id ?? GeneratedUUID.string() }

    /// The reason's documented status and `{"reason": …}` body (for 410 with the `timestamp`),
    /// with the id header.
    func reject(_ reason: APNsReason, status: Int? = nil, timestamp: Date? = nil) -> Verdict {
        let error = APNsError(status: status ?? reason.known?.status ?? 500, reason: reason, timestamp: timestamp)
        return Verdict(status: error.status, reason: reason, headers: [(idHeader, idValue), ("content-type", "application/json")], body: error.body)
    }

    /// Success of a push: HEADERS only, with the id and (in the sandbox, and for broadcasts) `apns-unique-id`.
    func accept(uniqueID: Bool) -> Verdict {
        var headers = [(name: idHeader, value: idValue)]
        if uniqueID { headers.append(("apns-unique-id", GeneratedUUID.string())) }
        return Verdict(status: 200, reason: nil, headers: headers, body: nil)
    }

    /// Success of a channel-management request.
    func accept(status: Int, body: JSONValue? = nil, extraHeaders: [(name: String, value: String)] = []) -> Verdict {
        var headers = [(name: idHeader, value: idValue)] + extraHeaders
        if body != nil { headers.append(("content-type", "application/json")) }
        return Verdict(status: status, reason: nil, headers: headers, body: body?.serialized)
    }
}
