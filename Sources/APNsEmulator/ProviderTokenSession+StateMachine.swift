import APNs
import Foundation
import LiveActivityKit

/// How APNs treats the provider tokens of one connection (spec §4): the first accepted token
/// binds the connection to its team and key; a token older than an hour is expired; a new token
/// within 20 minutes of the previous one is refused. A token already verified on this
/// connection is not verified again: one signature check per token, not per push.
struct ProviderTokenSession {
    static let maximumAge: TimeInterval = 3600
    static let minimumReplacementInterval: TimeInterval = 20 * 60
    /// Clock skew tolerated for an `iat` in the future.
    static let allowedSkew: TimeInterval = 300

    private var pinnedKey: EmulatorKey?
    private var currentToken: String?
    private var currentTokenSince: Date?
    private var verified: (token: String, value: VerifiedProviderToken)?

    /// Checks `authorization` for a request to `bundleID`; `nil` means authenticated.
    /// `topicRejection` is the reason when the key may not push to the bundle (`TopicDisallowed`
    /// for pushes, `TopicMismatch` for channel management).
    mutating func authenticate(
        authorization: String?, bundleID: String, environment: PushEnvironment, now: Date,
        registry: EmulatorRegistry, topicRejection: APNsReason
    ) -> APNsReason? {
        guard let authorization, let token = BearerAuthorization.credential(authorization) else { return .missingProviderToken }

        let check: VerifiedProviderToken
        if let verified, verified.token == token {
            check = verified.value
        } else {
            guard let value = verifyProviderToken(token, registry: registry) else { return .invalidProviderToken }
            check = value
        }
        guard check.key.environments.contains(environment) else { return .badEnvironmentKeyIdInToken }
        if now.timeIntervalSince(check.issuedAt) > Self.maximumAge { return .expiredProviderToken }
        if check.issuedAt.timeIntervalSince(now) > Self.allowedSkew { return .invalidProviderToken }
        if let pinnedKey {
            if pinnedKey.teamID != check.key.teamID { return .invalidProviderToken }
            let bothTeamKeys = pinnedKey.scope == .team && check.key.scope == .team
            if pinnedKey.keyID != check.key.keyID, !bothTeamKeys { return .unrelatedKeyIdInToken }
        }
        guard check.key.allows(bundleID: bundleID) else { return topicRejection }
        if token != currentToken {
            if let since = currentTokenSince, now.timeIntervalSince(since) < Self.minimumReplacementInterval {
                return .tooManyProviderTokenUpdates
            }
            currentToken = token
            currentTokenSince = now
        }
        verified = (token, check)
        if pinnedKey == nil { pinnedKey = check.key }
        return nil
    }
}
