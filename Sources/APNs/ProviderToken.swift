import Crypto
import Foundation
import LiveActivityKit
import Synchronization

/// The `.p8` key APNs provider tokens are signed with, and who it belongs to.
public struct APNsSigningKey: Sendable {
    /// The 10-character key id shown in the developer account (JWT header `kid`).
    public let keyID: String
    /// The 10-character team id (JWT claim `iss`).
    public let teamID: String
    let privateKey: P256.Signing.PrivateKey

    /// From the PEM text of a `.p8` file (a PKCS#8 "PRIVATE KEY" block holding a P-256 key).
    public init(pem: String, keyID: String, teamID: String) throws(APNsConfigurationError) {
        try Self.checkIdentifier(keyID, field: "key-id")
        try Self.checkIdentifier(teamID, field: "team-id")
        do {
            self.privateKey = try P256.Signing.PrivateKey(pemRepresentation: pem)
        } catch {
            throw APNsConfigurationError(
                field: "key-file", message: "is not a PEM P-256 private key (.p8 from the developer account): \(error)")
        }
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Reads a `.p8` file.
    public init(p8File path: String, keyID: String, teamID: String) throws(APNsConfigurationError) {
        let pem: String
        do {
            pem = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw APNsConfigurationError(field: "key-file", message: "cannot be read at \(path): \(error.localizedDescription)")
        }
        try self.init(pem: pem, keyID: keyID, teamID: teamID)
    }

    public init(privateKey: P256.Signing.PrivateKey, keyID: String, teamID: String) throws(APNsConfigurationError) {
        try Self.checkIdentifier(keyID, field: "key-id")
        try Self.checkIdentifier(teamID, field: "team-id")
        self.privateKey = privateKey
        self.keyID = keyID
        self.teamID = teamID
    }

    private static func checkIdentifier(_ value: String, field: String) throws(APNsConfigurationError) {
        guard value.count == 10, value.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) }) else {
            throw APNsConfigurationError(field: field, message: "must be the 10-character identifier from the developer account, got \"\(value)\"")
        }
    }

    /// An ES256 provider token: header `{"alg":"ES256","kid":…}`, claims `{"iss":…,"iat":…}` with
    /// `iat` in whole UNIX seconds, signed with the raw 64-byte r‖s signature JWS requires.
    public func makeProviderToken(issuedAt: Date) -> String {
        let header = #"{"alg":"ES256","kid":"\#(keyID)"}"#
        let claims = #"{"iss":"\#(teamID)","iat":\#(unixSeconds(issuedAt))}"#
        let signingInput = base64URL(Data(header.utf8)) + "." + base64URL(Data(claims.utf8))
        // P-256 signing of in-memory bytes cannot fail.
        let signature = try! privateKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + base64URL(signature.rawRepresentation)
    }
}

/// Base64url without padding (RFC 7515), as JWTs are written.
package func base64URL(_ data: Data) -> String {
    data.base64EncodedString()
        .replacingOccurrences(of: "+", with: "-")
        .replacingOccurrences(of: "/", with: "_")
        .replacingOccurrences(of: "=", with: "")
}

/// Reads base64url with or without padding.
package func base64URLDecoded(_ text: some StringProtocol) -> Data? {
    var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
    while base64.count % 4 != 0 { base64 += "=" }
    return Data(base64Encoded: base64)
}

/// When to make a new provider token. APNs refuses a token older than an hour and one replaced
/// more often than every 20 minutes on a connection, so one token is shared by all connections,
/// reused for 50 minutes, and never replaced sooner than 20 minutes after it was made, even
/// when APNs calls it expired (then this machine's clock is wrong and a new one would not help).
struct ProviderTokenStateMachine: Sendable {
    static let reuseInterval: TimeInterval = 50 * 60
    static let minimumReplacementInterval: TimeInterval = 20 * 60

    struct Token: Sendable, Hashable {
        var value: String
        var issuedAt: Date
    }

    enum Action: Equatable {
        case use(String)
        case make(issuedAt: Date)
    }

    private(set) var current: Token?

    /// The token to put on a request now, or that a new one must be made.
    func token(now: Date) -> Action {
        if let current, age(of: current, now: now) < Self.reuseInterval {
            return .use(current.value)
        }
        return .make(issuedAt: now)
    }

    mutating func installed(_ token: Token) {
        current = token
    }

    /// APNs answered `ExpiredProviderToken` to a request that carried `rejected`. Returns whether
    /// the request should be retried (with a token that `token(now:)` then gives).
    mutating func rejectedAsExpired(_ rejected: String, now: Date) -> Bool {
        guard let current, current.value == rejected else {
            return true  // already replaced since that request was sent
        }
        guard age(of: current, now: now) >= Self.minimumReplacementInterval else {
            return false
        }
        self.current = nil
        return true
    }

    private func age(of token: Token, now: Date) -> TimeInterval {
        max(0, now.timeIntervalSince(token.issuedAt))
    }
}

/// The provider token shared by every connection of a client.
final class ProviderTokenCache: Sendable {
    private let key: APNsSigningKey
    private let now: @Sendable () -> Date
    private let state = Mutex(ProviderTokenStateMachine())

    init(key: APNsSigningKey, now: @escaping @Sendable () -> Date) {
        self.key = key
        self.now = now
    }

    func currentToken() -> String {
        let now = self.now()
        return state.withLock { machine in
            switch machine.token(now: now) {
            case .use(let token):
                return token
            case .make(let issuedAt):
                let token = key.makeProviderToken(issuedAt: issuedAt)
                machine.installed(.init(value: token, issuedAt: issuedAt))
                return token
            }
        }
    }

    func rejectedAsExpired(_ token: String) -> Bool {
        let now = self.now()
        return state.withLock { $0.rejectedAsExpired(token, now: now) }
    }
}

/// A configuration problem found before anything is sent: the field and the rule.
public struct APNsConfigurationError: Error, Hashable, CustomStringConvertible {
    public let field: String
    public let message: String

    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { "\(field): \(message)" }
}
