import Foundation

/// The arguments of a statement with many parameters, bound by name: the statement lists its
/// parameters' names in the order of its placeholders, next to its text, and `positional()` gives
/// the values in that order, or refuses a name unbound, bound twice or not listed. A name may stand
/// for a run of placeholders (a fragment the outbox's rules wrote, with its own arguments).
struct NamedArguments {
    private let parameters: [String]
    private var values: [String: [SQLArgument]] = [:]
    private var misnamed: [String] = []

    init(_ parameters: [String]) { self.parameters = parameters }

    subscript(name: String) -> SQLArgument? {
        get { values[name]?.first }
        set { bind(name, newValue.map { [$0] } ?? []) }
    }

    /// Binds `name` to a run of values.
    mutating func bind(_ name: String, _ run: [SQLArgument]) {
        if !parameters.contains(name) || values[name] != nil { misnamed.append(name) }
        values[name] = run
    }

    /// The values in the statement's order, `placeholders` of them.
    func positional(placeholders: Int) throws -> [SQLArgument] {
        let unbound = parameters.filter { values[$0] == nil }
        let arguments = parameters.flatMap { values[$0] ?? [] }
        guard misnamed.isEmpty, unbound.isEmpty, arguments.count == placeholders else {
            throw PostgresStoreInconsistency(
                "a statement's arguments do not fit its parameters: unbound \(unbound), misnamed \(misnamed), \(arguments.count) of \(placeholders)")
        }
        return arguments
    }
}

extension PreparedSQL {
    /// How many placeholders (`$1`…) the statement's text has.
    static var placeholderCount: Int {
        var highest = 0
        var number: Int?
        for byte in sql.utf8 {
            if byte == UInt8(ascii: "$") {
                number = 0
            } else if let digits = number, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
                number = digits * 10 + Int(byte - UInt8(ascii: "0"))
            } else {
                if let digits = number { highest = max(highest, digits) }
                number = nil
            }
        }
        return max(highest, number ?? 0)
    }
}
