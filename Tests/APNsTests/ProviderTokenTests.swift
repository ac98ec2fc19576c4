import Crypto
import Foundation
import LiveActivityKit
import LiveRelayTesting
import Testing

@testable import APNs

/// Checks a provider token as APNs does: ES256 over `header.claims` with the team's public key.
func verifyProviderToken(_ token: String, with publicKey: P256.Signing.PublicKey) -> (header: JSONValue, claims: JSONValue)? {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3,
        let header = base64URLDecoded(parts[0]), let claims = base64URLDecoded(parts[1]), let signature = base64URLDecoded(parts[2]),
        let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
        publicKey.isValidSignature(ecdsa, for: Data((parts[0] + "." + parts[1]).utf8)),
        let headerJSON = try? JSONValue(parsing: Array(header)), let claimsJSON = try? JSONValue(parsing: Array(claims))
    else { return nil }
    return (headerJSON, claimsJSON)
}

@Suite struct ProviderTokenTests {
    @Test func tokenIsAnES256JWTWithKidIssAndNumericIat() throws {
        let key = TestSigningKey(keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        let token = key.signingKey.makeProviderToken(issuedAt: Date(timeIntervalSince1970: 1_795_000_000.7))
        let decoded = try #require(verifyProviderToken(token, with: key.publicKey))
        #expect(decoded.header == .object([("alg", .string("ES256")), ("kid", .string("ABC123DEFG"))]))
        #expect(decoded.claims == .object([("iss", .string("DEF123GHIJ")), ("iat", .number("1795000000"))]))
        // The raw r‖s signature JWS requires: 64 bytes, not DER.
        #expect(base64URLDecoded(token.split(separator: ".")[2])?.count == 64)
    }

    @Test func anotherKeyDoesNotVerify() {
        let token = TestSigningKey().signingKey.makeProviderToken(issuedAt: Date())
        #expect(verifyProviderToken(token, with: TestSigningKey().publicKey) == nil)
    }

    @Test func keyIsReadFromAPKCS8PEMFile() throws {
        let key = P256.Signing.PrivateKey()
        let path = TestFiles.path("AuthKey", pathExtension: "p8")
        try key.pemRepresentation.write(toFile: path, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: path) }
        #expect(key.pemRepresentation.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        let signing = try APNsSigningKey(p8File: path, keyID: "ABC123DEFG", teamID: "DEF123GHIJ")
        #expect(verifyProviderToken(signing.makeProviderToken(issuedAt: Date()), with: key.publicKey) != nil)
    }

    @Test func badKeysAndIdentifiersAreNamed() {
        let pem = P256.Signing.PrivateKey().pemRepresentation
        #expect(
            throws: APNsConfigurationError(field: "key-id", message: "must be the 10-character identifier from the developer account, got \"SHORT\"")
        ) {
            try APNsSigningKey(pem: pem, keyID: "SHORT", teamID: "DEF123GHIJ")
        }
        let error = #expect(throws: APNsConfigurationError.self) { try APNsSigningKey(pem: "not a key", keyID: "ABC123DEFG", teamID: "DEF123GHIJ") }
        #expect(error?.field == "key-file")
    }
}

@Suite struct ProviderTokenStateMachineTests {
    let start = Date(timeIntervalSince1970: 1_795_000_000)

    func installed(at date: Date) -> ProviderTokenStateMachine {
        var machine = ProviderTokenStateMachine()
        #expect(machine.token(now: date) == .make(issuedAt: date))
        machine.installed(.init(value: "t1", issuedAt: date))
        return machine
    }

    @Test func aTokenIsReusedFor50Minutes() {
        let machine = installed(at: start)
        #expect(machine.token(now: start.addingTimeInterval(49 * 60 + 59)) == .use("t1"))
        #expect(machine.token(now: start.addingTimeInterval(50 * 60)) == .make(issuedAt: start.addingTimeInterval(50 * 60)))
    }

    @Test func anExpiredAnswerReplacesATokenAtLeast20MinutesOld() {
        var machine = installed(at: start)
        let later = start.addingTimeInterval(25 * 60)
        let retry = machine.rejectedAsExpired("t1", now: later)
        #expect(retry)
        #expect(machine.token(now: later) == .make(issuedAt: later))
    }

    @Test func aTokenIsNeverReplacedWithin20Minutes() {
        var machine = installed(at: start)
        let retry = machine.rejectedAsExpired("t1", now: start.addingTimeInterval(19 * 60))
        #expect(!retry)
        #expect(machine.token(now: start.addingTimeInterval(19 * 60)) == .use("t1"))
    }

    @Test func anAnswerAboutAnOlderTokenRetriesWithTheCurrentOne() {
        var machine = installed(at: start)
        machine.installed(.init(value: "t2", issuedAt: start.addingTimeInterval(60)))
        let retry = machine.rejectedAsExpired("t1", now: start.addingTimeInterval(61))
        #expect(retry)
        #expect(machine.token(now: start.addingTimeInterval(61)) == .use("t2"))
    }

    @Test func aClockGoingBackDoesNotReplaceTheToken() {
        let machine = installed(at: start)
        #expect(machine.token(now: start.addingTimeInterval(-3600)) == .use("t1"))
    }
}
