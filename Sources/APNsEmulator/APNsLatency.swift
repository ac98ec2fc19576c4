import Foundation
import NIOCore
import Synchronization

/// How long APNs takes to answer a request: a fixed delay, or one drawn evenly from a range for
/// each request. Real APNs answers a provider in a datacenter in tens to hundreds of milliseconds;
/// on loopback the emulator answers in a fraction of one, which hides what concurrency must cover.
public struct APNsLatency: Sendable, Hashable, CustomStringConvertible {
    public var lower: Duration
    public var upper: Duration

    public static let none = APNsLatency(lower: .zero, upper: .zero)
    /// A minute: far beyond any client's timeout, so a bigger figure is a mistake.
    public static let longest = Duration.seconds(60)

    public init(lower: Duration, upper: Duration) {
        (self.lower, self.upper) = (lower, max(lower, upper))
    }

    public init(fixed: Duration) { self.init(lower: fixed, upper: fixed) }

    /// `100` (milliseconds) or `40-120` (drawn evenly from 40 to 120 milliseconds).
    public init(parsing text: String) throws(LatencyError) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        let numbers = parts.compactMap { Double($0) }
        guard (1...2).contains(parts.count), numbers.count == parts.count, numbers.allSatisfy({ $0 >= 0 && $0.isFinite }) else {
            throw LatencyError("must be milliseconds, as 100, or a range of them, as 40-120; got \"\(text)\"")
        }
        guard numbers.last! >= numbers.first! else { throw LatencyError("a range goes from the smaller to the larger, got \"\(text)\"") }
        let (lower, upper) = (Duration.microseconds(Int64(numbers.first! * 1000)), Duration.microseconds(Int64(numbers.last! * 1000)))
        guard upper <= Self.longest else { throw LatencyError("must be at most 60000 milliseconds, got \"\(text)\"") }
        self.init(lower: lower, upper: upper)
    }

    public var isZero: Bool { upper == .zero }

    /// One request's delay.
    public func sample(using generator: inout some RandomNumberGenerator) -> TimeAmount {
        let (low, high) = (Self.nanoseconds(lower), Self.nanoseconds(upper))
        return .nanoseconds(low == high ? low : Int64.random(in: low...high, using: &generator))
    }

    /// As `init(parsing:)` reads it: `100` or `40-120`, in milliseconds.
    public var text: String {
        let (low, high) = (Self.milliseconds(lower), Self.milliseconds(upper))
        return low == high ? low : "\(low)-\(high)"
    }

    public var description: String { "\(text) ms" }

    private static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }

    private static func milliseconds(_ duration: Duration) -> String {
        let value = Double(nanoseconds(duration)) / 1_000_000
        return value == value.rounded() ? String(Int64(value)) : String(value)
    }
}

public struct LatencyError: Error, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// The latency a listener answers with now: set at start, changed through the control API.
public final class LatencySetting: Sendable {
    private let value: Mutex<APNsLatency>

    public init(_ latency: APNsLatency = .none) { value = Mutex(latency) }

    public var latency: APNsLatency {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

/// Draws latencies cheaply: SplitMix64, seeded once from the system. The system's generator asks
/// the kernel for every number, which at thousands of answers a second cost the emulator more
/// than the answers did.
struct LatencyRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64 = UInt64.random(in: .min ... .max)) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var mixed = state
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return mixed ^ (mixed >> 31)
    }
}
