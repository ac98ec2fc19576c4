import Foundation

extension Date {
    /// The dates LiveRelay takes from a request, a stored record, a config file or the command
    /// line: 1970-01-01T00:00:00Z through 9999-12-31T23:59:59Z. Their UNIX seconds fit an `Int64`
    /// and their ISO 8601 form has a four-digit year, so every later conversion is safe.
    public static let supportedRange: ClosedRange<Date> =
        Date(timeIntervalSince1970: 0)...Date(timeIntervalSince1970: 253_402_300_799)

    /// `supportedRange` in words, for error messages.
    public static let supportedRangeText = "between 1970-01-01T00:00:00Z and 9999-12-31T23:59:59Z"

    /// The date `seconds` after 1970, if it is a finite number within `supportedRange`; the check
    /// comes before any conversion (a `Double` beyond `Int64` traps when converted).
    public static func supported(unixSeconds seconds: Double, field: String) throws(LiveActivityValidationError) -> Date {
        guard seconds.isFinite, seconds >= supportedRange.lowerBound.timeIntervalSince1970,
            seconds <= supportedRange.upperBound.timeIntervalSince1970
        else {
            throw LiveActivityValidationError(
                field: field, code: .invalidValue, message: "must be a date \(supportedRangeText), got \(seconds) seconds since 1970")
        }
        return Date(timeIntervalSince1970: seconds)
    }

    /// `date` if it lies within `supportedRange` (a date parsed from text or computed from an
    /// interval may not).
    public static func supported(_ date: Date, field: String) throws(LiveActivityValidationError) -> Date {
        try supported(unixSeconds: date.timeIntervalSince1970, field: field)
    }
}

/// Whole UNIX seconds (UTC), the unit of every date in `aps`. Dates outside `Date.supportedRange`
/// are clamped to it: inputs are checked where they enter, and this never traps.
public func unixSeconds(_ date: Date) -> Int64 {
    let seconds = date.timeIntervalSince1970
    guard seconds.isFinite else { return seconds > 0 ? unixSeconds(Date.supportedRange.upperBound) : 0 }
    let clamped = min(max(seconds, 0), Date.supportedRange.upperBound.timeIntervalSince1970)
    return Int64(clamped.rounded(.down))
}

extension Date {
    /// ISO 8601 in UTC to the whole second, as a default `ISO8601DateFormatter` writes it
    /// (`2026-11-21T10:00:00Z`: the time rounded to the millisecond, then its seconds), made by
    /// arithmetic: creating a formatter costs ICU's set-up, and one per listed date took 82% of a
    /// listing's CPU. Dates outside `supportedRange` are clamped to it.
    public var iso8601: String {
        let upper = Date.supportedRange.upperBound.timeIntervalSince1970
        let interval = timeIntervalSince1970.isFinite ? min(max(timeIntervalSince1970, 0), upper) : 0
        let seconds = min(Int64((interval * 1000).rounded()) / 1000, Int64(upper))
        let (days, secondOfDay) = (seconds / 86_400, seconds % 86_400)
        // Days since 1970 to a proleptic Gregorian date, in eras of 400 years from 0000-03-01.
        let shifted = days + 719_468
        let era = shifted / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        var text = [UInt8]()
        text.reserveCapacity(20)
        func digits(_ value: Int64, _ count: Int) {
            var divisor: Int64 = 1
            for _ in 1..<count { divisor *= 10 }
            while divisor > 0 {
                text.append(UInt8(ascii: "0") + UInt8(value / divisor % 10))
                divisor /= 10
            }
        }
        digits(year, 4)
        text.append(UInt8(ascii: "-"))
        digits(month, 2)
        text.append(UInt8(ascii: "-"))
        digits(day, 2)
        text.append(UInt8(ascii: "T"))
        digits(secondOfDay / 3_600, 2)
        text.append(UInt8(ascii: ":"))
        digits(secondOfDay / 60 % 60, 2)
        text.append(UInt8(ascii: ":"))
        digits(secondOfDay % 60, 2)
        text.append(UInt8(ascii: "Z"))
        return String(decoding: text, as: UTF8.self)
    }
}
