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
