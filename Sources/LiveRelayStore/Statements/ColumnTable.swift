import Foundation
import LiveActivityKit

/// A record's columns, each written once: its name and the record's value in it. The column list,
/// the placeholders and the arguments both engines bind come from it, and a row is read by column
/// name (`NamedRow`): a column added anywhere moves nothing else.
struct ColumnTable<Record>: Sendable {
    struct Column: Sendable {
        let name: String
        /// The record's value; nil for a column the store fills itself (an id it assigns), which
        /// is read but never written from the record.
        let value: (@Sendable (Record) -> SQLArgument)?
    }

    /// The table, for naming a column in errors (`activity_tokens.state`).
    let table: String
    let columns: [Column]
    private let positions: [String: Int]

    init(_ table: String, _ columns: [Column]) {
        self.table = table
        self.columns = columns
        positions = Dictionary(columns.enumerated().map { ($0.element.name, $0.offset) }, uniquingKeysWith: { first, _ in first })
    }

    /// The columns read, in order: what a `SELECT` of the record lists first.
    var list: String { list(nil) }

    /// The same, of the table named `alias` (`t.key, t.device_id`).
    func list(_ alias: String?) -> String {
        columns.map { column in alias.map { "\($0).\(column.name)" } ?? column.name }.joined(separator: ", ")
    }

    /// The columns a record is written with, and their placeholders: `(a, b) VALUES (?, ?)`.
    var insertion: String {
        let written = columns.filter { $0.value != nil }
        return "(\(written.map(\.name).joined(separator: ", "))) VALUES (\(SQLStatement.marks(written.count)))"
    }

    /// The record's values for `insertion`, in its order.
    func arguments(_ record: Record) -> [SQLArgument] { columns.compactMap { $0.value?(record) } }

    /// How many columns `list` has.
    var count: Int { columns.count }

    /// The same table, with columns a query selects after the record's own (named with `AS`
    /// when they are expressions), read by name too.
    func appending(_ names: [String]) -> ColumnTable {
        ColumnTable(table, columns + names.map { Column(name: $0, value: nil) })
    }

    /// `row`, read by these columns' names; `list`'s first column is the row's column `offset`
    /// (0 unless the query selects another record's columns first).
    func read<Row: StoreRow>(_ row: Row, from offset: Int = 0) -> NamedRow<Row> {
        NamedRow(row: row, table: table, positions: positions, offset: offset)
    }
}

extension ColumnTable.Column {
    static func text(_ name: String, _ value: @escaping @Sendable (Record) -> String?) -> Self { Self(name: name, value: { .text(value($0)) }) }
    static func integer(_ name: String, _ value: @escaping @Sendable (Record) -> Int64?) -> Self {
        Self(name: name, value: { .integer(value($0)) })
    }
    static func real(_ name: String, _ value: @escaping @Sendable (Record) -> Double?) -> Self { Self(name: name, value: { .real(value($0)) }) }
    static func date(_ name: String, _ value: @escaping @Sendable (Record) -> Date?) -> Self { Self(name: name, value: { .seconds(value($0)) }) }
    static func bool(_ name: String, _ value: @escaping @Sendable (Record) -> Bool) -> Self { Self(name: name, value: { .bool(value($0)) }) }
    static func bytes(_ name: String, _ value: @escaping @Sendable (Record) -> [UInt8]) -> Self {
        Self(name: name, value: { .bytes(value($0)) })
    }
    /// One of a type's names.
    static func name<Value: RawRepresentable & SendableMetatype>(_ name: String, _ value: @escaping @Sendable (Record) -> Value?) -> Self
    where Value.RawValue == String {
        Self(name: name, value: { .text(value($0)?.rawValue) })
    }
    /// A column the store fills itself: read, never written from the record.
    static func filled(_ name: String) -> Self { Self(name: name, value: nil) }
}

/// A row read by column name, as its record's `ColumnTable` lists them.
struct NamedRow<Row: StoreRow> {
    let row: Row
    let table: String
    let positions: [String: Int]
    let offset: Int

    private func at<Value>(_ name: String, _ read: (Int) -> Value?) -> Value? {
        guard let position = positions[name] else {
            // A name the table does not list is a mistake in this module, which every store test reads.
            assertionFailure("\(table) has no column \(name)")
            return nil
        }
        return read(offset + position)
    }

    func text(_ name: String) -> String? { at(name) { row.text($0) } }
    func string(_ name: String) -> String { text(name) ?? "" }
    func real(_ name: String) -> Double? { at(name) { row.real($0) } }
    func integer(_ name: String) -> Int64? { at(name) { row.integer($0) } }
    func int(_ name: String) -> Int? { integer(name).map(Int.init) }
    func bool(_ name: String) -> Bool { at(name) { row.bool($0) } ?? false }
    func bytes(_ name: String) -> [UInt8] { at(name) { row.bytes($0) } ?? [] }
    func date(_ name: String) -> Date? { real(name).map(Date.init(timeIntervalSince1970:)) }
    func json(_ name: String) -> JSONValue? { text(name).flatMap { try? JSONValue(parsing: $0) } }

    /// A column that holds one of a type's names: any other value, NULL included, is an error.
    func value<Value: RawRepresentable>(_ name: String) throws -> Value where Value.RawValue == String {
        guard let value = try optionalValue(name) as Value? else { throw UnreadableStoreValue(column: "\(table).\(name)", value: "NULL") }
        return value
    }

    /// The same, where NULL means none.
    func optionalValue<Value: RawRepresentable>(_ name: String) throws -> Value? where Value.RawValue == String {
        try text(name).map { try Value(stored: $0, column: "\(table).\(name)") }
    }

    /// A column that holds one of a type's numbers.
    func value<Value: RawRepresentable>(_ name: String) throws -> Value where Value.RawValue == Int {
        guard let number = int(name), let value = Value(rawValue: number) else {
            throw UnreadableStoreValue(column: "\(table).\(name)", value: int(name).map(String.init) ?? "NULL")
        }
        return value
    }
}
