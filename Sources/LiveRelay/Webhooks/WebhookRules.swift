import AsyncHTTPClient
import Crypto
import Foundation
import LiveRelayStore
import NIOCore

/// How events are posted to webhook endpoints: every decision of when to try again, when to give
/// up and when to disable an endpoint, made here as values (`WebhookRulesTests`).
package struct WebhookRules: Sendable, Hashable {
    /// The wait after each failed attempt: about 27 hours in all over 8 attempts, as the Standard
    /// Webhooks specification's reference schedule (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h).
    package var retryDelays: [TimeInterval]
    /// Each wait is moved by up to this fraction either way, so that the retries of many events
    /// failing at once (a receiver down) do not all come back at the same second.
    package var jitter: Double
    /// How long one attempt may take, from connecting to the end of the answer.
    package var attemptTimeout: TimeInterval
    /// How long connecting may take, within the attempt's time: a receiver that is down refuses
    /// at once, but the HTTP client tries again until this runs out.
    package var connectTimeout: TimeInterval
    /// An endpoint whose every attempt failed for this long is disabled.
    package var disableAfter: TimeInterval
    /// How long a claimed delivery is the claimer's: more than an attempt takes, so that another
    /// instance never posts what one is still posting.
    package var lease: TimeInterval
    /// Deliveries claimed, and posted at once, per round trip to the store.
    package var batchSize: Int
    /// Posts one endpoint may have in flight at once: a receiver that hangs holds no more of the
    /// sender than this, and the other endpoints' events go on.
    package var inFlightPerEndpoint: Int
    /// How much of an endpoint's answer is kept to show people.
    package var excerptLength: Int
    /// Which addresses an endpoint may have.
    package var addresses: WebhookAddresses

    package init(
        retryDelays: [TimeInterval] = [5, 300, 1800, 7200, 18_000, 36_000, 36_000], jitter: Double = 0.1, attemptTimeout: TimeInterval = 15,
        connectTimeout: TimeInterval = 3,
        disableAfter: TimeInterval = 5 * 86_400, lease: TimeInterval = 60, batchSize: Int = 200, inFlightPerEndpoint: Int = 8,
        excerptLength: Int = 200, addresses: WebhookAddresses = .public
    ) {
        self.retryDelays = retryDelays
        self.jitter = jitter
        self.attemptTimeout = attemptTimeout
        self.connectTimeout = connectTimeout
        self.disableAfter = disableAfter
        self.lease = lease
        self.batchSize = batchSize
        self.inFlightPerEndpoint = inFlightPerEndpoint
        self.excerptLength = excerptLength
        self.addresses = addresses
    }

    /// What to do with a delivery after its attempt number `attempts + 1` came out as `attempt`;
    /// `random` is uniform in 0..<1 (the jitter).
    package func outcome(of attempt: WebhookAttempt, attemptsBefore attempts: Int, random: Double) -> WebhookOutcome {
        if attempt.delivered { return .delivered(attempt) }
        guard attempts < retryDelays.count else { return .gaveUp(attempt) }
        let delay = retryDelays[attempts] * (1 + jitter * (2 * random - 1))
        return .retry(attempt, at: attempt.at + delay)
    }

    /// The HTTP client of one attempt to `target`: connecting to `address`, the one checked, never
    /// following a redirect, each phase within its time.
    package func clientConfiguration(connectingTo address: [UInt8], for target: WebhookTarget) -> HTTPClient.Configuration {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .milliseconds(Int64(connectTimeout * 1000)), read: .milliseconds(Int64(attemptTimeout * 1000))))
        configuration.httpVersion = .automatic
        configuration.decompression = .disabled
        // A name connects to the address checked; the name stays the Host header and TLS's server name.
        if WebhookAddresses.ip(target.host) == nil { configuration.dnsOverride = [target.host: WebhookAddresses.text(address)] }
        return configuration
    }

    /// Endpoints failing since before this, at `now`, are disabled.
    package func disableFailingSince(at now: Date) -> Date { now - disableAfter }
}

/// A webhook secret and the signatures made with it, as the Standard Webhooks specification
/// says: `whsec_` and the key in base64; each message signed with HMAC-SHA256 over
/// `id.timestamp.body`, sent as `v1,` and the signature in base64.
package struct WebhookSecret: Sendable, Hashable {
    package let key: SymmetricKey

    package static func == (lhs: Self, rhs: Self) -> Bool { lhs.text == rhs.text }
    package func hash(into hasher: inout Hasher) { hasher.combine(text) }

    /// A new random secret (24 bytes, as the specification's examples have).
    package static func generate() -> WebhookSecret { WebhookSecret(key: SymmetricKey(size: .init(bitCount: 192))) }

    package init(key: SymmetricKey) { self.key = key }

    /// Reads `whsec_…`; nil when it is not one.
    package init?(_ text: String) {
        guard text.hasPrefix("whsec_"), let bytes = Data(base64Encoded: String(text.dropFirst(6))), !bytes.isEmpty else { return nil }
        key = SymmetricKey(data: bytes)
    }

    package var text: String { "whsec_" + key.withUnsafeBytes { Data($0).base64EncodedString() } }

    /// The `webhook-signature` header's value for a message.
    package func signature(id: String, timestamp: Int64, body: [UInt8]) -> String {
        var mac = HMAC<SHA256>(key: key)
        mac.update(data: Array("\(id).\(timestamp).".utf8))
        mac.update(data: body)
        return "v1," + Data(mac.finalize()).base64EncodedString()
    }
}
