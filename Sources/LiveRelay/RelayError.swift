import Foundation
import LiveActivityKit
import LiveRelayStore

/// A request the service refuses, and why; the HTTP layer turns `kind` into the status.
public struct RelayError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// 400: a field breaks a rule.
        case invalid
        /// 404
        case notFound
        /// 409: the request conflicts with what exists (a taken key, an ended key).
        case conflict
        /// 413
        case tooLarge
        /// 422: the request is well formed but cannot be done (an idempotency key reused).
        case unprocessable
        /// 502: APNs refused what the request needed (a channel).
        case upstream
    }

    public let kind: Kind
    /// Stable and machine-readable.
    public let code: String
    public let message: String
    public let field: String?

    public init(_ kind: Kind, code: String, message: String, field: String? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String { field.map { "\($0): \(message)" } ?? message }

    static func invalid(_ field: String, _ rule: String) -> RelayError {
        RelayError(.invalid, code: "invalid_value", message: rule, field: field)
    }

    /// A payload rule broken, with the API field that carries it.
    init(_ error: LiveActivityValidationError, field: String? = nil) {
        let tooLarge = error.code == .tooLarge
        self.init(tooLarge ? .tooLarge : .invalid, code: error.code.description, message: error.message, field: field ?? error.field)
    }

    init(_ error: StoreError) {
        switch error.code {
        case .keyExists: self.init(.conflict, code: "key_exists", message: error.message)
        case .keyEnded: self.init(.conflict, code: "activity_ended", message: error.message)
        case .idempotencyKeyTaken: self.init(.conflict, code: "idempotency_conflict", message: error.message)
        case .scheduleNotPending: self.init(.conflict, code: "schedule_not_pending", message: error.message)
        }
    }
}
