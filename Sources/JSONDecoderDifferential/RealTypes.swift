import Foundation
import LiveActivityKit

// The real Swift types a contract's schema stands for, built at run time from generic structs
// whose `Decodable` the compiler synthesizes, so that `JSONDecoder` itself can be asked what it
// decodes. A struct's fields are named `a`, `b` and `c`, in that order; a field is optional when
// its declared type is (`var a: A?`, decoded with `decodeIfPresent`, as an app's field is).

struct NoFields: Decodable {}
struct R<A: Decodable>: Decodable { var a: A }
struct O<A: Decodable>: Decodable { var a: A? }
struct RR<A: Decodable, B: Decodable>: Decodable {
    var a: A
    var b: B
}
struct RO<A: Decodable, B: Decodable>: Decodable {
    var a: A
    var b: B?
}
struct OR<A: Decodable, B: Decodable>: Decodable {
    var a: A?
    var b: B
}
struct OO<A: Decodable, B: Decodable>: Decodable {
    var a: A?
    var b: B?
}
struct RRR<A: Decodable, B: Decodable, C: Decodable>: Decodable {
    var a: A
    var b: B
    var c: C
}
struct RRO<A: Decodable, B: Decodable, C: Decodable>: Decodable {
    var a: A
    var b: B
    var c: C?
}
struct ROR<A: Decodable, B: Decodable, C: Decodable>: Decodable {
    var a: A
    var b: B?
    var c: C
}
struct ROO<A: Decodable, B: Decodable, C: Decodable>: Decodable {
    var a: A
    var b: B?
    var c: C?
}
struct ORR<A: Decodable, B: Decodable, C: Decodable>: Decodable {
    var a: A?
    var b: B
    var c: C
}
struct ORO<A: Decodable, B: Decodable, C: Decodable>: Decodable {
    var a: A?
    var b: B
    var c: C?
}
struct OOR<A: Decodable, B: Decodable, C: Decodable>: Decodable {
    var a: A?
    var b: B?
    var c: C
}
struct OOO<A: Decodable, B: Decodable, C: Decodable>: Decodable {
    var a: A?
    var b: B?
    var c: C?
}

/// The one `String`-backed enum a generated schema may name: a real enum, so raw values are
/// matched as Swift matches them (canonically equivalent strings are equal).
public enum Step: String, Decodable, CaseIterable {
    case preparing, delivering
    case café = "café"
}

/// The one `Int`-backed enum a generated schema may name, with the edges of `Int`.
public enum Level: Int, Decodable, CaseIterable {
    case zero = 0
    case one = 1
    case minusOne = -1
    case maximum = 9_223_372_036_854_775_807
    case minimum = -9_223_372_036_854_775_808
}

/// A schema that has a real twin: what `SwiftType.twin` can build.
public enum TwinError: Error, CustomStringConvertible {
    case notRepresentable(String)
    public var description: String {
        switch self {
        case .notRepresentable(let why): "no real twin: \(why)"
        }
    }
}

extension SwiftType {
    // Computed, not stored: a global holding indirect enums reads as a leak to LeakSanitizer at
    // the fuzzer's exit.
    public static var twinFieldNames: [String] { ["a", "b", "c"] }
    public static var twinStringEnum: SwiftType { .stringEnum(Step.allCases.map(\.rawValue)) }
    public static var twinIntEnum: SwiftType { .intEnum(Level.allCases.map(\.rawValue)) }

    /// The real Swift type this schema stands for.
    public func twin() throws(TwinError) -> any Decodable.Type {
        switch self {
        case .string: return String.self
        case .int: return Int.self
        case .integer(let width):
            switch width {
            case .int8: return Int8.self
            case .int16: return Int16.self
            case .int32: return Int32.self
            case .int64: return Int64.self
            case .uint: return UInt.self
            case .uint8: return UInt8.self
            case .uint16: return UInt16.self
            case .uint32: return UInt32.self
            case .uint64: return UInt64.self
            }
        case .double: return Double.self
        case .float: return Float.self
        case .decimal: return Decimal.self
        case .data: return Data.self
        case .uuid: return UUID.self
        case .bool: return Bool.self
        case .date: return Date.self
        case .closedRangeOfDate: return ClosedRange<Date>.self
        case .url: return URL.self
        case .stringEnum:
            guard self == Self.twinStringEnum else { throw .notRepresentable("a String enum other than Step") }
            return Step.self
        case .intEnum:
            guard self == Self.twinIntEnum else { throw .notRepresentable("an Int enum other than Level") }
            return Level.self
        case .array(let element): return arrayOf(try element.twin())
        case .optional(let wrapped): return optionalOf(try wrapped.twin())
        case .structure(let type): return try type.twin()
        }
    }
}

extension SwiftStruct {
    /// The real struct: fields `a`, `b`, `c` in order, each optional when its type is.
    public func twin() throws(TwinError) -> any Decodable.Type {
        guard fields.map(\.name) == Array(SwiftType.twinFieldNames.prefix(fields.count)) else {
            throw .notRepresentable("fields other than a, b, c in order")
        }
        var slots: [(optional: Bool, type: any Decodable.Type)] = []
        for field in fields {
            if case .optional(let wrapped) = field.type {
                slots.append((true, try wrapped.twin()))
            } else {
                slots.append((false, try field.type.twin()))
            }
        }
        switch slots.count {
        case 0: return NoFields.self
        case 1: return oneField(slots[0])
        case 2: return twoFields(slots[0], slots[1])
        case 3: return threeFields(slots[0], slots[1], slots[2])
        default: throw .notRepresentable("more than three fields")
        }
    }
}

typealias Slot = (optional: Bool, type: any Decodable.Type)

private func arrayOf<T: Decodable>(_: T.Type) -> any Decodable.Type { [T].self }
private func optionalOf<T: Decodable>(_: T.Type) -> any Decodable.Type { T?.self }

private func oneField(_ a: Slot) -> any Decodable.Type {
    func make<A: Decodable>(_: A.Type) -> any Decodable.Type { a.optional ? O<A>.self : R<A>.self }
    return make(a.type)
}

private func twoFields(_ a: Slot, _ b: Slot) -> any Decodable.Type {
    func make<A: Decodable, B: Decodable>(_: A.Type, _: B.Type) -> any Decodable.Type {
        switch (a.optional, b.optional) {
        case (false, false): RR<A, B>.self
        case (false, true): RO<A, B>.self
        case (true, false): OR<A, B>.self
        case (true, true): OO<A, B>.self
        }
    }
    return make(a.type, b.type)
}

private func threeFields(_ a: Slot, _ b: Slot, _ c: Slot) -> any Decodable.Type {
    func make<A: Decodable, B: Decodable, C: Decodable>(_: A.Type, _: B.Type, _: C.Type) -> any Decodable.Type {
        switch (a.optional, b.optional, c.optional) {
        case (false, false, false): RRR<A, B, C>.self
        case (false, false, true): RRO<A, B, C>.self
        case (false, true, false): ROR<A, B, C>.self
        case (false, true, true): ROO<A, B, C>.self
        case (true, false, false): ORR<A, B, C>.self
        case (true, false, true): ORO<A, B, C>.self
        case (true, true, false): OOR<A, B, C>.self
        case (true, true, true): OOO<A, B, C>.self
        }
    }
    return make(a.type, b.type, c.type)
}
