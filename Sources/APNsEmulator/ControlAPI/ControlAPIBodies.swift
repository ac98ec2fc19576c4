import APNs
import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import SimulatedDevices

// The JSON bodies of the control API. Requests list their fields so that misspellings are caught.

struct Status: ResponseEncodable {
    struct Ports: Encodable {
        var pushPort: Int
        var channelManagementPort: Int
    }

    /// Each environment played, and where it listens.
    var environments: [String: Ports]
    var requests: Int
    var counts: [String: Int]
}

struct KeyBody: APIRequestBody {
    static let fields = ["keyID", "teamID", "publicKey", "environments", "topics"]
    var keyID: String
    var teamID: String
    /// A P-256 public key in PEM, or a whole `.p8` file (only its public half is kept).
    var publicKey: String
    var environments: [String]?
    /// Bundle ids of a topic-scoped key; absent for a team-scoped key.
    var topics: [String]?
}

struct KeyView: ResponseEncodable {
    var keyID: String
    var teamID: String
    var environments: [String]
    var topics: [String]?

    init(_ key: EmulatorKey) {
        keyID = key.keyID
        teamID = key.teamID
        environments = key.environments.map(\.rawValue).sorted()
        if case .topics(let bundles) = key.scope { topics = bundles.sorted() }
    }
}

struct KeyList: ResponseEncodable { var keys: [KeyView] }

struct TokenBody: APIRequestBody {
    static let fields = ["token", "bundleID", "environment", "pushType"]
    var token: String
    var bundleID: String
    var environment: String?
    /// `liveactivity` (the default), `widgets` or `controls`.
    var pushType: String?
}

struct UnregisterBody: APIRequestBody {
    static let fields = ["at"]
    /// When the activity went away (ISO 8601); the emulator's clock by default.
    var at: Date?

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        guard let text = try container.decodeIfPresent(String.self, forKey: .at) else { return }
        guard let date = ISO8601DateFormatter().date(from: text) else {
            throw DecodingError.dataCorruptedError(
                forKey: .at, in: container, debugDescription: "must be an ISO 8601 date such as 2026-11-21T10:00:00Z")
        }
        at = date
    }

    private enum CodingKeys: String, CodingKey { case at }
}

struct TokenView: ResponseEncodable {
    var token: String
    var bundleID: String
    var environment: String
    var pushType: String
    /// `active`, `unregistered` or `expired`.
    var state: String
    var unregisteredAt: Date?

    init(_ token: EmulatorToken) {
        self.token = token.hex
        bundleID = token.bundleID
        environment = token.environment.rawValue
        pushType = token.pushType.rawValue
        switch token.state {
        case .active: state = "active"
        case .unregistered(let since):
            state = "unregistered"
            unregisteredAt = since
        case .expired: state = "expired"
        }
    }
}

struct ChannelView: ResponseEncodable {
    var channelID: String
    var bundleID: String
    var environment: String
    var messageStoragePolicy: Int

    init(_ channel: EmulatorChannel) {
        channelID = channel.id
        bundleID = channel.bundleID
        environment = channel.environment.rawValue
        messageStoragePolicy = channel.storagePolicy
    }
}

struct ChannelList: ResponseEncodable { var channels: [ChannelView] }

struct CapabilityBody: APIRequestBody, ResponseEncodable {
    static let fields = ["bundleIDs"]
    /// The apps with the broadcast capability; `null` for every app.
    var bundleIDs: [String]?

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(bundleIDs, forKey: .bundleIDs)  // null stays visible
    }
}

struct Counts: ResponseEncodable {
    /// Answers since start by outcome: `Success`, a reason, `Unanswered`, or `MalformedStream`.
    var counts: [String: Int]
    var requests: Int
}

struct JournalEntry: Encodable {
    struct Header: Encodable {
        var name: String
        var value: String
    }

    var sequence: Int
    var time: Date
    /// `sandbox` or `production`: whose listener took the request.
    var environment: String
    var connection: Int
    var method: String
    var path: String
    var headers: [Header]
    /// The body as text, or base64 when it is not UTF-8 (then `bodyEncoding` is `base64`).
    var body: String
    var bodyEncoding: String?
    /// `null` when unanswered.
    var status: Int?
    var reason: String?
    var outcome: String
    var fault: String?
    /// Set when HTTP/2 refused the stream with RST_STREAM: what was wrong.
    var streamError: String?

    init(_ recorded: RecordedRequest) {
        sequence = recorded.sequence
        time = recorded.time
        environment = recorded.environment.rawValue
        connection = recorded.connectionID
        method = recorded.method
        path = recorded.path
        headers = recorded.headers.map { Header(name: $0.name, value: $0.value) }
        if let text = String(validating: recorded.body, as: UTF8.self) {
            body = text
        } else {
            body = Data(recorded.body).base64EncodedString()
            bodyEncoding = "base64"
        }
        status = recorded.status
        reason = recorded.reason?.rawValue
        outcome = recorded.outcome
        fault = recorded.fault.map(FaultView.name)
        streamError = recorded.streamError
    }
}

struct Journal: ResponseEncodable {
    var requests: [JournalEntry]
    /// Pass as `after` to read only newer requests.
    var last: Int
}

struct FaultBody: APIRequestBody {
    static let fields = ["action", "reason", "status", "delayMilliseconds", "token", "bundleID", "skip", "count", "untilRemoved"]
    /// `respond`, `delay`, `goaway`, `reset`, `stall`, `freeze` or `shutdown`.
    var action: String
    var reason: String?
    var status: Int?
    var delayMilliseconds: Int?
    var token: String?
    var bundleID: String?
    var skip: Int?
    var count: Int?
    var untilRemoved: Bool?
}

struct FaultView: ResponseEncodable {
    var id: Int
    var action: String
    var reason: String?
    var status: Int?
    var delayMilliseconds: Int64?
    var token: String?
    var bundleID: String?
    var skip: Int
    /// Requests it will still apply to; `null` until removed.
    var count: Int?
    var applied: Int

    init(_ installed: EmulatorFaults.Installed) {
        id = installed.id
        action = Self.name(installed.fault.action)
        switch installed.fault.action {
        case .respond(let status, let reason):
            self.status = status
            self.reason = reason.rawValue
        case .delay(let delay), .freeze(let delay):
            delayMilliseconds = delay.components.seconds * 1000 + delay.components.attoseconds / 1_000_000_000_000_000
        case .goAway(let reason): self.reason = reason.rawValue
        case .resetConnection, .stall: break
        case .shutdown: reason = APNsReason.shutdown.rawValue
        }
        switch installed.fault.scope {
        case .all: break
        case .token(let hex): token = hex
        case .bundleID(let bundle): bundleID = bundle
        }
        skip = installed.fault.skip
        count = installed.fault.count
        applied = installed.applied
    }

    static func name(_ action: EmulatorFault.Action) -> String {
        switch action {
        case .respond: "respond"
        case .delay: "delay"
        case .goAway: "goaway"
        case .resetConnection: "reset"
        case .stall: "stall"
        case .freeze: "freeze"
        case .shutdown: "shutdown"
        }
    }
}

struct FaultList: ResponseEncodable { var faults: [FaultView] }

/// `POST /devices`.
struct NewDeviceBody: APIRequestBody {
    static let fields = ["id", "model", "pairedWatch", "iOS"]
    var id: String
    var model: DeviceModel
    var pairedWatch: Bool
    var systemVersion: SystemVersion

    init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: JSONKey.self)
        id = try body.requireNonEmptyString(JSONKey("id"))
        model = .iPhoneWithDynamicIsland
        if let name = try body.decodeIfPresent(String.self, forKey: JSONKey("model")) {
            guard let model = DeviceModel(rawValue: name) else {
                throw DecodingError.dataCorruptedError(
                    forKey: JSONKey("model"), in: body,
                    debugDescription: "must be one of \(DeviceModel.allCases.map(\.rawValue).joined(separator: ", ")), got \"\(name)\"")
            }
            self.model = model
        }
        pairedWatch = try body.decodeIfPresent(Bool.self, forKey: JSONKey("pairedWatch")) ?? false
        systemVersion = try body.systemVersion(JSONKey("iOS")) ?? .newDevice
    }
}

/// `POST /devices/{id}/os-update`, optional: the version to install (the next release without it).
struct OSUpdateBody: APIRequestBody {
    static let fields = ["to"]
    var to: SystemVersion?

    init(from decoder: any Decoder) throws {
        to = try decoder.container(keyedBy: JSONKey.self).systemVersion(JSONKey("to"))
    }
}

/// `PATCH /devices/{id}`: what the person did to the phone.
struct DeviceStateBody: APIRequestBody {
    static let fields = ["online", "locked", "landscape", "carPlay", "pairedMac"]
    var online: Bool?
    var locked: Bool?
    var landscape: Bool?
    var carPlay: Bool?
    var pairedMac: Bool?
}

/// `POST /clock/advance`.
struct ClockAdvanceBody: APIRequestBody {
    static let fields = ["seconds"]
    var seconds: Double

    init(from decoder: any Decoder) throws {
        let body = try decoder.container(keyedBy: JSONKey.self)
        seconds = try body.decode(Double.self, forKey: JSONKey("seconds"))
        guard seconds >= 0, seconds.isFinite else {
            throw DecodingError.dataCorruptedError(forKey: JSONKey("seconds"), in: body, debugDescription: "must be ≥ 0: time only moves forward")
        }
    }
}
