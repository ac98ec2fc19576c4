import Foundation
import LiveActivityKit

/// A JSON field that breaks a rule: the rule's code, what is wrong, and the field's full path.
package struct JSONFieldError: Error, Sendable, Hashable, CustomStringConvertible {
    package let code: String
    package let message: String
    package let field: String?

    package init(code: String, message: String, field: String?) {
        self.code = code
        self.message = message
        self.field = field
    }

    package static func invalid(_ field: String, _ rule: String) -> JSONFieldError {
        JSONFieldError(code: "invalid_value", message: rule, field: field)
    }

    /// A rule of LiveActivityKit broken in a body (a contract's schema, a payload field).
    package init(_ error: LiveActivityValidationError) {
        self.init(code: error.code.description, message: error.message, field: error.field)
    }

    package var description: String { field.map { "\($0): \(message)" } ?? message }
}
