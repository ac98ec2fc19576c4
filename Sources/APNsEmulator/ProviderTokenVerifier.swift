import APNs
import Crypto
import Foundation
import LiveActivityKit

/// A provider token whose signature checked out against a registered key.
struct VerifiedProviderToken {
    var key: EmulatorKey
    var issuedAt: Date
}

/// Reads and verifies `authorization: bearer <JWT>` the way APNs accepts it in practice: ES256
/// with the raw 64-byte signature JWS specifies or the DER form some clients send, and `iat` as a
/// number or a numeric string. `nil` for anything else: APNs answers `InvalidProviderToken`.
func verifyProviderToken(_ token: String, registry: EmulatorRegistry) -> VerifiedProviderToken? {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3,
        let headerBytes = base64URLDecoded(parts[0]), let claimBytes = base64URLDecoded(parts[1]),
        let signatureBytes = base64URLDecoded(parts[2]),
        let header = try? JSONValue(parsing: headerBytes), let claims = try? JSONValue(parsing: claimBytes),
        header["alg"]?.stringValue == "ES256", let keyID = header["kid"]?.stringValue,
        let teamID = claims["iss"]?.stringValue, let issuedAt = numericIssuedAt(claims["iat"])
    else {
        return nil
    }
    guard let key = registry.key(keyID), key.teamID == teamID else {
        return nil
    }
    let signature: P256.Signing.ECDSASignature? =
        signatureBytes.count == 64
        ? try? P256.Signing.ECDSASignature(rawRepresentation: signatureBytes)
        : try? P256.Signing.ECDSASignature(derRepresentation: signatureBytes)
    guard let signature, key.publicKey.isValidSignature(signature, for: Data((parts[0] + "." + parts[1]).utf8)) else {
        return nil
    }
    return VerifiedProviderToken(key: key, issuedAt: Date(timeIntervalSince1970: issuedAt))
}

/// `iat` as APNs takes it: a number, or a string of digits (APNSwift and kalyke send strings).
private func numericIssuedAt(_ value: JSONValue?) -> Double? {
    switch value {
    case .number(let literal): Double(literal)
    case .string(let text) where !text.isEmpty && text.allSatisfy(\.isNumber): Double(text)
    default: nil
    }
}
