import Foundation

/// The JSON body of an APNs Live Activity push: `{"aps": {...}}` plus any custom keys beside
/// `aps`. Built from typed values (`start`, `update`, `end`) or taken from raw JSON
/// (`init(parsing:)`), which is kept exactly as given. Call `encoded(for:)` to validate and get
/// the bytes to send.
public struct LiveActivityPayload: Sendable, Hashable {
    public enum Event: String, Sendable, Hashable, CaseIterable, Codable {
        case start, update, end
    }

    /// Where the payload goes; the rules and size limits differ.
    public enum Destination: Sendable, Hashable {
        /// `/3/device/<token>`: an update token or a push-to-start token. At most 4096 bytes.
        case device
        /// `/4/broadcasts/apps/<bundle>`: every activity subscribed to a channel. At most 5120
        /// bytes; cannot start an activity.
        case broadcast

        public var maximumPayloadSize: Int {
            switch self {
            case .device: 4096
            case .broadcast: 5120
            }
        }
    }

    /// The whole document.
    public var json: JSONValue

    /// Takes a document as it is; nothing is checked until `validate(for:)` or `encoded(for:)`.
    public init(json: JSONValue) {
        self.json = json
    }

    /// Parses raw JSON. Every value, number literal and key order is kept.
    public init(parsing data: some Collection<UInt8>) throws(LiveActivityValidationError) {
        do {
            self.json = try JSONValue(parsing: data)
        } catch {
            throw LiveActivityValidationError(field: "payload", code: .invalidJSON, message: error.description)
        }
    }

    /// The `aps` dictionary, if present.
    public var aps: JSONValue? { json["aps"] }

    /// The `aps.event`, if present and known.
    public var event: Event? { aps?["event"]?.stringValue.flatMap(Event.init(rawValue:)) }

    /// Validates for `destination` and returns the exact bytes to send.
    public func encoded(for destination: Destination) throws(LiveActivityValidationError) -> [UInt8] {
        try validate(for: destination)
        let bytes = json.serialized
        guard bytes.count <= destination.maximumPayloadSize else {
            throw LiveActivityValidationError(
                field: "payload", code: .tooLarge,
                message:
                    "is \(bytes.count) bytes; APNs accepts at most \(destination.maximumPayloadSize) bytes for a \(destination == .device ? "device push" : "broadcast") (413 PayloadTooLarge)"
            )
        }
        return bytes
    }
}

// MARK: - Building from values

extension LiveActivityPayload {
    /// The `aps` fields of a Live Activity push, as JSON-ready values. The typed builders and
    /// the command line both go through this, so there is one encoder of `aps`.
    public struct Fields: Sendable {
        public var event: Event
        /// Encoded as UNIX seconds; the device ignores a push not newer than the last it applied.
        public var timestamp: Date
        public var contentState: JSONValue?
        public var staleDate: Date?
        /// Only on `end`: `.default` omits `dismissal-date`, `.immediate` sends 0 (a past date),
        /// `.after(date)` sends the date.
        public var dismissalPolicy: ActivityUIDismissalPolicy
        public var relevanceScore: Double?
        public var alert: AlertConfiguration?
        public var attributesType: String?
        public var attributes: JSONValue?
        /// Start only (iOS 18): `.token` asks for an update token (`input-push-token: 1`);
        /// `.channel(id)` subscribes the new activity to a broadcast channel.
        public var inputPush: InputPush?
        /// Custom keys beside `aps` (ActivityKit ignores them; your app may read them).
        public var customKeys: JSONValue.Members

        public init(
            event: Event, timestamp: Date, contentState: JSONValue? = nil, staleDate: Date? = nil,
            dismissalPolicy: ActivityUIDismissalPolicy = .default, relevanceScore: Double? = nil,
            alert: AlertConfiguration? = nil, attributesType: String? = nil, attributes: JSONValue? = nil,
            inputPush: InputPush? = nil, customKeys: JSONValue.Members = []
        ) {
            self.event = event
            self.timestamp = timestamp
            self.contentState = contentState
            self.staleDate = staleDate
            self.dismissalPolicy = dismissalPolicy
            self.relevanceScore = relevanceScore
            self.alert = alert
            self.attributesType = attributesType
            self.attributes = attributes
            self.inputPush = inputPush
            self.customKeys = customKeys
        }
    }

    /// How a push-started activity is to receive its updates (the start's `input-push-token` or
    /// `input-push-channel`): what ActivityKit's `PushType` is on the device.
    public enum InputPush: Sendable, Hashable {
        /// Its own update token.
        case token
        /// A broadcast channel (iOS 18), by its base64 channel id.
        case channel(String)
    }

    /// Encodes `fields` into a document, `aps` keys in the order of Apple's key table. A
    /// non-finite relevance score has no JSON form: callers check it first (`checkRelevance`).
    public init(_ fields: Fields) {
        var aps: JSONValue.Members = [
            ("timestamp", .integer(unixSeconds(fields.timestamp))),
            ("event", .string(fields.event.rawValue)),
        ]
        if let contentState = fields.contentState { aps.append(("content-state", contentState)) }
        if let staleDate = fields.staleDate { aps.append(("stale-date", .integer(unixSeconds(staleDate)))) }
        switch fields.dismissalPolicy {
        case .default: break
        case .immediate: aps.append(("dismissal-date", .integer(0)))
        case .after(let date): aps.append(("dismissal-date", .integer(unixSeconds(date))))
        }
        if let score = fields.relevanceScore, let number = JSONValue.double(score) {
            aps.append(("relevance-score", number))
        }
        if let alert = fields.alert { aps.append(("alert", alert.payloadJSON)) }
        if let type = fields.attributesType { aps.append(("attributes-type", .string(type))) }
        if let attributes = fields.attributes { aps.append(("attributes", attributes)) }
        switch fields.inputPush {
        case nil: break
        case .token: aps.append(("input-push-token", .integer(1)))
        case .channel(let id): aps.append(("input-push-channel", .string(id)))
        }
        self.init(json: .object([("aps", .object(aps))] + fields.customKeys))
    }

    /// `event: start` for a push-to-start token: the attributes, the first content and the alert
    /// the system requires. `attributesType` defaults to the Swift type's name, which is what
    /// ActivityKit matches against the app's widget extension.
    public static func start<Attributes: ActivityAttributes>(
        attributes: Attributes,
        content: ActivityContent<Attributes.ContentState>,
        alert: AlertConfiguration,
        timestamp: Date,
        attributesType: String = String(describing: Attributes.self),
        inputPush: InputPush? = nil
    ) throws -> LiveActivityPayload {
        try checkRelevance(content.relevanceScore)
        return LiveActivityPayload(
            Fields(
                event: .start, timestamp: timestamp, contentState: try JSONValue(encoding: content.state),
                staleDate: content.staleDate, relevanceScore: content.sentRelevanceScore, alert: alert,
                attributesType: attributesType, attributes: try JSONValue(encoding: attributes), inputPush: inputPush
            ))
    }

    /// `event: update` with new content, optionally alerting.
    public static func update<State: Codable & Hashable>(
        content: ActivityContent<State>, alert: AlertConfiguration? = nil, timestamp: Date
    ) throws -> LiveActivityPayload {
        try checkRelevance(content.relevanceScore)
        return LiveActivityPayload(
            Fields(
                event: .update, timestamp: timestamp, contentState: try JSONValue(encoding: content.state),
                staleDate: content.staleDate, relevanceScore: content.sentRelevanceScore, alert: alert
            ))
    }

    /// `event: end`, with the final content (without it the activity keeps its last content)
    /// and when to leave the Lock Screen.
    public static func end<State: Codable & Hashable>(
        content: ActivityContent<State>?, dismissalPolicy: ActivityUIDismissalPolicy = .default,
        alert: AlertConfiguration? = nil, timestamp: Date
    ) throws -> LiveActivityPayload {
        if let content { try checkRelevance(content.relevanceScore) }
        return LiveActivityPayload(
            Fields(
                event: .end, timestamp: timestamp, contentState: try content.map { try JSONValue(encoding: $0.state) },
                staleDate: content?.staleDate, dismissalPolicy: dismissalPolicy,
                relevanceScore: content?.sentRelevanceScore, alert: alert
            ))
    }

    public static func checkRelevance(_ score: Double) throws(LiveActivityValidationError) {
        guard score.isFinite else {
            throw LiveActivityValidationError(
                field: "aps.relevance-score", code: .invalidValue, message: "must be a finite number, got \(score)")
        }
    }
}

extension ActivityContent {
    /// 0 is ActivityKit's default, so it is left out of the payload, as in Apple's examples.
    fileprivate var sentRelevanceScore: Double? { relevanceScore == 0 ? nil : relevanceScore }
}

extension AlertConfiguration {
    /// The `aps.alert` dictionary: literal text as strings, localised text in Apple's nested
    /// `{"loc-key", "loc-args"}` form.
    public var payloadJSON: JSONValue {
        func text(_ text: Text) -> JSONValue {
            switch text {
            case .literal(let s): .string(s)
            case .localized(let key, let arguments):
                .object([("loc-key", .string(key)), ("loc-args", .array(arguments.map(JSONValue.string)))])
            }
        }
        var members: JSONValue.Members = [("title", text(title)), ("body", text(body))]
        if let sound { members.append(("sound", .string(sound.payloadValue))) }
        return .object(members)
    }
}
