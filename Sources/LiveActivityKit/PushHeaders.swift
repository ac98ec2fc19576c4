import Foundation

/// A device token as APNs takes it in `/3/device/<token>`: hexadecimal of any even length
/// (Live Activity update and push-to-start tokens are usually 80 bytes, 160 characters; legacy
/// device tokens 64). Kept lowercase, the form apps print with `%02x`.
public struct DeviceToken: Sendable, Hashable, CustomStringConvertible {
    public let hex: String

    public init(_ hex: String) throws(LiveActivityValidationError) {
        // Tokens read back from storage are already clean: skip Foundation's trimming (costly at
        // a push's scale) when there is nothing to trim.
        let clean = hex.utf8.first?.isHexDigit == true && hex.utf8.last?.isHexDigit == true
        let trimmed = clean ? hex : hex.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else {
            throw LiveActivityValidationError(field: "token", code: .missing, message: "is empty")
        }
        guard trimmed.utf8.allSatisfy(\.isHexDigit) else {
            throw LiveActivityValidationError(
                field: "token", code: .invalidValue,
                message: "must be hexadecimal (0-9, a-f), as the app renders the token bytes with %02x")
        }
        guard trimmed.utf8.count.isMultiple(of: 2) else {
            throw LiveActivityValidationError(
                field: "token", code: .invalidValue,
                message: "has \(trimmed.utf8.count) hex characters; a whole number of bytes needs an even count")
        }
        self.hex = trimmed.utf8.contains { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "F") } ? trimmed.lowercased() : trimmed
    }

    /// The token bytes as ActivityKit hands them to the app (`pushTokenUpdates` yields `Data`).
    public init(data: Data) {
        hex = data.map { String(format: "%02x", $0) }.joined()
    }

    public var data: Data {
        var bytes = Data(capacity: hex.utf8.count / 2)
        var iterator = hex.utf8.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            bytes.append(UInt8(Self.nibble(high) << 4 | Self.nibble(low)))
        }
        return bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8 {
        digit <= UInt8(ascii: "9") ? digit - UInt8(ascii: "0") : digit - UInt8(ascii: "a") + 10
    }

    /// `abcd1234…9f8e`: enough to recognise a token in a log without writing it out.
    public var shortened: String { Self.shortened(hex) }

    /// The same for a token kept as text (a store's column). Counted in UTF-8 bytes, not
    /// characters: a token is hex, and a listing shortens thousands.
    public static func shortened(_ hex: String) -> String {
        let bytes = hex.utf8
        guard bytes.count > 16 else { return hex }
        return String(decoding: bytes.prefix(8), as: UTF8.self) + "…" + String(decoding: bytes.suffix(4), as: UTF8.self)
    }

    public var description: String { shortened }
}

extension UInt8 {
    fileprivate var isHexDigit: Bool {
        (0x30...0x39).contains(self) || (0x61...0x66).contains(self) || (0x41...0x46).contains(self)
    }
}

/// `apns-priority`: 10 delivers now and counts against the activity's budget; 5 is delivered
/// opportunistically and does not; 1 (broadcasts only) never wakes the device.
public enum APNsPriority: Int, Sendable, Hashable, CaseIterable, Codable {
    case immediate = 10
    case powerConsiderate = 5
    case low = 1

    public init(value: Int, for destination: LiveActivityPayload.Destination) throws(LiveActivityValidationError) {
        let allowed: [APNsPriority] = destination == .device ? [.immediate, .powerConsiderate] : APNsPriority.allCases
        guard let priority = APNsPriority(rawValue: value), allowed.contains(priority) else {
            let list = allowed.map { String($0.rawValue) }.joined(separator: ", ")
            throw LiveActivityValidationError(
                field: "apns-priority", code: .invalidValue,
                message: "must be one of \(list) for a \(destination == .device ? "device push" : "broadcast"), got \(value)")
        }
        self = priority
    }
}

/// `apns-expiration`: an absolute time until which APNs stores and retries the push, or
/// `immediately` (0): one attempt, nothing stored.
public enum APNsExpiration: Sendable, Hashable {
    case immediately
    case at(Date)

    /// From the header's UNIX seconds. Small numbers are refused: `300` means
    /// 1970-01-01T00:05:00Z, already expired, not "in five minutes".
    public init(unixSeconds: Int64) throws(LiveActivityValidationError) {
        if unixSeconds == 0 {
            self = .immediately
            return
        }
        guard unixSeconds > 0 else {
            throw LiveActivityValidationError(
                field: "apns-expiration", code: .invalidValue, message: "must be 0 or UNIX seconds, got \(unixSeconds)")
        }
        do {
            try LiveActivityPayload.checkPlausibleUnixSeconds(Double(unixSeconds), field: "apns-expiration")
        } catch {
            throw LiveActivityValidationError(
                field: "apns-expiration", code: .invalidValue,
                message:
                    "must be an absolute UNIX time or 0, got \(unixSeconds) (\(unixSeconds) seconds after 1970 has long passed; use now + interval)")
        }
        self = .at(Date(timeIntervalSince1970: TimeInterval(unixSeconds)))
    }

    /// The header value.
    public var headerValue: String {
        switch self {
        case .immediately: "0"
        case .at(let date): String(unixSeconds(date))
        }
    }
}

/// `apns-collapse-id`: at most 64 bytes of UTF-8.
public struct CollapseID: Sendable, Hashable {
    public let value: String

    public init(_ value: String) throws(LiveActivityValidationError) {
        guard !value.isEmpty else {
            throw LiveActivityValidationError(field: "apns-collapse-id", code: .invalidValue, message: "must not be empty")
        }
        guard value.utf8.count <= 64 else {
            throw LiveActivityValidationError(
                field: "apns-collapse-id", code: .tooLarge,
                message: "is \(value.utf8.count) bytes; APNs accepts at most 64 (400 BadCollapseId)")
        }
        self.value = value
    }
}

/// An app's bundle id, the base of the `apns-topic` of its Live Activity, widget and control pushes.
public struct BundleID: Sendable, Hashable, CustomStringConvertible {
    /// The suffix APNs requires on the topic of a Live Activity push.
    public static let liveActivityTopicSuffix = APNsPushType.liveActivity.topicSuffix

    public let value: String

    public init(_ value: String) throws(LiveActivityValidationError) {
        guard !value.isEmpty else {
            throw LiveActivityValidationError(field: "bundle-id", code: .missing, message: "is empty")
        }
        if let suffix = APNsPushType.allCases.map(\.topicSuffix).first(where: value.hasSuffix) {
            throw LiveActivityValidationError(
                field: "bundle-id", code: .invalidValue,
                message: "must be the plain bundle id; \"\(suffix)\" is added for you (give \"\(value.dropLast(suffix.count))\")")
        }
        // Bytes, not a `CharacterSet`: Foundation builds one's bitmap at every call, and the
        // dispatcher reads the bundle id of every push it sends.
        let isAllowed = { (byte: UInt8) in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "."), UInt8(ascii: "-"), UInt8(ascii: "_"):
                true
            default: false
            }
        }
        guard value.utf8.allSatisfy(isAllowed) else {
            throw LiveActivityValidationError(
                field: "bundle-id", code: .invalidValue,
                message: "may contain only letters, digits, '.', '-' and '_', got \"\(value)\"")
        }
        self.value = value
    }

    /// `apns-topic` of the app's Live Activity pushes.
    public var liveActivityTopic: String { topic(for: .liveActivity) }

    /// `apns-topic` of the app's pushes of a type.
    public func topic(for type: APNsPushType) -> String { value + type.topicSuffix }

    public var description: String { value }
}

/// `apns-id` / `apns-request-id`: a UUID in canonical lowercase form.
public struct APNsMessageID: Sendable, Hashable, CustomStringConvertible {
    public let uuid: UUID

    public init(_ uuid: UUID = UUID()) { self.uuid = uuid }

    public init(_ string: String, field: String = "apns-id") throws(LiveActivityValidationError) {
        guard string.utf8.count == 36, let uuid = UUID(uuidString: string) else {
            throw LiveActivityValidationError(
                field: field, code: .invalidValue,
                message: "must be a UUID like 123e4567-e89b-12d3-a456-426614174000, got \"\(string)\"")
        }
        self.uuid = uuid
    }

    /// `8-4-4-4-12` lowercase, as APNs documents.
    public var description: String { uuid.uuidString.lowercased() }
}
