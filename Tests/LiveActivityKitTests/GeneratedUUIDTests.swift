import Foundation
import Testing

@testable import LiveActivityKit

@Suite struct GeneratedUUIDTests {
    @Test func aGeneratedIDIsALowercaseVersion4UUID() throws {
        for _ in 0..<1_000 {
            let text = GeneratedUUID.string()
            let uuid = try #require(UUID(uuidString: text), "\(text)")
            #expect(uuid.uuidString.lowercased() == text)
            let bytes = withUnsafeBytes(of: uuid.uuid) { Array($0) }
            #expect(bytes[6] >> 4 == 4, "version 4: \(text)")
            #expect(bytes[8] >> 6 == 0b10, "RFC 9562 variant: \(text)")
        }
    }

    /// An event's id: the same digits without the dashes.
    @Test func withoutDashesAnIDIsItsThirtyTwoDigits() throws {
        let text = GeneratedUUID.string(dashes: false)
        #expect(
            text.utf8.count == 32
                && text.utf8.allSatisfy {
                    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
                })
        let dashed = [text.prefix(8), text.dropFirst(8).prefix(4), text.dropFirst(12).prefix(4), text.dropFirst(16).prefix(4), text.dropFirst(20)]
            .joined(separator: "-")
        #expect(try #require(UUID(uuidString: dashed)).uuidString.lowercased() == dashed)
    }

    @Test func generatedIDsDoNotRepeatAndSpreadOverEveryDigit() {
        let ids = (0..<100_000).map { _ in GeneratedUUID.string() }
        #expect(Set(ids).count == ids.count)
        // Every random hexadecimal position takes all 16 digits: the bits are spread, not a
        // counter in the last digits.
        for position in [0, 7, 9, 15, 20, 35] {
            let digits = Set(ids.prefix(2_000).map { Array($0.utf8)[position] })
            #expect(digits.count == 16, "position \(position): \(digits.count) digits")
        }
    }
}
