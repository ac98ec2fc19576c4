import Foundation
import LiveActivityKit
import Testing

/// Dates written as ISO 8601 by arithmetic read exactly as `ISO8601DateFormatter` writes them, over
/// the whole supported range: the boundaries, leap days, the turn of centuries, fractions of a second.
@Suite struct DateTextTests {
    @Test func everyDateIsWrittenAsTheFormatterWritesIt() {
        let formatter = ISO8601DateFormatter()
        var dates: [Date] = [
            Date.supportedRange.lowerBound, Date.supportedRange.upperBound, Date(timeIntervalSince1970: 951_782_400),  // 2000-02-29
            Date(timeIntervalSince1970: 4_107_542_400),  // 2100-03-01
            Date(timeIntervalSince1970: 1_795_255_200.999), Date(timeIntervalSince1970: 86_399.5),
        ]
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<20_000 {
            dates.append(Date(timeIntervalSince1970: Double.random(in: 0...Date.supportedRange.upperBound.timeIntervalSince1970, using: &generator)))
        }
        for date in dates {
            #expect(date.iso8601 == formatter.string(from: date), "\(date.timeIntervalSince1970)")
        }
        #expect(Date(timeIntervalSince1970: 1_795_255_200).iso8601 == "2026-11-21T10:00:00Z")
    }
}
