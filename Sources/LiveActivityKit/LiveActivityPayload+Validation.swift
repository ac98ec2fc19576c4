import Foundation

extension LiveActivityPayload {
    /// Every `aps` key a Live Activity push may carry (Apple's payload key table, iOS 18 included).
    public static let apsKeys: [String] = [
        "timestamp", "event", "content-state", "stale-date", "dismissal-date", "relevance-score",
        "alert", "attributes-type", "attributes", "input-push-token", "input-push-channel",
    ]

    /// Why a start would never be shown, or nil: one whose stale date is not after the moment it
    /// starts is created stale and never put on the Lock Screen (spec §14.2.1). APNs answers such a
    /// start `200`; the server and the command line refuse it.
    public static func staleOnArrival(staleDate: Date, startsAt: Date) -> String? {
        guard staleDate <= startsAt else { return nil }
        return
            "is \(staleDate.iso8601), not after the start (\(startsAt.iso8601)): the iPhone would create the activity already stale and never show it on the Lock Screen; give a later date, or none"
    }

    /// Checks the rules that make APNs answer 200 and the device then drop the push, or make APNs
    /// refuse it. Size is checked by `encoded(for:)`, on the exact bytes sent.
    public func validate(for destination: Destination) throws(LiveActivityValidationError) {
        guard case .object = json else {
            throw LiveActivityValidationError(
                field: "payload", code: .wrongType, message: "must be a JSON object, got \(json.typeName)")
        }
        guard let aps else {
            throw LiveActivityValidationError(
                field: "aps", code: .missing, message: "is required; ActivityKit reads only the aps dictionary")
        }
        guard let apsMembers = aps.objectMembers else {
            throw LiveActivityValidationError(
                field: "aps", code: .wrongType, message: "must be an object, got \(aps.typeName)")
        }
        for member in apsMembers where !Self.apsKeys.contains(member.key) {
            throw LiveActivityValidationError(
                field: "aps.\(member.key)", code: .unknownKey,
                message:
                    "is not a Live Activity key\(didYouMean(member.key, in: Self.apsKeys)); the device ignores it. Custom keys go beside aps, not inside it"
            )
        }

        // event
        guard let eventValue = aps["event"] else {
            throw missing("aps.event", "is required: \"start\", \"update\" or \"end\"")
        }
        guard let eventName = eventValue.stringValue else {
            throw wrongType("aps.event", expected: "a string", got: eventValue)
        }
        guard let event = Event(rawValue: eventName) else {
            throw LiveActivityValidationError(
                field: "aps.event", code: .invalidValue,
                message: "must be \"start\", \"update\" or \"end\", got \"\(eventName)\"")
        }
        if destination == .broadcast, event == .start {
            throw LiveActivityValidationError(
                field: "aps.event", code: .notAllowed,
                message: "a broadcast cannot start a Live Activity; start with a push-to-start token and input-push-channel")
        }

        // timestamp and the other aps dates
        guard aps["timestamp"] != nil else {
            throw missing("aps.timestamp", "is required (UNIX seconds); the device keeps only the newest update by it")
        }
        try checkUnixSeconds(aps, "timestamp")
        try checkUnixSeconds(aps, "stale-date")

        if let dismissal = aps["dismissal-date"] {
            guard event == .end else {
                throw notAllowed("aps.dismissal-date", "is only allowed on \"end\"")
            }
            if dismissal != .number("0") { try checkUnixSeconds(aps, "dismissal-date") }
        }

        // content-state
        if let contentState = aps["content-state"] {
            guard case .object = contentState else {
                throw wrongType("aps.content-state", expected: "an object (your ContentState, JSON-encoded)", got: contentState)
            }
        } else if event != .end {
            throw missing("aps.content-state", "is required on \"\(event.rawValue)\"")
        }

        if let score = aps["relevance-score"], score.doubleValue == nil {
            throw wrongType("aps.relevance-score", expected: "a number", got: score)
        }

        // alert
        if let alert = aps["alert"] {
            try validateAlert(alert)
        } else if event == .start {
            throw missing("aps.alert", "is required on \"start\"; without it the device silently drops the start")
        }

        // start-only keys
        for key in ["attributes-type", "attributes", "input-push-token", "input-push-channel"]
        where aps[key] != nil && event != .start {
            throw notAllowed("aps.\(key)", "is only allowed on \"start\"")
        }
        if event == .start {
            guard let type = aps["attributes-type"] else {
                throw missing("aps.attributes-type", "is required on \"start\": the name of your ActivityAttributes type")
            }
            guard let typeName = type.stringValue else {
                throw wrongType("aps.attributes-type", expected: "a string", got: type)
            }
            guard !typeName.isEmpty, !typeName.contains(where: \.isWhitespace) else {
                throw invalid("aps.attributes-type", "must be the Swift type name, like \"DeliveryAttributes\"")
            }
            guard let attributes = aps["attributes"] else {
                throw missing("aps.attributes", "is required on \"start\": your ActivityAttributes (the outer struct), JSON-encoded")
            }
            guard case .object = attributes else {
                throw wrongType("aps.attributes", expected: "an object", got: attributes)
            }
        }
        if let input = aps["input-push-token"], input != .number("1") {
            throw invalid("aps.input-push-token", "must be the number 1")
        }
        if let channel = aps["input-push-channel"] {
            guard let id = channel.stringValue else {
                throw wrongType("aps.input-push-channel", expected: "a string", got: channel)
            }
            try validateChannelID(id, field: "aps.input-push-channel")
            if aps["input-push-token"] != nil {
                throw notAllowed("aps.input-push-channel", "cannot be combined with input-push-token: an activity has one push type")
            }
        }
    }

    private func validateAlert(_ alert: JSONValue) throws(LiveActivityValidationError) {
        guard let members = alert.objectMembers else {
            throw wrongType("aps.alert", expected: "an object with title, body and sound", got: alert)
        }
        for member in members where !["title", "body", "sound"].contains(member.key) {
            throw LiveActivityValidationError(
                field: "aps.alert.\(member.key)", code: .unknownKey,
                message: "is not an alert key of Live Activities; use title, body and sound, localised as {\"loc-key\": ..., \"loc-args\": [...]}"
            )
        }
        for key in ["title", "body"] {
            guard let text = alert[key] else {
                throw missing(
                    "aps.alert.\(key)",
                    key == "title"
                        ? "is required; the device ignores an alert without a title, sound included"
                        : "is required")
            }
            try validateAlertText(text, field: "aps.alert.\(key)")
        }
        if let sound = alert["sound"] {
            guard let name = sound.stringValue else {
                throw wrongType("aps.alert.sound", expected: "a string (\"default\" or a sound file name)", got: sound)
            }
            guard !name.isEmpty else { throw invalid("aps.alert.sound", "must be \"default\" or a sound file name") }
        }
    }

    private func validateAlertText(_ text: JSONValue, field: String) throws(LiveActivityValidationError) {
        switch text {
        case .string: return
        case .object(let members):
            for member in members where !["loc-key", "loc-args"].contains(member.key) {
                throw LiveActivityValidationError(
                    field: "\(field).\(member.key)", code: .unknownKey, message: "is not allowed; use loc-key and loc-args")
            }
            guard let key = text["loc-key"] else { throw missing("\(field).loc-key", "is required in localised text") }
            guard key.stringValue != nil else { throw wrongType("\(field).loc-key", expected: "a string", got: key) }
            if let args = text["loc-args"] {
                guard case .array(let elements) = args else {
                    throw wrongType("\(field).loc-args", expected: "an array of strings", got: args)
                }
                for element in elements where element.stringValue == nil {
                    throw wrongType("\(field).loc-args", expected: "an array of strings", got: element)
                }
            }
        default:
            throw wrongType(field, expected: "a string or {\"loc-key\", \"loc-args\"}", got: text)
        }
    }

    /// `aps` dates are UNIX seconds. The two common mistakes are caught: milliseconds, and Swift's
    /// 2001 reference date (which is what `JSONEncoder` writes for a `Date`).
    private func checkUnixSeconds(_ aps: JSONValue, _ key: String) throws(LiveActivityValidationError) {
        guard let value = aps[key] else { return }
        guard let seconds = value.doubleValue else {
            throw wrongType("aps.\(key)", expected: "a number of UNIX seconds", got: value)
        }
        try Self.checkPlausibleUnixSeconds(seconds, field: "aps.\(key)")
    }

    /// UNIX seconds between 2001-09-09 (1,000,000,000) and 5138 (100,000,000,000).
    public static func checkPlausibleUnixSeconds(_ seconds: Double, field: String) throws(LiveActivityValidationError) {
        if seconds >= 100_000_000_000 {
            throw LiveActivityValidationError(
                field: field, code: .invalidValue,
                message: "must be UNIX seconds; \(formatted(seconds)) looks like milliseconds")
        }
        if seconds < 1_000_000_000 {
            throw LiveActivityValidationError(
                field: field, code: .invalidValue,
                message:
                    "must be UNIX seconds (since 1970); \(formatted(seconds)) is before 2001-09-09 — seconds since 2001 (Swift's reference date) or a relative interval?"
            )
        }
    }

    private static func formatted(_ seconds: Double) -> String {
        seconds == seconds.rounded() && abs(seconds) < 1e18 ? String(Int64(seconds)) : String(seconds)
    }
}

/// A broadcast channel id: a non-empty base64 string.
public func validateChannelID(_ id: String, field: String) throws(LiveActivityValidationError) {
    guard !id.isEmpty, Data(base64Encoded: id) != nil else {
        throw LiveActivityValidationError(
            field: field, code: .invalidValue,
            message: "must be a base64 channel id as returned by channel creation, got \"\(id)\"")
    }
}

private func missing(_ field: String, _ rule: String) -> LiveActivityValidationError {
    LiveActivityValidationError(field: field, code: .missing, message: rule)
}

private func notAllowed(_ field: String, _ rule: String) -> LiveActivityValidationError {
    LiveActivityValidationError(field: field, code: .notAllowed, message: rule)
}

private func invalid(_ field: String, _ rule: String) -> LiveActivityValidationError {
    LiveActivityValidationError(field: field, code: .invalidValue, message: rule)
}

private func wrongType(_ field: String, expected: String, got value: JSONValue) -> LiveActivityValidationError {
    LiveActivityValidationError(field: field, code: .wrongType, message: "must be \(expected), got \(value.typeName)")
}

/// ` (did you mean "…"?)` when a known key is close to `key`, else nothing: the hint of every
/// unknown-key error.
package func didYouMean(_ key: String, in keys: [String]) -> String {
    closestKey(to: key, in: keys).map { " (did you mean \"\($0)\"?)" } ?? ""
}

/// The known key within edit distance 2 of `key` (ignoring case), for "did you mean" hints. Only
/// keys within two characters of its length can be: the distance to the others is not computed,
/// so that a client's key of 60,000 characters costs no more than a short one (it cost 0.9 s in a
/// debug build: libFuzzer's find).
package func closestKey(to key: String, in keys: [String]) -> String? {
    func distance(_ a: [Character], _ b: [Character]) -> Int {
        var previous = Array(0...b.count)
        for (i, ca) in a.enumerated() {
            var current = [i + 1] + Array(repeating: 0, count: b.count)
            for (j, cb) in b.enumerated() {
                current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (ca == cb ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
    let longest = keys.map(\.count).max() ?? 0
    guard key.utf8.count <= 4 * (longest + 2) else { return nil }
    let normalized = Array(key.lowercased().replacingOccurrences(of: "_", with: "-"))
    let best = keys.filter { abs($0.count - normalized.count) <= 2 }.map { ($0, distance(normalized, Array($0.lowercased()))) }.min {
        $0.1 < $1.1
    }
    guard let best, best.1 <= 2 else {
        // camelCase spellings like "contentState" or "staleDate"
        let dashed = key.reduce(into: "") { out, c in
            if c.isUppercase { out += "-" + c.lowercased() } else { out.append(c) }
        }
        return keys.contains(dashed) ? dashed : nil
    }
    return best.0
}
