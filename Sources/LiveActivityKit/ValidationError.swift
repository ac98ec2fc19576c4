/// A request that would be accepted by APNs but fail on the device, or rejected by APNs: the
/// field, the rule it breaks and what to do. Compare `code` in tests; `message` is for people.
public struct LiveActivityValidationError: Error, Hashable, CustomStringConvertible {
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        public var description: String { name }

        /// A required field is absent.
        public static let missing = Code("missing")
        /// The field has the wrong JSON type.
        public static let wrongType = Code("wrong_type")
        /// The field has a value outside its rule.
        public static let invalidValue = Code("invalid_value")
        /// The field is not allowed for this event or destination.
        public static let notAllowed = Code("not_allowed")
        /// The key is not part of the Live Activity payload (often a misspelling).
        public static let unknownKey = Code("unknown_key")
        /// The encoded payload or value exceeds its size limit.
        public static let tooLarge = Code("too_large")
        /// The input is not valid JSON.
        public static let invalidJSON = Code("invalid_json")
    }

    /// Where the problem is: a payload path such as `aps.alert.title`, or a header or
    /// parameter name such as `apns-collapse-id` or `token`.
    public let field: String
    public let code: Code
    /// The rule that was broken, in words a person can act on.
    public let message: String

    public init(field: String, code: Code, message: String) {
        self.field = field
        self.code = code
        self.message = message
    }

    public var description: String { "\(field): \(message)" }
}
