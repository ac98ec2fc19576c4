import Crypto
import Foundation
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import Testing

/// The master key seals the apps' signing keys: what it sealed opens with it alone, for the app
/// it was sealed for alone, and a rotation re-seals every key and webhook secret, or none.
struct MasterKeyTests {
    let pem = P256.Signing.PrivateKey().pemRepresentation

    @Test func aSealedKeyOpensWithItsMasterKeyForItsAppAndHidesThePEM() throws {
        let key = MasterKey.generate()
        let sealed = key.seal(pem, for: "com.a")
        #expect(sealed.hasPrefix("sealed:v1:\(key.id):") && MasterKey.isSealed(sealed))
        for line in pem.split(separator: "\n") where !line.hasPrefix("-----") { #expect(!sealed.contains(line)) }
        #expect(try key.open(sealed, for: "com.a") == pem)
        // Sealed twice, never the same text: a fresh nonce each time.
        #expect(key.seal(pem, for: "com.a") != sealed)
        // Copied to another app's row, it does not open.
        #expect(throws: MasterKeyError.damaged(owner: "com.b")) { try key.open(sealed, for: "com.b") }
        #expect(throws: MasterKeyError.notSealed) { try key.open(pem, for: "com.a") }
    }

    @Test func anotherMasterKeyIsNamedAndAnAlteredValueRefused() throws {
        let (key, other) = (MasterKey.generate(), MasterKey.generate())
        let sealed = key.seal(pem, for: "com.a")
        #expect(throws: MasterKeyError.otherKey(owner: "com.a", sealedWith: key.id, given: other.id)) { try other.open(sealed, for: "com.a") }
        #expect(
            MasterKeyError.otherKey(owner: "com.a", sealedWith: key.id, given: other.id).description.contains(
                "sealed with master key \(key.id), and the key given is \(other.id)"))
        // One character of the ciphertext changed: the tag no longer matches.
        var altered = Array(sealed)
        let index = altered.count - 10
        altered[index] = altered[index] == "A" ? "B" : "A"
        #expect(throws: MasterKeyError.damaged(owner: "com.a")) { try key.open(String(altered), for: "com.a") }
        #expect(throws: MasterKeyError.damaged(owner: "com.a")) { try key.open("sealed:v1:\(key.id):not base64!", for: "com.a") }
    }

    @Test func aMasterKeyIsThirtyTwoBytesOfBase64() throws {
        let key = MasterKey.generate()
        let read = try MasterKey(base64: "  " + key.base64 + "\n")
        #expect(read.id == key.id)
        #expect(throws: MasterKeyError.malformed("must be 32 bytes, got 16")) {
            try MasterKey(base64: Data(repeating: 1, count: 16).base64EncodedString())
        }
        #expect(throws: MasterKeyError.malformed("must be 32 bytes in base64 (make one: head -c 32 /dev/urandom | base64)")) {
            try MasterKey(base64: "not a key")
        }
    }

    @Test func aRotationResealsEveryKeyOnceAndARefusedOneChangesNothing() async throws {
        let path = TestFiles.path("master-key", pathExtension: "sqlite")
        let store = try await SQLiteStore.open(path: path)
        try await store.migrate()
        let (current, next, stranger) = (MasterKey.generate(), MasterKey.generate(), MasterKey.generate())
        let at = Date(timeIntervalSince1970: 1_800_000_000)
        let pems = ["com.a": pem, "com.b": P256.Signing.PrivateKey().pemRepresentation, "com.c": P256.Signing.PrivateKey().pemRepresentation]
        func app(_ bundleID: String, _ stored: String) -> AppRecord {
            AppRecord(bundleID: bundleID, teamID: "TEAM000001", keyID: "KEY0000001", sealedSigningKey: stored, createdAt: at, updatedAt: at)
        }
        // Two sealed under the current key, one in plain text (a store of an earlier release).
        try await store.saveApps([
            app("com.a", current.seal(pems["com.a"]!, for: "com.a")), app("com.b", current.seal(pems["com.b"]!, for: "com.b")),
            app("com.c", pems["com.c"]!),
        ])
        // A webhook endpoint's secret, in plain text too.
        _ = try await store.insertWebhookEndpoint(
            WebhookEndpointRecord(id: "we_1", bundleID: "com.a", url: "https://hooks.example.com/1", secret: "whsec_plain", createdAt: at),
            limit: .max)
        func opened(with key: MasterKey) async throws -> [String: String] {
            Dictionary(uniqueKeysWithValues: try await store.apps().map { ($0.bundleID, try key.open($0.sealedSigningKey, for: $0.bundleID)) })
        }

        // A key that opens none of them: refused, nothing changed.
        let before = try await store.apps()
        await #expect(throws: MasterKeyError.otherKey(owner: "com.a", sealedWith: current.id, given: stranger.id)) {
            try await RelayService.resealSecrets(in: store, from: stranger, to: next)
        }
        #expect(try await store.apps() == before)

        #expect(try await RelayService.resealSecrets(in: store, from: current, to: next) == 4)
        #expect(try await opened(with: next) == pems)
        let endpoint = try #require(try await store.webhookEndpoint(id: "we_1"))
        #expect(try next.open(endpoint.secret, for: "we_1") == "whsec_plain")
        // Run again (an interrupted rotation finished), nothing is left to do.
        #expect(try await RelayService.resealSecrets(in: store, from: current, to: next) == 0)
        // The same key on both sides is the start's check: it seals nothing more and opens all.
        #expect(try await RelayService.resealSecrets(in: store, from: next, to: next) == 0)
        await #expect(throws: MasterKeyError.self) { try await RelayService.resealSecrets(in: store, from: current, to: current) }
    }
}
