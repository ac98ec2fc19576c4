import Crypto
import Foundation
import LiveActivityKit

/// The backend's word that its app may report under a key: the one way, besides the key's start
/// having been sent to the device, that a device's update token or channel listener is taken.
/// Everything an app ships can be read out of it, its client key included, so the client key
/// alone must not let one install put its own token under another person's key and be sent that
/// person's updates. The backend asks for a grant with its server key (`POST /v1/grants`) when its
/// app requests an activity itself, and hands it to the app, which reports with it.
///
/// A grant may name a user instead, or too: the app's push-to-start token is then taken with that
/// user id (`{"users": [...]}` audiences reach it), which otherwise any install could claim.
///
/// `lrg1.<payload>.<signature>`, both base64url: the payload is `{"app", "key", "user", "exp"}`
/// (key or user left out when not granted; `exp` in UNIX seconds), signed with HMAC-SHA256 under a
/// key derived from the master key, so every instance sharing the master key checks the others'.
struct ActivityGrant: Sendable, Hashable {
    var app: String
    var key: String?
    var user: String?
    var expiresAt: Date

    /// What a report asks a grant for.
    enum Scope: Sendable, Hashable {
        case key(String)
        case user(String)
    }

    static let prefix = "lrg1."
    /// What `LiveRelayKit` and the derived key are named by.
    static let purpose = "liverelay activity grants v1"
    static let defaultLifetime: TimeInterval = 3600
    /// A grant lives at most a day: it is asked for when the activity is, and an activity lives 8 hours.
    static let longestLifetime: TimeInterval = 86_400

    func signed(with secret: SymmetricKey) -> String {
        var members: JSONValue.Members = [("app", .string(app))]
        if let key { members.append(("key", .string(key))) }
        if let user { members.append(("user", .string(user))) }
        members.append(("exp", .integer(Int64(expiresAt.timeIntervalSince1970.rounded(.up)))))
        let payload = JSONValue.object(members).serialized
        let signature = HMAC<SHA256>.authenticationCode(for: payload, using: secret)
        return Self.prefix + Self.base64URL(Data(payload)) + "." + Self.base64URL(Data(signature))
    }

    /// Passes when this server signed `text` for `app` and `scope` (its key, or its user) and it
    /// has not expired.
    static func check(_ text: String, app: String, for scope: Scope, secret: SymmetricKey, at now: Date) throws(RelayError) {
        func refused(_ why: String) -> RelayError { RelayError(.forbidden, .grantRefused, message: why, field: "grant") }
        guard text.hasPrefix(prefix) else { throw refused("is not a LiveRelay grant (it starts with \(prefix))") }
        let parts = text.dropFirst(prefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let payload = data(base64URL: parts[0]), let signature = data(base64URL: parts[1]) else {
            throw refused("is not a LiveRelay grant (lrg1.<payload>.<signature>)")
        }
        guard HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: payload, using: secret) else {
            throw refused("was not signed by this server (or by one with another master key)")
        }
        guard let fields = try? JSONValue(parsing: Array(payload)), let grantedApp = fields["app"]?.stringValue,
            case .number(let literal)? = fields["exp"], let expiry = Double(literal)
        else { throw refused("is damaged") }
        guard grantedApp == app else { throw refused("is for another app (\(grantedApp))") }
        switch scope {
        case .key(let key):
            guard let granted = fields["key"]?.stringValue else { throw refused("grants no key (it is a user's)") }
            guard granted == key else { throw refused("is for another key (\(granted))") }
        case .user(let user):
            guard let granted = fields["user"]?.stringValue else { throw refused("grants no user (it is a key's)") }
            guard granted == user else { throw refused("is for another user") }
        }
        guard now.timeIntervalSince1970 < expiry else {
            throw refused("expired at \(Date(timeIntervalSince1970: expiry).iso8601): the backend asks for a new one")
        }
    }

    private static func base64URL(_ data: Data) -> String {
        data.base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    private static func data(base64URL text: Substring) -> Data? {
        guard text.utf8.count <= 1_024, text.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
            return nil
        }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
