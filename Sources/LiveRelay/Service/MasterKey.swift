import Crypto
import Foundation

/// The key that seals the apps' APNs signing keys in the store (AES-256-GCM), so that a copy of
/// the database, a backup or a replica cannot sign pushes. It is never stored with them: it comes
/// from a file or the environment (`liverelay serve --master-key-file`, `LIVERELAY_MASTER_KEY`).
package struct MasterKey: Sendable {
    private let key: SymmetricKey
    /// Names the key without revealing it (the first 4 bytes of its SHA-256, hex), written into
    /// every sealed value so that a value sealed by another key is told apart from a damaged one.
    package let id: String

    package static let byteCount = 32
    /// How to make one, for messages.
    package static let howToMake = "head -c 32 /dev/urandom | base64"

    package init(bytes: some ContiguousBytes) throws(MasterKeyError) {
        let key = SymmetricKey(data: bytes)
        guard key.bitCount == Self.byteCount * 8 else { throw .malformed("must be \(Self.byteCount) bytes, got \(key.bitCount / 8)") }
        self.key = key
        self.id = key.withUnsafeBytes { SHA256.hash(data: $0) }.prefix(4).map { String(format: "%02x", $0) }.joined()
    }

    /// The key written as base64 (surrounding white space ignored), as in its file.
    package init(base64 text: String) throws(MasterKeyError) {
        guard let data = Data(base64Encoded: text.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw .malformed("must be \(Self.byteCount) bytes in base64 (make one: \(Self.howToMake))")
        }
        try self.init(bytes: data)
    }

    /// A new random key.
    package static func generate() -> MasterKey { try! MasterKey(bytes: SymmetricKey(size: .bits256)) }

    /// A key of its own for `purpose`, derived from this one (HKDF-SHA256): whoever holds the
    /// master key can make it again, and it opens nothing sealed.
    package func derivedKey(for purpose: String) -> SymmetricKey {
        HKDF<SHA256>.deriveKey(inputKeyMaterial: key, info: Data(purpose.utf8), outputByteCount: 32)
    }

    /// The key as its file holds it.
    package var base64: String { key.withUnsafeBytes { Data($0).base64EncodedString() } }

    // MARK: Sealed values

    /// What starts every sealed value; a stored value without it was stored in plain text.
    static let sealedPrefix = "sealed:v1:"

    package static func isSealed(_ stored: String) -> Bool { stored.hasPrefix(sealedPrefix) }

    /// `secret` sealed for `owner` (the app's bundle ID): `sealed:v1:<key id>:<base64 of nonce,
    /// ciphertext and tag>`. The owner is authenticated data, so a sealed value copied to another
    /// app's row does not open there.
    package func seal(_ secret: String, for owner: String) -> String {
        let box = try! AES.GCM.seal(Data(secret.utf8), using: key, authenticating: Data(owner.utf8))
        return Self.sealedPrefix + id + ":" + box.combined!.base64EncodedString()
    }

    /// The secret `sealed` holds for `owner`.
    package func open(_ sealed: String, for owner: String) throws(MasterKeyError) -> String {
        guard Self.isSealed(sealed) else { throw .notSealed }
        let parts = sealed.dropFirst(Self.sealedPrefix.count).split(separator: ":", maxSplits: 1)
        guard parts.count == 2, let combined = Data(base64Encoded: String(parts[1])) else { throw .damaged(owner: owner) }
        guard parts[0] == id else { throw .otherKey(owner: owner, sealedWith: String(parts[0]), given: id) }
        do {
            let box = try AES.GCM.SealedBox(combined: combined)
            let opened = try AES.GCM.open(box, using: key, authenticating: Data(owner.utf8))
            guard let secret = String(data: opened, encoding: .utf8) else { throw MasterKeyError.damaged(owner: owner) }
            return secret
        } catch {
            throw .damaged(owner: owner)
        }
    }
}

/// Why a master key or a sealed value cannot be used; said in one line.
package enum MasterKeyError: Error, Equatable, CustomStringConvertible {
    case malformed(String)
    case notSealed
    case otherKey(owner: String, sealedWith: String, given: String)
    case damaged(owner: String)

    package var description: String {
        switch self {
        case .malformed(let rule): "the master key \(rule)"
        case .notSealed: "the value is not sealed"
        case .otherKey(let owner, let sealedWith, let given):
            "\(owner)'s signing key is sealed with master key \(sealedWith), and the key given is \(given): start with the master key the store was sealed with (--master-key-file or LIVERELAY_MASTER_KEY)"
        case .damaged(let owner): "\(owner)'s sealed signing key does not open with this master key: it was altered, or copied from another app"
        }
    }
}
