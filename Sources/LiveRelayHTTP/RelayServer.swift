import APNs
import Foundation
import Hummingbird
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import Logging
import ServiceLifecycle

/// The whole server over one store and its APNs clients: the service, the HTTP API, the
/// dispatcher, the webhook sender and the ticker. `liverelay serve` and the tests build it the same way.
package struct RelayServer: Sendable {
    package let relay: RelayService
    package let dispatcher: Dispatcher
    package let api: RelayAPI
    package let webhooks: WebhookSender

    /// Migrates `store` before anything else touches it.
    package static func open(
        store: any RelayStore, configuration: RelayConfiguration, api: RelayAPIConfiguration = .init(), apns: APNsRoutes,
        masterKey: MasterKey, now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "liverelay")
    ) async throws -> RelayServer {
        let relay = try await RelayService.open(
            store: store, configuration: configuration, apns: apns, masterKey: masterKey, now: now, logger: logger)
        return RelayServer(
            relay: relay, dispatcher: Dispatcher(context: relay.dispatchContext, apns: apns), api: RelayAPI(relay: relay, configuration: api),
            webhooks: WebhookSender(relay: relay))
    }

    /// The long-lived parts, for one `ServiceGroup`; `onRunning` gets the API's port.
    package func services(
        logger: Logger = Logger(label: "liverelay.http"), onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> [any Service] {
        [api.application(logger: logger, onRunning: onRunning), dispatcher, webhooks, RelayTicker(relay: relay)]
    }

    /// What a server starts with, as `serve` and the tests start one: its apps registered (their
    /// credentials replaced), the operator's contracts (for any version of each app), and the first
    /// keys when the store has none (`bootstrapKeys`), whose secrets it returns.
    package func prepare(
        apps: [AppRegistration], contracts: [(app: String, contract: ActivityContract)] = []
    ) async throws -> [APIKeyScope: String] {
        for app in apps { _ = try await relay.registerApp(app) }
        for (app, contract) in contracts {
            _ = try await relay.registerContract(ContractRegistration(contract: contract, bundleID: app, byApp: false))
        }
        guard let first = apps.first else { return [:] }
        return try await bootstrapKeys(firstApp: first.bundleID.value)
    }

    /// Makes the first keys when the store has none, and returns their secrets (shown once): an
    /// admin key, and a server and a client key for `firstApp`. A server key of one app keeps
    /// working unchanged when apps are added; one for another app, or for every app, is made when
    /// needed, as is a viewer key.
    package func bootstrapKeys(firstApp: String) async throws -> [APIKeyScope: String] {
        guard try await relay.apiKeys().isEmpty else { return [:] }
        var secrets: [APIKeyScope: String] = [:]
        for scope in [APIKeyScope.admin, .server, .client] {
            secrets[scope] = try await relay.createAPIKey(
                name: "initial \(scope.rawValue) key", scope: scope, app: scope == .admin ? nil : firstApp
            ).secret
        }
        return secrets
    }
}
