import Foundation
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore

/// `/v1/contracts`: what an app's widget decodes, registered by each version of the app (or the
/// backend, or the operator), read by the backend, retired by the backend.
extension RelayAPI {
    func addContractRoutes(to router: Router<RelayRequestContext>) {
        router.group("/v1").add(middleware: guarded(.client, .server, .admin)).put("/contracts/{attributesType}") { request, context in
            let type = try Self.pathParameter("attributesType", context)
            var request = request
            let buffer = try await request.collectBody(upTo: context.maxUploadSize)
            let body = try ContractBody(json: try JSONBodyReader.parse(buffer.readableBytesView), attributesType: type)
            let registration = ContractRegistration(
                contract: body.contract, bundleID: try Self.bodyApp(body.namedApp, context), appVersion: body.appVersion,
                environment: body.environment, pinned: body.pinned, byApp: context.apiKey?.scope == .client)
            return Self.json(RelayView.json(try await relay.registerContract(registration)))
        }
        router.group("/v1").add(middleware: guarded(.server, .admin)).delete("/contracts/{attributesType}") { request, context in
            let type = try Self.pathParameter("attributesType", context)
            let version = request.uri.queryParameters["appVersion"].map(String.init)
            return Self.json(
                RelayView.json(try await relay.retireContract(app: try await app(request, context), attributesType: type, appVersion: version)))
        }
        let reading = router.group("/v1").add(middleware: guarded(.server, .admin, .viewer))
        reading.get("/contracts") { request, context in
            let contracts = try await relay.contracts(app: try Self.appFilter(request, context))
            return Self.json(.object([("contracts", .array(contracts.map(RelayView.json)))]))
        }
        reading.get("/contracts/{attributesType}") { request, context in
            let type = try Self.pathParameter("attributesType", context)
            let version = request.uri.queryParameters["appVersion"].map(String.init)
            return Self.json(
                RelayView.json(try await relay.contract(app: try await app(request, context), attributesType: type, appVersion: version)))
        }
    }
}
