import Foundation
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// The API's format of requests and answers: a scheduled request waits in the store as the body
/// this API reads (dates as seconds since 1970, so none loses a fraction); an accepted request's
/// answer, fresh or replayed for its idempotency key, is rendered from what it did by `answer`.
public struct RelayWire: RelayWireFormat {
    public init() {}

    public func json(of request: ScheduledRequest) -> JSONValue {
        var members: JSONValue.Members = []
        func add(_ name: String, _ value: JSONValue?) { if let value { members.append((name, value)) } }
        switch request {
        case .start(let start):
            add("attributesType", .string(start.attributesType))
            add("attributes", start.attributes)
            add("contentState", start.contentState)
            add("alert", Self.json(of: start.alert))
            add("staleDate", start.staleDate.map(Self.seconds))
            add("relevanceScore", start.relevanceScore.flatMap(JSONValue.double))
            add("audience", Self.json(of: start.audience))
            switch start.channel {
            case nil: break
            case .existing(let id): add("channel", .object([("id", .string(id))]))
            case .create(let policy): add("channel", .object([("storagePolicy", .integer(policy))]))
            }
            add("priority", Self.json(of: start.priority))
            add("expiration", start.expiration.map(Self.seconds))
            add("at", start.at.map(Self.seconds))
        case .change(let change):
            add("contentState", change.contentState)
            add("alert", change.alert.map(Self.json))
            add("staleDate", change.staleDate.map(Self.seconds))
            add("relevanceScore", change.relevanceScore.flatMap(JSONValue.double))
            add("dismissalDate", change.dismissalDate.map(Self.seconds))
            add("priority", Self.json(of: change.priority))
            add("expiration", change.expiration.map(Self.seconds))
            add("at", change.at.map(Self.seconds))
        }
        return .object(members)
    }

    public func request(action: LiveActivityPayload.Event, json: JSONValue) throws -> ScheduledRequest {
        switch action {
        case .start: .start(try StartRequest(json: json))
        case .update, .end: .change(try ChangeRequest(event: action, json: json))
        }
    }

    /// The HTTP answer to an accepted request: `201` for a start, `200` for an update or end, `202`
    /// for a schedule, with the body the API document describes.
    public func answer(_ accepted: AcceptedRequest) -> (status: Int, body: JSONValue) {
        switch accepted {
        case .accepted(let acceptance): (acceptance.action == .start ? 201 : 200, RelayView.json(acceptance))
        case .scheduled(let schedule): (202, RelayView.json(schedule))
        }
    }

    private static func seconds(_ date: Date) -> JSONValue { .number(String(date.timeIntervalSince1970)) }

    private static func json(of alert: AlertConfiguration) -> JSONValue {
        func text(_ text: AlertConfiguration.Text) -> JSONValue {
            switch text {
            case .literal(let literal): .string(literal)
            case .localized(let key, let arguments): .object([("key", .string(key)), ("arguments", .array(arguments.map(JSONValue.string)))])
            }
        }
        var members: JSONValue.Members = [("title", text(alert.title)), ("body", text(alert.body))]
        if let sound = alert.sound { members.append(("sound", .string(sound.payloadValue))) }
        return .object(members)
    }

    private static func json(of audience: Audience) -> JSONValue {
        switch audience {
        case .devices(let ids): .object([("devices", .array(ids.map(JSONValue.string)))])
        case .users(let ids): .object([("users", .array(ids.map(JSONValue.string)))])
        case .everyone: .object([("everyone", .bool(true))])
        }
    }

    private static func json(of priority: PriorityChoice) -> JSONValue {
        switch priority {
        case .fixed(let value): .integer(value.rawValue)
        case .auto: .string("auto")
        }
    }
}
