/// What to do after APNs refused a request, following Apple's guidance.
public enum APNsRetryAdvice: String, Sendable, Hashable, CaseIterable {
    /// A server-side problem: retry later with exponential back-off (Apple: after up to 15 minutes).
    case retryWithBackoff = "retry_with_backoff"
    /// Throttled: retry after a delay, more slowly.
    case retryAfterDelay = "retry_after_delay"
    /// The provider token expired: make a new one and retry (the client does this once by itself).
    case refreshTokenAndRetry = "refresh_token_and_retry"
    /// The token (or channel) is no longer valid: stop sending to it.
    case dropToken = "drop_token"
    /// The request or the credentials are wrong: retrying the same request fails again.
    case fixRequest = "fix_request"
}

/// The `reason` of an APNs error answer. Strings Apple adds later decode as `.unknown`, which is
/// classified by status code.
public struct APNsReason: Sendable, Hashable, CustomStringConvertible {
    /// The reason string exactly as APNs sent it.
    public let rawValue: String

    public init(_ rawValue: String) { self.rawValue = rawValue }

    public var description: String { rawValue }

    /// The documented entry for this reason, or `nil` if APNs sent a string we do not know.
    public var known: Entry? { Self.table[rawValue] }

    public var isKnown: Bool { known != nil }

    /// One row of Apple's reason tables (device pushes, broadcasts, channel management).
    public struct Entry: Sendable, Hashable {
        public let reason: APNsReason
        /// The status APNs answers this reason with.
        public let status: Int
        public let meaning: String
        public let advice: APNsRetryAdvice
        public let whatToDo: String
    }

    /// How to react, following Apple's guidance; an unknown reason by its status code.
    public func advice(status: Int) -> APNsRetryAdvice {
        if let known { return known.advice }
        switch status {
        case 410: return .dropToken
        case 429: return .retryAfterDelay
        case 500...: return .retryWithBackoff
        default: return .fixRequest
        }
    }

    /// Every documented reason, with its status, meaning and advice (a table: a row a line).
    // swift-format-ignore
    public static let all: [Entry] = [
        // Device pushes (/3/device)
        .init(reason: .badCollapseId, status: 400, meaning: "The collapse identifier exceeds the maximum allowed size (64 bytes).", advice: .fixRequest, whatToDo: "Shorten apns-collapse-id to 64 bytes or less."),
        .init(reason: .badDeviceToken, status: 400, meaning: "The device token is invalid, or belongs to the other environment (sandbox vs production).", advice: .dropToken, whatToDo: "Check the environment; otherwise stop sending to this token."),
        .init(reason: .badExpirationDate, status: 400, meaning: "The apns-expiration value is invalid (on a No-Message-Stored channel only 0 is allowed).", advice: .fixRequest, whatToDo: "Send an absolute UNIX time in seconds, or 0."),
        .init(reason: .badMessageId, status: 400, meaning: "The apns-id (or apns-request-id) value is not a UUID.", advice: .fixRequest, whatToDo: "Send a canonical UUID, or leave the header out."),
        .init(reason: .badPriority, status: 400, meaning: "The apns-priority value is invalid.", advice: .fixRequest, whatToDo: "Use 10 or 5 (1 also for broadcasts)."),
        .init(reason: .badTopic, status: 400, meaning: "The apns-topic value is invalid.", advice: .fixRequest, whatToDo: "Use the bundle id followed by .push-type.liveactivity."),
        .init(reason: .deviceTokenNotForTopic, status: 400, meaning: "The device token does not belong to this topic (for example a Live Activity token sent with the plain bundle-id topic).", advice: .dropToken, whatToDo: "Check the bundle id; otherwise stop sending to this token."),
        .init(reason: .duplicateHeaders, status: 400, meaning: "One or more headers were repeated.", advice: .fixRequest, whatToDo: "Send each header once."),
        .init(reason: .idleTimeout, status: 400, meaning: "The connection was idle too long.", advice: .retryWithBackoff, whatToDo: "Reconnect and retry."),
        .init(reason: .invalidPushType, status: 400, meaning: "The apns-push-type value is invalid (broadcasts: only LiveActivity).", advice: .fixRequest, whatToDo: "Send apns-push-type: liveactivity."),
        .init(reason: .missingDeviceToken, status: 400, meaning: "The :path has no device token.", advice: .fixRequest, whatToDo: "Put the token in /3/device/<token>."),
        .init(reason: .missingTopic, status: 400, meaning: "The apns-topic header is missing; token-based connections always need it.", advice: .fixRequest, whatToDo: "Send apns-topic: <bundle id>.push-type.liveactivity."),
        .init(reason: .payloadEmpty, status: 400, meaning: "The message payload is empty.", advice: .fixRequest, whatToDo: "Send a JSON payload with an aps dictionary."),
        .init(reason: .topicDisallowed, status: 400, meaning: "Pushing to this topic is not allowed (broadcasts: a push-type suffix was added to the bundle id in the path).", advice: .fixRequest, whatToDo: "Use the plain bundle id in broadcast paths; check the topic."),
        .init(reason: .badCertificate, status: 403, meaning: "The certificate is invalid.", advice: .fixRequest, whatToDo: "Live Activities use token authentication: send a provider token."),
        .init(reason: .badCertificateEnvironment, status: 403, meaning: "The client certificate is for the other environment.", advice: .fixRequest, whatToDo: "Use the certificate of this environment, or token authentication."),
        .init(reason: .expiredProviderToken, status: 403, meaning: "The provider token is stale (issued more than an hour ago).", advice: .refreshTokenAndRetry, whatToDo: "Make a new provider token and retry; check the clock of this machine."),
        .init(reason: .forbidden, status: 403, meaning: "The specified action is not allowed.", advice: .fixRequest, whatToDo: "Check the key's permissions and the topic."),
        .init(reason: .invalidProviderToken, status: 403, meaning: "The provider token is not valid, or its signature could not be verified.", advice: .fixRequest, whatToDo: "Check the key file, key id and team id."),
        .init(reason: .missingProviderToken, status: 403, meaning: "No provider token was sent and the connection has no certificate.", advice: .fixRequest, whatToDo: "Send authorization: bearer <provider token>."),
        .init(reason: .unrelatedKeyIdInToken, status: 403, meaning: "The key id is unrelated to the key used for the first push on this connection.", advice: .fixRequest, whatToDo: "Use one team's keys per connection; open a new connection for another key."),
        .init(reason: .badEnvironmentKeyIdInToken, status: 403, meaning: "The key id belongs to a key restricted to the other environment.", advice: .fixRequest, whatToDo: "Use a key of this environment, or send to the other environment's host."),
        .init(reason: .badEnvironmentKeyInToken, status: 403, meaning: "The key belongs to the other environment (the spelling seen in production logs).", advice: .fixRequest, whatToDo: "Use a key of this environment, or send to the other environment's host."),
        .init(reason: .badPath, status: 404, meaning: "The request path is invalid.", advice: .fixRequest, whatToDo: "Use /3/device/<token>, /4/broadcasts/apps/<bundle id> or /1/apps/<bundle id>/channels."),
        .init(reason: .methodNotAllowed, status: 405, meaning: "The :method is not allowed on this path.", advice: .fixRequest, whatToDo: "Use POST for pushes; GET, POST or DELETE for channels."),
        .init(reason: .expiredToken, status: 410, meaning: "The device token has expired.", advice: .dropToken, whatToDo: "Stop sending to this token."),
        .init(reason: .unregistered, status: 410, meaning: "The token is no longer active for the topic (the activity ended or was dismissed).", advice: .dropToken, whatToDo: "Stop sending to this token; the timestamp says since when."),
        .init(reason: .payloadTooLarge, status: 413, meaning: "The payload is too large (4096 bytes for device pushes, 5120 for broadcasts).", advice: .fixRequest, whatToDo: "Shrink the content state."),
        .init(reason: .tooManyProviderTokenUpdates, status: 429, meaning: "The provider token changed more than once in 20 minutes on this connection.", advice: .retryAfterDelay, whatToDo: "Reuse a provider token for 20 to 60 minutes."),
        .init(reason: .tooManyRequests, status: 429, meaning: "Too many requests were sent to the same token (or channel) in a row.", advice: .retryAfterDelay, whatToDo: "Retry after a delay; send less often."),
        .init(reason: .internalServerError, status: 500, meaning: "An internal server error occurred.", advice: .retryWithBackoff, whatToDo: "Retry later with back-off."),
        .init(reason: .serviceUnavailable, status: 503, meaning: "The service is unavailable.", advice: .retryWithBackoff, whatToDo: "Retry later with back-off."),
        .init(reason: .serviceUnavailableWithSpace, status: 503, meaning: "The service is unavailable (spelling of Apple's broadcast table).", advice: .retryWithBackoff, whatToDo: "Retry later with back-off."),
        .init(reason: .shutdown, status: 503, meaning: "The APNs server is shutting down.", advice: .retryWithBackoff, whatToDo: "Reconnect and retry."),
        // Broadcasts and channel management
        .init(reason: .featureNotEnabled, status: 400, meaning: "The broadcast capability is not enabled for this app.", advice: .fixRequest, whatToDo: "Enable Broadcast Capability for the App ID in the developer account."),
        .init(reason: .missingChannelId, status: 400, meaning: "The apns-channel-id header is missing.", advice: .fixRequest, whatToDo: "Send apns-channel-id."),
        .init(reason: .badChannelId, status: 400, meaning: "The channel id is badly encoded or too long.", advice: .fixRequest, whatToDo: "Send the base64 id exactly as channel creation returned it."),
        .init(reason: .channelNotRegistered, status: 400, meaning: "The channel does not exist (deleted, or of the other environment).", advice: .dropToken, whatToDo: "Stop using this channel; create a new one."),
        .init(reason: .badRequestParams, status: 400, meaning: "The JSON request body has an unrecognised attribute.", advice: .fixRequest, whatToDo: "Send only message-storage-policy and push-type."),
        .init(reason: .badRequestPayload, status: 400, meaning: "The JSON request body could not be parsed.", advice: .fixRequest, whatToDo: "Send valid JSON."),
        .init(reason: .missingPushType, status: 400, meaning: "The apns-push-type header is missing.", advice: .fixRequest, whatToDo: "Send apns-push-type: liveactivity."),
        .init(reason: .cannotCreateChannelConfig, status: 400, meaning: "The app reached its limit of 10,000 channels in this environment.", advice: .fixRequest, whatToDo: "Delete channels that are no longer needed."),
        .init(reason: .topicMismatch, status: 403, meaning: "The bundle ids of the token do not include the topic in the path.", advice: .fixRequest, whatToDo: "Use a key of the team that owns this bundle id."),
    ]

    private static let table: [String: Entry] = Dictionary(all.map { ($0.reason.rawValue, $0) }, uniquingKeysWith: { first, _ in first })
}

/// Every documented reason by name, so callers write `error.reason == .unregistered`. Any other
/// string is kept as it came (`APNsReason("NewReason")`, `isKnown == false`).
extension APNsReason {
    public static let badCollapseId = APNsReason("BadCollapseId")
    public static let badDeviceToken = APNsReason("BadDeviceToken")
    public static let badExpirationDate = APNsReason("BadExpirationDate")
    public static let badMessageId = APNsReason("BadMessageId")
    public static let badPriority = APNsReason("BadPriority")
    public static let badTopic = APNsReason("BadTopic")
    public static let deviceTokenNotForTopic = APNsReason("DeviceTokenNotForTopic")
    public static let duplicateHeaders = APNsReason("DuplicateHeaders")
    public static let idleTimeout = APNsReason("IdleTimeout")
    public static let invalidPushType = APNsReason("InvalidPushType")
    public static let missingDeviceToken = APNsReason("MissingDeviceToken")
    public static let missingTopic = APNsReason("MissingTopic")
    public static let payloadEmpty = APNsReason("PayloadEmpty")
    public static let topicDisallowed = APNsReason("TopicDisallowed")
    public static let badCertificate = APNsReason("BadCertificate")
    public static let badCertificateEnvironment = APNsReason("BadCertificateEnvironment")
    public static let expiredProviderToken = APNsReason("ExpiredProviderToken")
    public static let forbidden = APNsReason("Forbidden")
    public static let invalidProviderToken = APNsReason("InvalidProviderToken")
    public static let missingProviderToken = APNsReason("MissingProviderToken")
    public static let unrelatedKeyIdInToken = APNsReason("UnrelatedKeyIdInToken")
    public static let badEnvironmentKeyIdInToken = APNsReason("BadEnvironmentKeyIdInToken")
    public static let badEnvironmentKeyInToken = APNsReason("BadEnvironmentKeyInToken")
    public static let badPath = APNsReason("BadPath")
    public static let methodNotAllowed = APNsReason("MethodNotAllowed")
    public static let expiredToken = APNsReason("ExpiredToken")
    public static let unregistered = APNsReason("Unregistered")
    public static let payloadTooLarge = APNsReason("PayloadTooLarge")
    public static let tooManyProviderTokenUpdates = APNsReason("TooManyProviderTokenUpdates")
    public static let tooManyRequests = APNsReason("TooManyRequests")
    public static let internalServerError = APNsReason("InternalServerError")
    public static let serviceUnavailable = APNsReason("ServiceUnavailable")
    public static let serviceUnavailableWithSpace = APNsReason("Service Unavailable")
    public static let shutdown = APNsReason("Shutdown")
    public static let featureNotEnabled = APNsReason("FeatureNotEnabled")
    public static let missingChannelId = APNsReason("MissingChannelId")
    public static let badChannelId = APNsReason("BadChannelId")
    public static let channelNotRegistered = APNsReason("ChannelNotRegistered")
    public static let badRequestParams = APNsReason("BadRequestParams")
    public static let badRequestPayload = APNsReason("BadRequestPayload")
    public static let missingPushType = APNsReason("MissingPushType")
    public static let cannotCreateChannelConfig = APNsReason("CannotCreateChannelConfig")
    public static let topicMismatch = APNsReason("TopicMismatch")
}
