import Foundation
import LiveActivityKit
import LiveRelayStore

/// A request the service refuses, and why; the HTTP layer turns `kind` into the status.
package struct RelayError: Error, Sendable, Hashable, CustomStringConvertible {
    package enum Kind: Sendable, Hashable {
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
        /// 422: well formed, but the iPhone would not show it: its widget would not decode it (its
        /// contract says so), or it would be stale on arrival; or its attributes name another key.
        case unprocessable
        /// 502: APNs refused what the request needed (a channel).
        case upstream
        /// 429: the caller must wait `retryAfter` seconds.
        case throttled
    }

    /// Stable and machine-readable; the API's `code`.
    package struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        package let rawValue: String
        package init(rawValue: String) { self.rawValue = rawValue }
        package var description: String { rawValue }

        package static let invalidValue = Code(rawValue: "invalid_value")
        package static let missing = Code(rawValue: "missing")
        package static let notFound = Code(rawValue: "not_found")
        /// The API key is for another app.
        package static let otherApp = Code(rawValue: "other_app")
        package static let unauthorized = Code(rawValue: "unauthorized")
        package static let wrongScope = Code(rawValue: "wrong_scope")
        package static let keyExists = Code(rawValue: "key_exists")
        /// A device's report names a channel the key does not have.
        package static let otherChannel = Code(rawValue: "other_channel")
        package static let activityEnded = Code(rawValue: "activity_ended")
        /// The same idempotency key was committed by a concurrent request.
        package static let idempotencyConflict = Code(rawValue: "idempotency_conflict")
        package static let scheduleNotPending = Code(rawValue: "schedule_not_pending")
        /// A push that is not a failure, or whose target is gone, or that a newer push replaced.
        package static let notRetryable = Code(rawValue: "not_retryable")
        package static let lastAdminKey = Code(rawValue: "last_admin_key")
        package static let apnsUnavailable = Code(rawValue: "apns_unavailable")
        package static let apnsRefused = Code(rawValue: "apns_refused")
        /// The app's widget would not decode the attributes or content state: the iPhone would drop the push.
        package static let doesNotDecode = Code(rawValue: "content_does_not_decode")
        /// A client key registers another contract for an app version that has one (`ContractRegistration`).
        package static let contractVersionKept = Code(rawValue: "contract_version_kept")
        /// `versions: decodable` for a key whose channel broadcast reaches every app version.
        package static let versionsNotSeparable = Code(rawValue: "versions_not_separable")
        /// The app's stored contract for the type no longer reads: it must be registered again.
        package static let contractUnreadable = Code(rawValue: "contract_unreadable")
        /// Too many failed authentications from the caller's address.
        package static let tooManyFailures = Code(rawValue: "too_many_failures")
        /// A device reports faster than a device may (`DeviceReportLimits`).
        package static let deviceRateLimited = Code(rawValue: "device_rate_limited")
        /// The app has contracts of as many attributes types as it may keep.
        package static let tooManyContracts = Code(rawValue: "too_many_contracts")
        /// The app has as many webhook endpoints as it may.
        package static let tooManyWebhooks = Code(rawValue: "too_many_webhooks")
        /// The webhook endpoint is disabled.
        package static let webhookDisabled = Code(rawValue: "webhook_disabled")
        /// A start whose stale date has passed: the iPhone would never show it (`DeviceForesight`).
        package static let staleOnArrival = Code(rawValue: "stale_on_arrival")
        /// More activity data than ActivityKit takes (`DeviceForesight`).
        package static let activityDataTooLarge = Code(rawValue: "activity_data_too_large")
        /// A device's report under a key it is not known to, without a grant (`ActivityGrant`).
        package static let grantRequired = Code(rawValue: "grant_required")
        /// A grant that is not this server's, or is for another app or key, or has expired.
        package static let grantRefused = Code(rawValue: "grant_refused")
        /// A start's attributes name another key than its path (`StartPlanner.checkKey`).
        package static let keyMismatch = Code(rawValue: "key_mismatch")
    }

    package let kind: Kind
    package let code: Code
    package let message: String
    package let field: String?
    /// Seconds to wait, for `.throttled`.
    package let retryAfter: Int?

    package init(_ kind: Kind, _ code: Code, message: String, field: String? = nil, retryAfter: Int? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.field = field
        self.retryAfter = retryAfter
    }

    package var description: String { field.map { "\($0): \(message)" } ?? message }

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
