import Foundation
import Hummingbird
import JSONAPI
import SimulatedDevices

/// An `application/x-www-form-urlencoded` body, as browsers send forms; the first of a repeated
/// name counts.
package struct FormFields: Sendable {
    private var fields: [String: String] = [:]

    package subscript(_ name: String) -> String? { fields[name] }

    /// Whether field `name` holds `expected`, compared in a time that does not depend on where
    /// they differ (a form token).
    package func has(_ name: String, equalTo expected: String) -> Bool {
        guard let sent = fields[name] else { return false }
        let (x, y) = (Array(sent.utf8), Array(expected.utf8))
        guard x.count == y.count else { return false }
        return zip(x, y).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// A new form token: 128 random bits in hex.
    package static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<16).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max, using: &generator)) }.joined()
    }

    package static func read(_ request: inout Request, _ context: some RequestContext) async throws -> FormFields {
        let buffer = try await request.collectBody(upTo: context.maxUploadSize)
        return try FormFields(encoded: String(buffer: buffer))
    }

    package init(encoded: String) throws {
        for pair in encoded.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decoded(_ part: Substring) throws -> String {
                guard let text = part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding else {
                    throw APIError.invalid("form", "is not URL-encoded")
                }
                return text
            }
            let name = try decoded(parts[0])
            if fields[name] == nil { fields[name] = try decoded(parts.count > 1 ? parts[1] : "") }
        }
    }

    /// The device and the person's action a drawn iPhone's button sent.
    package func personAction() throws -> (deviceID: String, action: PersonAction) {
        guard let device = self["device"], !device.isEmpty else { throw APIError.invalid("device", "the form names no device") }
        func required(_ name: String) throws -> String {
            guard let value = self[name], !value.isEmpty else { throw APIError.invalid(name, "is required with action \(self["action"] ?? "")") }
            return value
        }
        func flag(_ name: String) throws -> Bool {
            let value = try required(name)
            guard value == "true" || value == "false" else { throw APIError.invalid(name, "must be true or false, got \"\(value)\"") }
            return value == "true"
        }
        let action: PersonAction
        switch self["action"] ?? "" {
        case "lock": action = .lock
        case "unlock": action = .unlock
        case "offline": action = .goOffline
        case "online": action = .goOnline
        case "dismiss": action = .dismiss(activityID: try required("activity"))
        case "live-activities": action = .setLiveActivities(bundleID: try required("app"), enabled: try flag("enabled"))
        case "landscape": action = .setLandscape(try flag("on"))
        case "carplay": action = .setCarPlay(try flag("on"))
        case "mac": action = .setPairedMac(try flag("on"))
        case "advance-clock":
            let text = try required("seconds")
            guard let seconds = TimeInterval(text), seconds > 0, seconds <= PersonAction.longestClockStep else {
                throw APIError.invalid(
                    "seconds", "must be a number of seconds above 0 and at most \(Int(PersonAction.longestClockStep)), got \"\(text)\"")
            }
            action = .advanceClock(seconds: seconds)
        case "update-os": action = .updateOS()
        case let other:
            throw APIError.invalid(
                "action",
                "must be lock, unlock, offline, online, dismiss, live-activities, update-os, landscape, carplay, mac or advance-clock, got \"\(other)\""
            )
        }
        return (device, action)
    }
}
