/// The APNs environment a device token or a broadcast channel belongs to. A development build of
/// an app (`aps-environment: development`) gets sandbox tokens, a TestFlight or App Store build
/// production ones; each environment is its own service with its own host names, and a token of one
/// is answered `400 BadDeviceToken` by the other.
public enum PushEnvironment: String, Sendable, Hashable, CaseIterable, Codable {
    case sandbox, production
}
