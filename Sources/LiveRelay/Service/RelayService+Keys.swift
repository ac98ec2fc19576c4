import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// API keys: made, found by their secret, revoked; and the answers kept for their idempotency keys.
extension RelayService {
    /// Makes a key and returns its secret, which is shown once: only its hash is stored. A client
    /// key is for one app; a server key for one app or (nil) for every app; an admin key for every app.
    package func createAPIKey(
        name: String, scope: APIKeyScope, app bundleID: String? = nil
    ) async throws -> (record: APIKeyRecord, secret: String) {
        if let rule = scope.appRuleBroken(by: bundleID) {
            throw bundleID == nil
                ? RelayError(.invalid, .missing, message: "\(rule): name it", field: "bundleID")
                : RelayError.invalid("bundleID", "\(rule): leave bundleID out")
        }
        if let bundleID { _ = try await app(bundleID, field: "bundleID") }
        defer { noteChange() }
        return try await Self.createAPIKey(name: name, scope: scope, app: bundleID, in: store, at: now())
    }

    /// The same without a running server: `liverelay keys create` recovers access this way.
    package static func createAPIKey(
        name: String, scope: APIKeyScope, app bundleID: String? = nil, in store: any RelayStore, at date: Date
    ) async throws -> (record: APIKeyRecord, secret: String) {
        let secret = "lr_\(scope.rawValue)_" + randomHex(bytes: 24)
        let record = APIKeyRecord(
            id: "key_" + randomHex(bytes: 8), name: name, scope: scope, bundleID: bundleID, secretHash: hash(secret), createdAt: date)
        try await store.insertAPIKey(record)
        return (record, secret)
    }

    /// The live key with this secret, presented from `source` (an address) through `route` (`api`,
    /// `dashboard`). A source that keeps failing is refused for a while (`AuthenticationFailures`),
    /// but for keys this process has seen live.
    package func authenticate(secret: String, from source: String, route: String) async throws -> APIKeyRecord? {
        let hash = Self.hash(secret)
        let moment = ContinuousClock.now
        let cached = keyCache.withLock { $0[hash] }
        if let cached, cached.until > moment { return cached.key }
        let date = now()
        // A key seen live before is looked up again (revoked since?) whatever its source did: a
        // source shared by many (a proxy, a NAT) keeps its good keys.
        if cached == nil, let wait = failures.withLock({ $0.refusal(for: source, at: date) }) {
            metrics.count(Metric.authenticationRefusedTotal, ["route": route])
            throw RelayError(
                .throttled, .tooManyFailures, message: "too many failed authentications from this address; retry after \(wait) s",
                retryAfter: wait)
        }
        guard let key = try await store.apiKey(secretHash: hash), key.revokedAt == nil else {
            if cached != nil { keyCache.withLock { $0[hash] = nil } }  // revoked through another instance
            metrics.count(Metric.authenticationFailuresTotal, ["route": route])
            if let count = failures.withLock({ $0.failed(source, at: date) }) {
                // Never the secret: the source and how often, enough to find and block it.
                logger.warning(
                    "authentication failed: an API key unknown or revoked",
                    metadata: ["source": "\(source)", "route": "\(route)", "failures": "\(count)"])
            }
            return nil
        }
        keyCache.withLock { cache in
            if cache.count >= 10_000 { cache.removeAll() }  // bounded: live keys are few
            cache[hash] = (key, moment + Self.keyCacheTTL)
        }
        return key
    }

    /// Revokes a key at once. The last live admin key stays: without it nothing could make a key
    /// (`liverelay keys create` makes one offline).
    package func revokeAPIKey(id: String) async throws {
        switch try await store.revokeAPIKey(id: id, at: now()) {
        case .revoked:
            keyCache.withLock { cache in cache = cache.filter { $0.value.key.id != id } }
            noteChange()
        case .notFound:
            throw RelayError.notFound("id", "no live API key \(id)")
        case .lastAdminKey:
            throw RelayError(
                .conflict, .lastAdminKey,
                message:
                    "\(id) is the last live admin key; make another admin key first (POST /v1/api-keys, or `liverelay keys create --scope admin` on the server)",
                field: "id")
        }
    }

    package func apiKeys() async throws -> [APIKeyRecord] {
        try await store.apiKeys()
    }

    /// The answer kept under an idempotency key of an API key, if any.
    package func idempotentAnswer(apiKeyID: String, key: String) async throws -> IdempotentAnswer? {
        try await store.idempotentAnswer(apiKeyID: apiKeyID, key: key)
    }

    static func hash(_ secret: String) -> Data { Data(SHA256.hash(data: Data(secret.utf8))) }
}
