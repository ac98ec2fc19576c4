import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayTesting
import Testing

@testable import APNsEmulator

/// The provider-token rules of one connection (spec §4), without I/O.
@Suite struct ProviderTokenSessionTests {
    let registry = EmulatorRegistry()
    let teamKey = TestSigningKey(keyID: "TEAMKEY001", teamID: "TEAMID1234")
    let secondTeamKey = TestSigningKey(keyID: "TEAMKEY002", teamID: "TEAMID1234")
    let topicKey = TestSigningKey(keyID: "TOPICKEY01", teamID: "TEAMID1234")
    let otherTeamKey = TestSigningKey(keyID: "OTHERKEY01", teamID: "OTHERTEAM1")
    let start = Date(timeIntervalSince1970: 1_795_000_000)

    init() {
        for key in [teamKey, secondTeamKey, otherTeamKey] {
            registry.register(EmulatorKey(keyID: key.signingKey.keyID, teamID: key.signingKey.teamID, publicKey: key.publicKey))
        }
        registry.register(
            EmulatorKey(keyID: topicKey.signingKey.keyID, teamID: "TEAMID1234", publicKey: topicKey.publicKey, scope: .topics(["com.example.app"])))
    }

    func check(_ session: inout ProviderTokenSession, _ token: String, at now: Date) -> APNsReason? {
        session.authenticate(
            authorization: "bearer \(token)", bundleID: "com.example.app", environment: .sandbox,
            now: now, registry: registry, topicRejection: .topicDisallowed)
    }

    func token(_ key: TestSigningKey, at date: Date) -> String { key.signingKey.makeProviderToken(issuedAt: date) }

    /// The same claims, signed with a DER signature and written with a string `iat`, as some
    /// deployed clients do.
    func lenientToken(_ key: TestSigningKey, at date: Date) throws -> String {
        let input =
            base64URL(Data(#"{"alg":"ES256","kid":"\#(key.signingKey.keyID)","typ":"JWT"}"#.utf8)) + "."
            + base64URL(Data(#"{"iss":"\#(key.signingKey.teamID)","iat":"\#(Int(date.timeIntervalSince1970))"}"#.utf8))
        let signature = try key.privateKey.signature(for: Data(input.utf8)).derRepresentation
        #expect(signature.count > 64)
        return input + "." + base64URL(signature)
    }

    @Test func derSignaturesAndStringIatAreAccepted() throws {
        var session = ProviderTokenSession()
        #expect(check(&session, try lenientToken(teamKey, at: start), at: start) == nil)
    }

    @Test func aTokenIsValidForAnHour() {
        var session = ProviderTokenSession()
        let t = token(teamKey, at: start)
        #expect(check(&session, t, at: start.addingTimeInterval(3600)) == nil)
        #expect(check(&session, t, at: start.addingTimeInterval(3601)) == .expiredProviderToken)
    }

    @Test func aTokenFromTheFutureIsInvalid() {
        var session = ProviderTokenSession()
        #expect(check(&session, token(teamKey, at: start.addingTimeInterval(600)), at: start) == .invalidProviderToken)
    }

    @Test func aNewTokenWithin20MinutesOnOneConnectionIsTooManyUpdates() {
        var session = ProviderTokenSession()
        let first = token(teamKey, at: start)
        #expect(check(&session, first, at: start) == nil)
        let early = start.addingTimeInterval(19 * 60)
        #expect(check(&session, token(teamKey, at: early), at: early) == .tooManyProviderTokenUpdates)
        // The old one still works, and after 20 minutes a new one is taken.
        #expect(check(&session, first, at: early) == nil)
        let later = start.addingTimeInterval(20 * 60)
        #expect(check(&session, token(teamKey, at: later), at: later) == nil)
        // Another connection is not affected.
        var other = ProviderTokenSession()
        #expect(check(&other, token(teamKey, at: early), at: early) == nil)
    }

    @Test func theConnectionIsPinnedToItsTeam() {
        var session = ProviderTokenSession()
        #expect(check(&session, token(teamKey, at: start), at: start) == nil)
        let later = start.addingTimeInterval(30 * 60)
        #expect(check(&session, token(otherTeamKey, at: later), at: later) == .invalidProviderToken)
    }

    @Test func teamKeysOfOneTeamAreRelatedButATopicKeyIsNot() {
        var session = ProviderTokenSession()
        #expect(check(&session, token(teamKey, at: start), at: start) == nil)
        let later = start.addingTimeInterval(30 * 60)
        #expect(check(&session, token(secondTeamKey, at: later), at: later) == nil)
        let evenLater = start.addingTimeInterval(60 * 60)
        #expect(check(&session, token(topicKey, at: evenLater), at: evenLater) == .unrelatedKeyIdInToken)
    }

    @Test func missingOrMalformedAuthorization() {
        var session = ProviderTokenSession()
        for header in [nil, "", "bearer", "bearer   ", "basic abc"] as [String?] {
            #expect(
                session.authenticate(
                    authorization: header, bundleID: "com.example.app", environment: .sandbox,
                    now: start, registry: registry, topicRejection: .topicDisallowed) == .missingProviderToken)
        }
        #expect(check(&session, "not-a-jwt", at: start) == .invalidProviderToken)
        let t = token(teamKey, at: start)
        #expect(check(&session, t.dropLast(4) + "AAAA", at: start) == .invalidProviderToken, "a wrong signature")
    }

    @Test func theBearerTokenIsReadInAnyCaseWithoutTheBlanksHTTPAllowsAroundIt() {
        #expect(BearerAuthorization.credential("bearer abc.def") == "abc.def")
        #expect(BearerAuthorization.credential("Bearer abc") == "abc")
        #expect(BearerAuthorization.credential("BEARER abc") == "abc")
        #expect(BearerAuthorization.credential("bearer  \tabc \t ") == "abc")
        #expect(BearerAuthorization.credential("bearer a b") == "a b", "blanks inside are the token's (and fail its check)")
        for header in ["", "bearer", "bearer ", "bearer \t ", "bearer\tabc", "bearerabc", "beare abc", "bearer\u{0}abc", "basic abc", "bëarer abc"] {
            #expect(BearerAuthorization.credential(header) == nil, "\(header.debugDescription)")
        }
        var session = ProviderTokenSession()
        #expect(
            session.authenticate(
                authorization: "Bearer  \(token(teamKey, at: start)) ", bundleID: "com.example.app",
                environment: .sandbox, now: start, registry: registry, topicRejection: .topicDisallowed) == nil)
    }
}
