import Synchronization

/// Ids in the lowercase `8-4-4-4-12` form APNs answers with: those the emulator gives out
/// (`apns-id` when the request has none, `apns-unique-id`) and the server's request ids; without
/// the dashes, the ids of events.
/// Foundation's `UUID()` opens, reads and closes `/dev/urandom` on Linux at every call, which
/// took a tenth of the emulator's time per push and three of the server's 22 system calls a
/// change. These are version-4 UUIDs from SplitMix64: a counter seeded once from the system's
/// random source, each step mixed into 64 well-spread bits. Ids never repeat within a process
/// (the mix is a bijection of the counter); they are not for secrets.
package enum GeneratedUUID {
    private static let state = Atomic<UInt64>(UInt64.random(in: .min ... .max))

    private static func next() -> UInt64 {
        // SplitMix64 (Steele, Lea and Flood, 2014): the golden-ratio increment, then the mix.
        var z = state.wrappingAdd(0x9E37_79B9_7F4A_7C15, ordering: .relaxed).newValue
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A new version-4 UUID, lowercase; its 32 digits alone without `dashes`.
    package static func string(dashes: Bool = true) -> String {
        // Version 4 in the high nibble of byte 6, variant 0b10 in the top bits of byte 8.
        let high = (next() & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let low = (next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        return String(unsafeUninitializedCapacity: dashes ? 36 : 32) { text in
            var position = 0
            for nibble in 0..<32 {
                if dashes && (nibble == 8 || nibble == 12 || nibble == 16 || nibble == 20) {
                    text[position] = UInt8(ascii: "-")
                    position += 1
                }
                let value = nibble < 16 ? high : low
                let digit = UInt8(truncatingIfNeeded: value >> UInt64(60 - 4 * (nibble % 16))) & 0xF
                text[position] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
                position += 1
            }
            return position
        }
    }
}
