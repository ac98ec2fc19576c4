import Foundation

/// The names of a statement's parameters in the order of its placeholders, indexed once (a
/// `static let` beside the statement's text).
struct SQLParameters: Sendable, ExpressibleByArrayLiteral {
    let names: [String]
    fileprivate let positions: [String: Int]

    init(_ names: [String]) {
        self.names = names
        positions = Dictionary(names.enumerated().map { ($0.element, $0.offset) }, uniquingKeysWith: { first, _ in first })
    }

    init(arrayLiteral names: String...) { self.init(names) }

    var count: Int { names.count }
}

/// The arguments of a statement with many parameters, bound by name: `positional()` gives the
/// values in the order of the statement's `SQLParameters`, or refuses a name unbound, bound twice
/// or not listed. A name may stand for a run of placeholders (a fragment the outbox's rules wrote,
/// with its own arguments).
struct NamedArguments {
    private let parameters: SQLParameters
    private var values: [[SQLArgument]?]
    private var misnamed: [String] = []

    init(_ parameters: SQLParameters) {
        self.parameters = parameters
        values = Array(repeating: nil, count: parameters.count)
    }

    subscript(name: String) -> SQLArgument? {
        get { parameters.positions[name].flatMap { values[$0]?.first } }
        set { bind(name, newValue.map { [$0] } ?? []) }
    }

    /// Binds `name` to a run of values.
    mutating func bind(_ name: String, _ run: [SQLArgument]) {
        guard let position = parameters.positions[name], values[position] == nil else {
            misnamed.append(name)
            return
        }
        values[position] = run
    }

    /// The values in the statement's order, `placeholders` of them.
    func positional(placeholders: Int) throws -> [SQLArgument] {
        let unbound = parameters.names.indices.filter { values[$0] == nil }.map { parameters.names[$0] }
        let arguments = values.flatMap { $0 ?? [] }
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
