import APNs
import Foundation
import HTTPTypes
import Hummingbird
import JSONAPI
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import Synchronization

/// Lets a request through only with a live API key of one of `scopes` (`Authorization: Bearer
/// <secret>`), within the key's rate.
struct KeyMiddleware: RouterMiddleware {
    typealias Context = RelayRequestContext
    let scopes: [APIKeyScope]
    let relay: RelayService
    let limiter: RequestLimiter

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let secret = request.headers[.authorization].flatMap(BearerAuthorization.credential) else {
            throw APIError(.unauthorized, code: "unauthorized", message: "needs Authorization: Bearer <API key> with the \(scopeNames) scope")
        }
        let key = try await relay.authenticate(secret: secret, from: context.source, route: "api")
        guard let key else {
            throw APIError(.unauthorized, code: "unauthorized", message: "the API key is unknown or revoked")
        }
        guard scopes.contains(key.scope) else {
            throw APIError(
                .forbidden, code: "wrong_scope", message: "this route needs \(aKeyOfScopes); \(key.id) is \(key.scope.aKey)")
        }
        if let wait = try await limiter.take(key.id, at: relay.currentDate) {
            throw APIError(
                .tooManyRequests, code: "rate_limited", message: "more than the key's request rate; retry after \(wait) s", retryAfter: wait)
        }
        var context = context
        context.apiKey = key
        return try await next(request, context)
    }

    private var scopeNames: String { scopes.map(\.rawValue).joined(separator: " or ") }
    /// "a server or admin key", "an admin or viewer key": the article agrees with the first.
    private var aKeyOfScopes: String { (scopes.first == .admin ? "an " : "a ") + scopeNames + " key" }
}

/// Sets the body limit for every route.
struct BodyLimitMiddleware: RouterMiddleware {
    typealias Context = RelayRequestContext
    let limit: Int

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        context.bodyLimit = limit
        return try await next(request, context)
    }
}

/// The service's refusals, as the API's one error shape.
struct RelayErrorMiddleware: RouterMiddleware {
    typealias Context = RelayRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            throw RelayError.asAPIError(error)
        }
    }
}

extension RelayError {
    /// A refusal of the service in the API's shape; any other error as it is.
    static func asAPIError(_ error: any Error) -> any Error {
        guard let error = error as? RelayError else { return error }
        return APIError(error.kind.httpStatus, code: error.code.rawValue, message: error.message, field: error.field, retryAfter: error.retryAfter)
    }
}

extension RelayError.Kind {
    var httpStatus: HTTPResponse.Status {
        switch self {
        case .invalid: .badRequest
        case .unauthorized: .unauthorized
        case .notFound: .notFound
        case .conflict: .conflict
        case .tooLarge: .contentTooLarge
        case .unprocessable: .unprocessableContent
        case .forbidden: .forbidden
        case .upstream: .badGateway
        case .throttled: .tooManyRequests
        }
    }
}

/// Measures every request from its head to its answer's head, by method, route and status. The
/// route is the router's pattern (`/v1/activities/{key}/update`), `NotFound` where none matched,
/// so that no client can make new series.
struct RequestMetricsMiddleware: RouterMiddleware {
    typealias Context = RelayRequestContext
    let metrics: RelayMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let started = ContinuousClock.now
        do {
            let response = try await next(request, context)
            observe(request, context, response.status, since: started)
            return response
        } catch {
            observe(request, context, (error as? any HTTPResponseError)?.status ?? .internalServerError, since: started)
            throw error
        }
    }

    private func observe(_ request: Request, _ context: Context, _ status: HTTPResponse.Status, since started: ContinuousClock.Instant) {
        metrics.observe(
            Metric.httpRequestDurationSeconds,
            ["method": request.method.rawValue, "route": context.endpointPath ?? "NotFound", "status": String(status.code)],
            .now - started)
    }
}
