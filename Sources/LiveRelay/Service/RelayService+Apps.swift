import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// The apps the server sends for.
extension RelayService {
    /// Registers an app, or replaces its credentials: its pushes are signed with them from now on.
    /// `isNew`: the server did not have the app before.
    @discardableResult
    package func registerApp(_ registration: AppRegistration) async throws -> (record: AppRecord, isNew: Bool) {
        do {
            _ = try APNsSigningKey(pem: registration.signingKey, keyID: registration.keyID, teamID: registration.teamID)
        } catch {
            let field = ["key-id": "keyID", "team-id": "teamID"][error.field] ?? "signingKey"
            throw RelayError.invalid(field, error.message)
        }
        let existing = try await store.apps().first { $0.bundleID == registration.bundleID.value }
        let date = now()
        let app = AppRecord(
            bundleID: registration.bundleID.value, teamID: registration.teamID, keyID: registration.keyID,
            sealedSigningKey: masterKey.seal(registration.signingKey, for: registration.bundleID.value), createdAt: existing?.createdAt ?? date,
            updatedAt: date,
            ungrantedReports: registration.ungrantedReports ?? existing?.ungrantedReports ?? AppRecord.defaultUngrantedReports)
        try await store.saveApps([app])
        appBook.invalidate()
        logger.info("app registered", metadata: ["app": "\(app.bundleID)", "key.id": "\(app.keyID)"])
        return (app, existing == nil)
    }

    package func apps() async throws -> [AppRecord] {
        try await appBook.value(from: store).values.sorted { $0.bundleID < $1.bundleID }
    }

    /// Which of `apps` have an activity under `key`.
    package func apps(holdingKey key: String, among apps: [AppRecord]) async throws -> [String] {
        try await store.apps(holdingKey: key, among: apps.map(\.bundleID))
    }

    /// The app, or 404 naming `field`.
    package func app(_ bundleID: String, field: String = "app") async throws -> AppRecord {
        guard let app = try await appBook.value(from: store)[bundleID] else {
            throw RelayError.notFound(field, "no app \(bundleID) on this server (PUT /v1/apps/\(bundleID) registers it)")
        }
        return app
    }

    /// The PEM of `app`'s signing key.
    func openSigningKey(_ app: AppRecord) throws(MasterKeyError) -> String {
        try masterKey.open(app.sealedSigningKey, for: app.bundleID)
    }

    /// Seals the signing keys and webhook secrets a store of an earlier release holds in plain
    /// text, and checks that the master key opens every sealed one: a wrong key stops the start,
    /// naming the app or endpoint, rather than signing garbage later.
    func sealSigningKeys() async throws {
        let sealed = try await Self.resealSecrets(in: store, from: masterKey, to: masterKey)
        guard sealed > 0 else { return }
        appBook.invalidate()
        logger.notice("signing keys stored in plain text are sealed now", metadata: ["count": "\(sealed)"])
    }

    /// Seals every app's signing key and every webhook endpoint's secret in `store` with `next`
    /// instead of `current`: the apps' in one transaction, then the endpoints' in another. What
    /// `next` sealed already (a rotation that stopped before its end) is kept, so running it again
    /// finishes it. Returns how many were sealed now. Refuses, changing nothing, when
    /// `current` does not open one.
    package static func resealSecrets(in store: any RelayStore, from current: MasterKey, to next: MasterKey) async throws -> Int {
        /// `stored` sealed by `next`, or nil when it is already.
        func resealed(_ stored: String, owner: String) throws -> String? {
            if MasterKey.isSealed(stored), (try? next.open(stored, for: owner)) != nil { return nil }
            let secret = MasterKey.isSealed(stored) ? try current.open(stored, for: owner) : stored
            return next.seal(secret, for: owner)
        }
        var apps: [AppRecord] = []
        for var app in try await store.apps() {
            guard let sealed = try resealed(app.sealedSigningKey, owner: app.bundleID) else { continue }
            app.sealedSigningKey = sealed
            apps.append(app)
        }
        var secrets: [(id: String, secret: String)] = []
        for endpoint in try await store.webhookEndpoints(app: nil) {
            if let sealed = try resealed(endpoint.secret, owner: endpoint.id) { secrets.append((endpoint.id, sealed)) }
        }
        if !apps.isEmpty { try await store.saveApps(apps) }
        if !secrets.isEmpty { try await store.replaceWebhookSecrets(secrets) }
        return apps.count + secrets.count
    }

    /// Gives `bundleID` what an earlier release's store held for its one app (see `0009-apps`).
    package func adoptUnnamedData(bundleID: String) async throws {
        if try await store.adoptUnnamedData(bundleID: bundleID) {
            logger.notice("data of the release before apps now belongs to \(bundleID)")
        }
    }
}
