import Foundation
import LiveActivityKit
import NIOCore

/// An HTTP/2 answer as it came off the wire.
public struct APNsRawResponse: Sendable {
    public var status: Int
    /// Regular headers (not pseudo-headers), names lowercase.
    public var headers: [(name: String, value: String)]
    public var body: ByteBuffer?
    /// From the request's first frame handed to HTTP/2 to its answer read off the connection: the
    /// distance to APNs and APNs' own time, without the waits in this process before and after
    /// (nil for an answer not read off a connection).
    public var roundTrip: Duration?

    public init(status: Int, headers: [(name: String, value: String)], body: ByteBuffer?, roundTrip: Duration? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.roundTrip = roundTrip
    }

    public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// APNs accepted the request.
public struct APNsAccepted: Sendable, Hashable {
    public var status: Int
    /// `apns-id` of a device push (echoed or made by APNs), `apns-request-id` otherwise.
    public var apnsID: String?
    /// `apns-unique-id`: the lookup key of the delivery log in the Push Notifications Console
    /// (device pushes in the sandbox) or the message id of a broadcast.
    public var uniqueID: String?
    /// `apns-channel-id` of a created channel.
    public var channelID: String?

    public init(_ raw: APNsRawResponse) {
        status = raw.status
        apnsID = raw.header("apns-id") ?? raw.header("apns-request-id")
        uniqueID = raw.header("apns-unique-id")
        channelID = raw.header("apns-channel-id")
    }
}

/// APNs refused the request: the status, the reason and what to do about it.
public struct APNsError: Error, Sendable, Hashable, CustomStringConvertible {
    public var status: Int
    public var reason: APNsReason
    /// For `410`: when APNs last confirmed the token was no longer valid for the topic.
    public var timestamp: Date?
    public var apnsID: String?

    public init(status: Int, reason: APNsReason, timestamp: Date? = nil, apnsID: String? = nil) {
        self.status = status
        self.reason = reason
        self.timestamp = timestamp
        self.apnsID = apnsID
    }

    /// Reads an error answer: `{"reason": "...", "timestamp": <ms>}`. A body that is not the
    /// documented JSON still gives an error, with the status as its reason.
    public init(_ raw: APNsRawResponse) {
        var reason = "HTTP\(raw.status)"
        var timestamp: Date?
        if let body = raw.body, let json = try? JSONValue(parsing: body.readableBytesView) {
            if let text = json["reason"]?.stringValue { reason = text }
            if let ms = json["timestamp"]?.doubleValue { timestamp = Date(timeIntervalSince1970: ms / 1000) }
        }
        self.init(
            status: raw.status, reason: APNsReason(reason), timestamp: timestamp,
            apnsID: raw.header("apns-id") ?? raw.header("apns-request-id"))
    }

    /// The body APNs sends for this error: `{"reason": …}`, and for a `410` the `timestamp` in
    /// milliseconds. The inverse of `init(_:)`.
    public var body: [UInt8] {
        var json: JSONValue = .object([("reason", .string(reason.rawValue))])
        if let timestamp {
            // Clamped first: a timestamp read from a peer's answer may be any number.
            let milliseconds = timestamp.timeIntervalSince1970 * 1000
            let limit = Date.supportedRange.upperBound.timeIntervalSince1970 * 1000
            json.set("timestamp", .integer(Int64(milliseconds.isNaN ? 0 : min(max(milliseconds, 0), limit).rounded(.down))))
        }
        return json.serialized
    }

    public var advice: APNsRetryAdvice { reason.advice(status: status) }

    public var description: String {
        var text = "APNs \(status) \(reason)"
        if let timestamp { text += " (token invalid since \(timestamp.formatted(.iso8601)))" }
        return text
    }
}

/// The request may not have reached APNs, or its answer never came back.
public struct APNsTransportError: Error, Sendable, Hashable, CustomStringConvertible {
    public struct Code: Sendable, Hashable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// No answer before the request's deadline; APNs may or may not have taken it.
        public static let deadlineExceeded = Code("deadline_exceeded")
        /// The connection could not be made (DNS, TCP, TLS or ALPN).
        public static let connectFailed = Code("connect_failed")
        /// The connection closed with the request in flight; APNs may or may not have taken it.
        public static let connectionClosed = Code("connection_closed")
        /// APNs sent GOAWAY before processing the request: it was not taken and is safe to retry.
        public static let notProcessed = Code("not_processed")
        /// APNs reset the stream.
        public static let streamReset = Code("stream_reset")
        /// The answer broke the protocol (no `:status`, a created channel without its id).
        public static let invalidAnswer = Code("invalid_answer")
        /// The client was shut down.
        public static let shutdown = Code("shutdown")
    }

    public var code: Code
    public var message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code): \(message)" }
}
