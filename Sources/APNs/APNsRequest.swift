import Foundation
import LiveActivityKit

/// One HTTP/2 request to APNs, fully formed except for the `authorization` header, which the
/// client adds when it sends. `--dry-run` prints exactly this.
public struct APNsRequest: Sendable, Hashable {
    public enum Service: Sendable, Hashable {
        /// Device and broadcast pushes.
        case push
        /// Channel management.
        case channelManagement
    }

    public enum Method: String, Sendable, Hashable {
        case get = "GET", post = "POST", delete = "DELETE"
    }

    public struct Header: Sendable, Hashable {
        public var name: String
        public var value: String
        /// Values that change with every request are kept out of the HPACK dynamic table, as
        /// Apple asks, so they do not evict the ones worth indexing.
        public var indexable: Bool

        public init(_ name: String, _ value: String, indexable: Bool = true) {
            self.name = name
            self.value = value
            self.indexable = indexable
        }
    }

    public var service: Service
    public var method: Method
    public var path: String
    /// Regular headers, without `authorization`.
    public var headers: [Header]
    public var body: [UInt8]?

    public init(service: Service, method: Method, path: String, headers: [Header], body: [UInt8]?) {
        self.service = service
        self.method = method
        self.path = path
        self.headers = headers
        self.body = body
    }

    /// The value of a header, if present.
    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// `apns-priority`, `apns-expiration`, `apns-collapse-id` and `apns-id` of a device push.
public struct PushOptions: Sendable, Hashable {
    /// Default 10, which is also what APNs assumes without the header.
    public var priority: APNsPriority
    /// `nil` leaves storage to APNs' default policy.
    public var expiration: APNsExpiration?
    public var collapseID: CollapseID?
    /// `nil` lets APNs make one; it is returned either way.
    public var apnsID: APNsMessageID?

    public init(priority: APNsPriority = .immediate, expiration: APNsExpiration? = nil, collapseID: CollapseID? = nil, apnsID: APNsMessageID? = nil) {
        self.priority = priority
        self.expiration = expiration
        self.collapseID = collapseID
        self.apnsID = apnsID
    }
}

/// The headers of a broadcast: expiration and priority are required by APNs.
public struct BroadcastOptions: Sendable, Hashable {
    public var priority: APNsPriority
    /// `.immediately` (0) is the only value a No-Message-Stored channel accepts.
    public var expiration: APNsExpiration
    public var requestID: APNsMessageID?

    public init(priority: APNsPriority, expiration: APNsExpiration, requestID: APNsMessageID? = nil) {
        self.priority = priority
        self.expiration = expiration
        self.requestID = requestID
    }
}

/// Whether APNs keeps the latest broadcast of a channel for devices that were offline.
public enum MessageStoragePolicy: Int, Sendable, Hashable, CaseIterable {
    /// Only online devices get a message; higher publishing budget (scores).
    case noMessageStored = 0
    /// The most recent message is kept up to 8 hours for offline devices (flights).
    case mostRecentMessageStored = 1
}

extension APNsRequest {
    /// `POST /3/device/<token>` with a validated Live Activity payload.
    public static func liveActivity(
        _ payload: LiveActivityPayload, to token: DeviceToken, topic: BundleID, options: PushOptions = .init()
    ) throws(LiveActivityValidationError) -> APNsRequest {
        try checkPriority(options, of: "a Live Activity device push")
        return liveActivity(encoded: try payload.encoded(for: .device), to: token, topic: topic, options: options)
    }

    /// `POST /3/device/<token>` with a body already validated and encoded for a device (a
    /// server's outbox keeps pushes in this form).
    public static func liveActivity(encoded body: [UInt8], to token: DeviceToken, topic: BundleID, options: PushOptions = .init()) -> APNsRequest {
        device(.liveActivity, body: body, to: token, topic: topic, options: options)
    }

    /// `POST /3/device/<token>` telling the app's widgets or controls their content changed
    /// (`apns-push-type: widgets` or `controls`, the topic with its suffix, Apple's one body).
    public static func reload(
        _ type: ReloadPushType, to token: DeviceToken, topic: BundleID, options: PushOptions = .init()
    ) throws(LiveActivityValidationError) -> APNsRequest {
        try checkPriority(options, of: "a \(type.rawValue) push")
        return device(type.pushType, body: ReloadPushType.body, to: token, topic: topic, options: options)
    }

    /// A device push of ours goes at 10 or 5: 1 (never wake the device) is for broadcasts.
    private static func checkPriority(_ options: PushOptions, of push: String) throws(LiveActivityValidationError) {
        guard options.priority != .low else {
            throw LiveActivityValidationError(field: "apns-priority", code: .invalidValue, message: "must be 10 or 5 for \(push), got 1")
        }
    }

    private static func device(_ type: APNsPushType, body: [UInt8], to token: DeviceToken, topic: BundleID, options: PushOptions) -> APNsRequest {
        var headers = [
            Header("apns-push-type", type.rawValue),
            Header("apns-topic", topic.topic(for: type)),
            Header("apns-priority", String(options.priority.rawValue)),
        ]
        if let expiration = options.expiration { headers.append(Header("apns-expiration", expiration.headerValue, indexable: false)) }
        if let collapseID = options.collapseID { headers.append(Header("apns-collapse-id", collapseID.value, indexable: false)) }
        if let apnsID = options.apnsID { headers.append(Header("apns-id", apnsID.description, indexable: false)) }
        headers.append(Header("content-type", "application/json"))
        return APNsRequest(service: .push, method: .post, path: "/3/device/\(token.hex)", headers: headers, body: body)
    }

    /// `POST /4/broadcasts/apps/<bundle>` to every activity subscribed to `channelID`.
    public static func broadcast(
        _ payload: LiveActivityPayload, channelID: String, bundleID: BundleID, options: BroadcastOptions
    ) throws(LiveActivityValidationError) -> APNsRequest {
        try validateChannelID(channelID, field: "apns-channel-id")
        return broadcast(encoded: try payload.encoded(for: .broadcast), channelID: channelID, bundleID: bundleID, options: options)
    }

    /// `POST /4/broadcasts/apps/<bundle>` with a body already validated and encoded for a broadcast.
    public static func broadcast(encoded body: [UInt8], channelID: String, bundleID: BundleID, options: BroadcastOptions) -> APNsRequest {
        var headers = [
            Header("apns-channel-id", channelID),
            Header("apns-push-type", "liveactivity"),
            Header("apns-expiration", options.expiration.headerValue, indexable: false),
            Header("apns-priority", String(options.priority.rawValue)),
        ]
        if let requestID = options.requestID { headers.append(Header("apns-request-id", requestID.description, indexable: false)) }
        headers.append(Header("content-type", "application/json"))
        return APNsRequest(service: .push, method: .post, path: "/4/broadcasts/apps/\(bundleID.value)", headers: headers, body: body)
    }

    /// `POST /1/apps/<bundle>/channels`: APNs answers 201 with the new id in `apns-channel-id`.
    public static func createChannel(bundleID: BundleID, storagePolicy: MessageStoragePolicy, requestID: APNsMessageID? = nil) -> APNsRequest {
        let body = JSONValue.object([
            ("message-storage-policy", .integer(storagePolicy.rawValue)),
            ("push-type", .string("LiveActivity")),
        ])
        return APNsRequest(
            service: .channelManagement, method: .post, path: "/1/apps/\(bundleID.value)/channels",
            headers: requestIDHeader(requestID) + [Header("content-type", "application/json")], body: body.serialized)
    }

    /// `GET /1/apps/<bundle>/channels` with `apns-channel-id`: the channel's configuration.
    public static func readChannel(_ channelID: String, bundleID: BundleID, requestID: APNsMessageID? = nil) throws(LiveActivityValidationError)
        -> APNsRequest
    {
        try validateChannelID(channelID, field: "apns-channel-id")
        return APNsRequest(
            service: .channelManagement, method: .get, path: "/1/apps/\(bundleID.value)/channels",
            headers: [Header("apns-channel-id", channelID)] + requestIDHeader(requestID), body: nil)
    }

    /// `DELETE /1/apps/<bundle>/channels` with `apns-channel-id`: APNs answers 204.
    public static func deleteChannel(_ channelID: String, bundleID: BundleID, requestID: APNsMessageID? = nil) throws(LiveActivityValidationError)
        -> APNsRequest
    {
        try validateChannelID(channelID, field: "apns-channel-id")
        return APNsRequest(
            service: .channelManagement, method: .delete, path: "/1/apps/\(bundleID.value)/channels",
            headers: [Header("apns-channel-id", channelID)] + requestIDHeader(requestID), body: nil)
    }

    /// `GET /1/apps/<bundle>/all-channels`: every channel id of the app in this environment.
    public static func listChannels(bundleID: BundleID, requestID: APNsMessageID? = nil) -> APNsRequest {
        APNsRequest(
            service: .channelManagement, method: .get, path: "/1/apps/\(bundleID.value)/all-channels",
            headers: requestIDHeader(requestID), body: nil)
    }

    private static func requestIDHeader(_ id: APNsMessageID?) -> [Header] {
        id.map { [Header("apns-request-id", $0.description, indexable: false)] } ?? []
    }
}

extension APNsRequest {
    /// Every header field in the order it is sent: pseudo-headers, `authorization`, the rest.
    func headerFields(authority: String, authorization: String) -> [Header] {
        [
            Header(":method", method.rawValue),
            Header(":scheme", "https"),
            Header(":authority", authority),
            Header(":path", path, indexable: false),
            Header("authorization", "bearer \(authorization)"),
        ] + headers
    }

    /// The request as it goes on the wire, the provider token elided: one `name: value` line per
    /// header field, a blank line, the body.
    public func rendered(in environment: APNsHosts) -> String {
        let endpoint = service == .push ? environment.push : environment.channelManagement
        var lines = headerFields(authority: endpoint.authority, authorization: "<provider token elided>")
            .map { "\($0.name): \($0.value)" }
        if let body {
            lines.append("")
            lines.append(String(decoding: body, as: UTF8.self))
        }
        return lines.joined(separator: "\n")
    }
}

extension APNsRequest {
    /// Why HTTP/2 would call this request malformed (RFC 9113 §8.2.1), APNs then resetting its
    /// stream; nil when it is well formed. The client checks this once per request, over its
    /// bytes, before its own HTTP/2 encodes it (`NIOHTTP2Handler`'s check of every header block
    /// took a tenth of the client's time per push).
    public var malformation: LiveActivityValidationError? {
        guard path.utf8.first == UInt8(ascii: "/"), path.allBytes({ $0 > 0x20 && $0 < 0x7F }) else {
            return LiveActivityValidationError(
                field: ":path", code: .invalidValue, message: "must start with / and hold only visible ASCII characters, got \(path.debugDescription)"
            )
        }
        for header in headers {
            guard !header.name.isEmpty, header.name.allBytes(Self.isLowercaseTokenCharacter) else {
                return LiveActivityValidationError(
                    field: header.name, code: .invalidValue,
                    message: "is not a header name HTTP/2 allows: lowercase letters, digits and !#$%&'*+-.^_`|~ only")
            }
            if Self.isConnectionSpecific(header) {
                return LiveActivityValidationError(
                    field: header.name, code: .notAllowed,
                    message: "is a connection-specific header, which HTTP/2 does not carry (te only as \"trailers\")")
            }
            let value = header.value.utf8
            guard header.value.allBytes({ $0 != 0 && $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }),
                !(value.first?.isHTTPBlank ?? false), !(value.last?.isHTTPBlank ?? false)
            else {
                return LiveActivityValidationError(
                    field: header.name, code: .invalidValue,
                    message: "has a value HTTP/2 does not allow: no NUL, CR or LF, and no space or tab at either end")
            }
        }
        return nil
    }

    /// RFC 9113 §8.2.2: HTTP/1.1's hop-by-hop headers have no place in HTTP/2.
    private static func isConnectionSpecific(_ header: Header) -> Bool {
        switch header.name {
        case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade": true
        case "te": header.value != "trailers"
        default: false
        }
    }

    /// RFC 9110's `tchar`, upper-case letters excluded (HTTP/2 field names are lowercase).
    private static func isLowercaseTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
        case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"), UInt8(ascii: "&"), UInt8(ascii: "'"),
            UInt8(ascii: "*"), UInt8(ascii: "+"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
            UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
            true
        default: false
        }
    }
}

extension String {
    /// Whether every UTF-8 byte passes `rule`: over the string's contiguous storage when it has
    /// some, without the `UTF8View` iterator's work per byte.
    fileprivate func allBytes(_ rule: (UInt8) -> Bool) -> Bool {
        utf8.withContiguousStorageIfAvailable { $0.allSatisfy(rule) } ?? utf8.allSatisfy(rule)
    }
}

extension UInt8 {
    /// A space or a tab: the optional whitespace HTTP allows around a field value (RFC 9110 §5.6.3).
    package var isHTTPBlank: Bool { self == UInt8(ascii: " ") || self == UInt8(ascii: "\t") }
}

/// `Authorization: Bearer <credential>`, as APNs' provider tokens and LiveRelay's API keys are sent.
package enum BearerAuthorization {
    private static let scheme = Array("bearer ".utf8)

    /// The credential of `bearer <credential>` (the scheme in any case), without the spaces and
    /// tabs HTTP allows around it; nil when there is none. Read as bytes: this runs for every push
    /// the emulator takes and every API request, and Foundation's lowercasing and trimming took a
    /// sixth of the emulator's time.
    package static func credential(_ authorization: String) -> String? {
        let bytes = authorization.utf8
        guard bytes.count > scheme.count,
            zip(bytes, scheme).allSatisfy({ byte, expected in byte == expected || (expected != UInt8(ascii: " ") && byte | 0x20 == expected) })
        else { return nil }
        let credential = bytes.dropFirst(scheme.count).drop(while: \.isHTTPBlank)
        guard let last = credential.lastIndex(where: { !$0.isHTTPBlank }) else { return nil }
        return String(Substring(credential[...last]))
    }
}
