import Foundation
import LiveActivityKit
import LiveRelayStore

/// A request the service refuses, and why; the HTTP layer turns `kind` into the status.
public struct RelayError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// 400: a field breaks a rule.
        case invalid
        /// 401: the API key is unknown or revoked.
        case unauthorized
        /// 403: the API key may not act for the app named, or its scope may not do this.
        case forbidden
        /// 404
        case notFound
        /// 409: the request conflicts with what exists (a taken key, an ended key).
        case conflict
        /// 413
        case tooLarge
        /// 422: well formed, but the app's widget would not decode it (its contract says so).
        case unprocessable
        /// 502: APNs refused what the request needed (a channel).
        case upstream
        /// 429: the caller must wait `retryAfter` seconds.
        case throttled
    }

    /// Stable and machine-readable; the API's `code`.
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        public static let invalidValue = Code(rawValue: "invalid_value")
        public static let missing = Code(rawValue: "missing")
        public static let notFound = Code(rawValue: "not_found")
        /// The API key is for another app.
        public static let otherApp = Code(rawValue: "other_app")
        public static let unauthorized = Code(rawValue: "unauthorized")
        public static let wrongScope = Code(rawValue: "wrong_scope")
        public static let keyExists = Code(rawValue: "key_exists")
        public static let activityEnded = Code(rawValue: "activity_ended")
        /// The same idempotency key was committed by a concurrent request.
        public static let idempotencyConflict = Code(rawValue: "idempotency_conflict")
        public static let scheduleNotPending = Code(rawValue: "schedule_not_pending")
        /// A push that is not a failure, or whose target is gone, or that a newer push replaced.
        public static let notRetryable = Code(rawValue: "not_retryable")
        public static let lastAdminKey = Code(rawValue: "last_admin_key")
        public static let apnsUnavailable = Code(rawValue: "apns_unavailable")
        public static let apnsRefused = Code(rawValue: "apns_refused")
        /// The app's widget would not decode the attributes or content state: the iPhone would drop the push.
        public static let doesNotDecode = Code(rawValue: "content_does_not_decode")
        /// The app's stored contract for the type no longer reads: it must be registered again.
        public static let contractUnreadable = Code(rawValue: "contract_unreadable")
        /// Too many failed authentications from the caller's address.
        public static let tooManyFailures = Code(rawValue: "too_many_failures")
    }

    public let kind: Kind
    public let code: Code
    public let message: String
    public let field: String?
    /// Seconds to wait, for `.throttled`.
    public let retryAfter: Int?

    public init(_ kind: Kind, _ code: Code, message: String, field: String? = nil, retryAfter: Int? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.field = field
        self.retryAfter = retryAfter
    }

    public var description: String { field.map { "\($0): \(message)" } ?? message }

    static func invalid(_ field: String, _ rule: String) -> RelayError {
        RelayError(.invalid, .invalidValue, message: rule, field: field)
    }

    static func notFound(_ field: String, _ what: String) -> RelayError {
        RelayError(.notFound, .notFound, message: what, field: field)
    }

    /// A payload rule broken, with the API field that carries it.
    init(_ error: LiveActivityValidationError, field: String? = nil) {
        let tooLarge = error.code == .tooLarge
        self.init(tooLarge ? .tooLarge : .invalid, Code(rawValue: error.code.description), message: error.message, field: field ?? error.field)
    }

    /// What the app's widget would report decoding the request's `apiField`, as its contract says.
    init(_ failure: DecodingFailure, in apiField: String) {
        self.init(.unprocessable, .doesNotDecode, message: failure.reason, field: failure.path(under: apiField))
    }

    init(_ error: StoreError) {
        switch error.code {
        case .keyExists: self.init(.conflict, .keyExists, message: error.message)
        case .keyEnded: self.init(.conflict, .activityEnded, message: error.message)
        case .idempotencyKeyTaken: self.init(.conflict, .idempotencyConflict, message: error.message)
        case .scheduleNotPending: self.init(.conflict, .scheduleNotPending, message: error.message)
        }
    }
}
