import Foundation
import LiveActivityKit
import LiveRelayStore

/// The priority asked for a push: a fixed one, or `auto` (the budget governor decides).
public enum PriorityChoice: Sendable, Hashable {
    case fixed(Int)
    case auto

    static func read(_ body: JSONBodyReader, default fallback: PriorityChoice) throws -> PriorityChoice {
        guard let value = body.value("priority") else { return fallback }
        if value.stringValue == "auto" { return .auto }
        if case .number = value, let number = value.doubleValue, number == 10 || number == 5 { return .fixed(Int(number)) }
        throw JSONFieldError.invalid(body.field("priority"), "must be 10, 5 or \"auto\"")
    }
}

/// Where a start's activities take their updates from.
public enum UpdateChannelChoice: Sendable, Hashable {
    /// A new broadcast channel with this message storage policy (0 or 1).
    case create(storagePolicy: Int)
    /// A channel that already exists.
    case existing(String)
}

/// `POST /v1/activities/{key}/start`.
public struct StartRequest: Sendable, Hashable {
    public static let fields = [
        "attributesType", "attributes", "contentState", "alert", "staleDate", "relevanceScore", "audience", "channel", "priority",
        "expiration", "at",
    ]

    public var attributesType: String
    public var attributes: JSONValue
    public var contentState: JSONValue
    public var alert: AlertConfiguration
    public var staleDate: Date?
    public var relevanceScore: Double?
    public var audience: Audience
    /// nil: each device gets its own update token (`input-push-token`).
    public var channel: UpdateChannelChoice?
    public var priority: PriorityChoice
    public var expiration: Date?
    /// When to run it; nil or past: now.
    public var at: Date?

    public init(json: JSONValue) throws {
        let body = try JSONBodyReader(json, fields: Self.fields)
        attributesType = try body.requireString("attributesType")
        attributes = try requireObject(body, "attributes")
        contentState = try requireObject(body, "contentState")
        guard let alertBody = try body.object("alert", fields: AlertConfiguration.fields) else {
            throw JSONFieldError(code: "missing", message: "is required: a push-to-start without an alert is dropped by the device", field: "alert")
        }
        alert = try AlertConfiguration(alertBody)
        staleDate = try body.date("staleDate")
        relevanceScore = try readRelevance(body)
        guard let audienceBody = try body.object("audience", fields: ["devices", "users", "everyone"]) else {
            throw JSONFieldError(code: "missing", message: "is required: {\"devices\": [ids]}, {\"users\": [ids]} or {\"everyone\": true}", field: "audience")
        }
        audience = try readAudience(audienceBody)
        if let channel = try body.object("channel", fields: ["id", "storagePolicy"]) {
            if let id = try channel.string("id") {
                self.channel = .existing(id)
            } else {
                let policy = try channel.number("storagePolicy") ?? 1
                guard policy == 0 || policy == 1 else {
                    throw JSONFieldError.invalid(channel.field("storagePolicy"), "must be 0 (No Message Stored) or 1 (Most Recent Message Stored)")
                }
                self.channel = .create(storagePolicy: Int(policy))
            }
        }
        priority = try PriorityChoice.read(body, default: .fixed(10))
        expiration = try body.date("expiration")
        at = try body.date("at")
    }
}

/// `POST /v1/activities/{key}/update` and `…/end`.
public struct ChangeRequest: Sendable, Hashable {
    public static let updateFields = ["contentState", "alert", "staleDate", "relevanceScore", "priority", "expiration", "at"]
    public static let endFields = updateFields + ["dismissalDate"]

    public var event: LiveActivityPayload.Event
    /// Required on update; an end without it repeats the last content.
    public var contentState: JSONValue?
    public var alert: AlertConfiguration?
    public var staleDate: Date?
    public var relevanceScore: Double?
    /// End only: when the ended activity leaves the Lock Screen (now or earlier: at once).
    public var dismissalDate: Date?
    public var priority: PriorityChoice
    public var expiration: Date?
    public var at: Date?

    public init(event: LiveActivityPayload.Event, json: JSONValue) throws {
        let body = try JSONBodyReader(json, fields: event == .end ? Self.endFields : Self.updateFields)
        self.event = event
        if event == .update {
            contentState = try requireObject(body, "contentState")
        } else if body.value("contentState") != nil {
            contentState = try requireObject(body, "contentState")
        }
        alert = try body.object("alert", fields: AlertConfiguration.fields).map { try AlertConfiguration($0) }
        staleDate = try body.date("staleDate")
        relevanceScore = try readRelevance(body)
        dismissalDate = try body.date("dismissalDate")
        priority = try PriorityChoice.read(body, default: .auto)
        expiration = try body.date("expiration")
        at = try body.date("at")
    }
}

/// `POST /v1/push-to-start-tokens` (client key).
public struct PushToStartRegistration: Sendable, Hashable {
    public static let fields = ["deviceID", "bundleID", "attributesType", "token", "frequentPushesEnabled", "environment", "userID"]

    public var deviceID: String
    public var bundleID: String
    public var attributesType: String
    public var token: DeviceToken
    public var frequentPushesEnabled: Bool
    public var environment: String
    public var userID: String?

    public init(json: JSONValue) throws {
        let body = try JSONBodyReader(json, fields: Self.fields)
        deviceID = try body.requireString("deviceID")
        bundleID = try body.requireString("bundleID")
        attributesType = try body.requireString("attributesType")
        token = try readToken(body)
        frequentPushesEnabled = try body.bool("frequentPushesEnabled") ?? false
        environment = try readEnvironment(body)
        userID = try body.string("userID")
    }
}

/// `POST /v1/activities/{key}/tokens` (client key).
public struct ActivityTokenRegistration: Sendable, Hashable {
    public static let fields = ["deviceID", "bundleID", "activityID", "attributesType", "token", "frequentPushesEnabled", "environment"]

    public var deviceID: String
    public var bundleID: String
    public var activityID: String?
    public var attributesType: String
    public var token: DeviceToken
    public var frequentPushesEnabled: Bool
    public var environment: String

    public init(json: JSONValue) throws {
        let body = try JSONBodyReader(json, fields: Self.fields)
        deviceID = try body.requireString("deviceID")
        bundleID = try body.requireString("bundleID")
        activityID = try body.string("activityID")
        attributesType = try body.requireString("attributesType")
        token = try readToken(body)
        frequentPushesEnabled = try body.bool("frequentPushesEnabled") ?? false
        environment = try readEnvironment(body)
    }
}

/// `POST /v1/activities/{key}/ended` (client key): the activity ended or the person dismissed it.
public struct EndedReport: Sendable, Hashable {
    public static let fields = ["deviceID", "bundleID", "activityID", "state", "cause", "at"]

    public var deviceID: String
    public var bundleID: String
    /// The device's id of the activity, when the app gives it.
    public var activityID: String?
    public var state: ActivityTokenState
    public var cause: String?
    public var at: Date?

    public init(json: JSONValue) throws {
        let body = try JSONBodyReader(json, fields: Self.fields)
        deviceID = try body.requireString("deviceID")
        bundleID = try body.requireString("bundleID")
        activityID = try body.string("activityID")
        switch try body.requireString("state") {
        case "ended": state = .ended
        case "dismissed": state = .dismissed
        default: throw JSONFieldError.invalid("state", "must be \"ended\" or \"dismissed\"")
        }
        cause = try body.string("cause")
        at = try body.date("at")
    }
}

// MARK: Field readers

extension AlertConfiguration {
    static let fields = ["title", "body", "sound"]

    /// `{"title": "…", "body": "…", "sound": "default" | "<file>" | null}`; title and body are
    /// literal text or `{"key": "…", "arguments": […]}` for the app's localisation files.
    init(_ body: JSONBodyReader) throws {
        func text(_ name: String) throws -> AlertConfiguration.Text {
            let value = try body.require(name)
            if let literal = value.stringValue { return .literal(literal) }
            let localized = try JSONBodyReader(value, path: body.field(name), fields: ["key", "arguments"])
            let arguments = try localized.value("arguments").map { value in
                guard let items = value.arrayElements?.compactMap(\.stringValue), items.count == value.arrayElements?.count else {
                    throw JSONFieldError.invalid(localized.field("arguments"), "must be an array of strings")
                }
                return items
            }
            return .localized(key: try localized.requireString("key"), arguments: arguments ?? [])
        }
        let sound = try body.string("sound")
        self.init(title: try text("title"), body: try text("body"), sound: sound.map { $0 == "default" ? .default : .named($0) })
    }
}

private func requireObject(_ body: JSONBodyReader, _ key: String) throws -> JSONValue {
    let value = try body.require(key)
    guard case .object = value else {
        throw JSONFieldError(code: "wrong_type", message: "must be a JSON object, got \(value.typeName)", field: body.field(key))
    }
    return value
}

private func readRelevance(_ body: JSONBodyReader) throws -> Double? {
    guard let score = try body.number("relevanceScore") else { return nil }
    do { try LiveActivityPayload.checkRelevance(score) } catch { throw JSONFieldError.invalid(body.field("relevanceScore"), error.message) }
    return score
}

private func readAudience(_ body: JSONBodyReader) throws -> Audience {
    func ids(_ key: String) throws -> [String]? {
        guard let value = body.value(key) else { return nil }
        guard let items = value.arrayElements, let strings = Optional(items.compactMap(\.stringValue)), strings.count == items.count,
              !strings.isEmpty, strings.allSatisfy({ !$0.isEmpty })
        else { throw JSONFieldError.invalid(body.field(key), "must be a non-empty array of non-empty strings") }
        return strings
    }
    let devices = try ids("devices"), users = try ids("users"), everyone = try body.bool("everyone")
    switch (devices, users, everyone) {
    case (let devices?, nil, nil): return .devices(devices)
    case (nil, let users?, nil): return .users(users)
    case (nil, nil, true): return .everyone
    default: throw JSONFieldError.invalid(body.path, "must have exactly one of devices, users or \"everyone\": true")
    }
}

private func readToken(_ body: JSONBodyReader) throws -> DeviceToken {
    let text = try body.requireString("token")
    do { return try DeviceToken(text) } catch { throw JSONFieldError.invalid(body.field("token"), error.message) }
}

private func readEnvironment(_ body: JSONBodyReader) throws -> String {
    let environment = try body.string("environment") ?? "sandbox"
    guard environment == "sandbox" || environment == "production" else {
        throw JSONFieldError.invalid(body.field("environment"), "must be \"sandbox\" or \"production\"")
    }
    return environment
}
