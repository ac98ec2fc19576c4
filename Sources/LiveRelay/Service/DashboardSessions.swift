import Foundation
import LiveRelayStore

/// Signing in to the dashboard: an admin or viewer key is traded for a session, whose cookie
/// value is random and kept only as its hash. A session lives 12 hours, and ends at once when it
/// is signed out or its key is revoked.
extension RelayService {
    package static let dashboardSessionLifetime: TimeInterval = 12 * 3600
    /// The scopes that may sign in: the operator, and people who only watch.
    package static let dashboardScopes: [APIKeyScope] = [.admin, .viewer]

    /// A new session: the cookie's value (shown once) and what is kept.
    package struct DashboardSignIn: Sendable {
        package let cookie: String
        package let session: DashboardSessionRecord
        package let key: APIKeyRecord
    }

    /// Signs in with an API key's secret.
    package func signIn(secret: String, from source: String) async throws -> DashboardSignIn {
        guard let key = try await authenticate(secret: secret, from: source, route: "dashboard") else {
            throw RelayError(.unauthorized, .unauthorized, message: "the API key is unknown or revoked", field: "key")
        }
        guard Self.dashboardScopes.contains(key.scope) else {
            throw RelayError(
                .forbidden, .wrongScope, message: "the dashboard takes an admin or viewer key; \(key.id) is \(key.scope.aKey)",
                field: "key")
        }
        let cookie = "lrs_" + randomHex(bytes: 32)
        let date = now()
        let session = DashboardSessionRecord(
            idHash: Self.hash(cookie), apiKeyID: key.id, formToken: randomHex(bytes: 16), signedInAt: date,
            expiresAt: date + Self.dashboardSessionLifetime)
        try await store.insertDashboardSession(session)
        return DashboardSignIn(cookie: cookie, session: session, key: key)
    }

    /// The live session a cookie names, with its key.
    package func dashboardSession(cookie: String) async throws -> (session: DashboardSessionRecord, key: APIKeyRecord)? {
        try await store.dashboardSession(idHash: Self.hash(cookie), at: now())
    }

    package func signOut(cookie: String) async throws {
        try await store.deleteDashboardSession(idHash: Self.hash(cookie))
    }
}
