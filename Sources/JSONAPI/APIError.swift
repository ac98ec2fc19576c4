import Foundation
import HTTPTypes
import Hummingbird
import LiveActivityKit
import Logging

/// Every failure of a JSON API, as one shape: `{"error": {"code", "message", "field"}}`, with the
/// status chosen here and nowhere else.
package struct APIError: Error, HTTPResponseError, CustomStringConvertible {
    package let status: HTTPResponse.Status
    /// Stable and machine-readable (`missing`, `unknown_key`, `not_found`, …).
    package let code: String
    package let message: String
    /// The request field, path parameter or query parameter at fault.
    package let field: String?
    /// On a `500`: the id under which the server's log holds what went wrong.
    package let requestID: String?
    /// On a `429`: the seconds to wait, sent as `Retry-After`.
    package let retryAfter: Int?

    package init(
        _ status: HTTPResponse.Status, code: String, message: String, field: String? = nil, requestID: String? = nil, retryAfter: Int? = nil
    ) {
        self.retryAfter = retryAfter
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.requestID = requestID
    }

    package var description: String { field.map { "\($0): \(message)" } ?? message }

    /// A field that breaks a rule: 400 with the rule's code.
    package static func invalid(_ error: LiveActivityValidationError, field: String? = nil) -> APIError {
        APIError(.badRequest, code: error.code.description, message: error.message, field: field ?? error.field)
    }

    /// A body field that breaks a rule: 400.
    package init(_ error: JSONFieldError) {
        self.init(.badRequest, code: error.code, message: error.message, field: error.field)
    }

    package static func invalid(_ field: String, _ rule: String) -> APIError {
        APIError(.badRequest, code: "invalid_value", message: rule, field: field)
    }

    package static func notFound(_ field: String, _ message: String) -> APIError {
        APIError(.notFound, code: "not_found", message: message, field: field)
    }

    package func response(from request: Request, context: some RequestContext) throws -> Response {
        var error: JSONValue.Members = [("code", .string(code)), ("message", .string(message))]
        if let field { error.append(("field", .string(field))) }
        if let requestID { error.append(("requestID", .string(requestID))) }
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter { headers[.retryAfter] = String(retryAfter) }
        return Response(
            status: status, headers: headers,
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: JSONValue.object([("error", .object(error))]).serialized)))
    }
}

/// Turns every error a route throws into an `APIError`, so that no client ever sees another shape:
/// Hummingbird's own errors (unknown route, wrong method, body too large) keep their status.
package struct APIErrorMiddleware<Context: RequestContext>: RouterMiddleware {
    package init() {}

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            throw APIError(describing: error, request: request, context: context)
        }
    }
}

extension APIError {
    /// What the client is told of `error`: our own errors as they are, Hummingbird's with their
    /// status, anything else as a 500 whose detail (a database error names its statement) goes
    /// to the log under a request id, never to the client.
    package init(describing error: any Error, request: Request, context: some RequestContext) {
        switch error {
        case let error as APIError:
            self = error
        case let error as JSONFieldError:
            self.init(error)
        case let error as any HTTPResponseError:
            let code = error.status.reasonPhrase.lowercased().replacingOccurrences(of: " ", with: "_")
            let message = (error as? HTTPError)?.body ?? error.status.reasonPhrase
            self.init(error.status, code: code, message: message)
        default:
            let requestID = "req_" + (0..<8).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max)) }.joined()
            context.logger.error(
                "request failed",
                metadata: ["request.id": "\(requestID)", "http.method": "\(request.method)", "http.path": "\(request.uri.path)", "error": "\(error)"])
            self.init(
                .internalServerError, code: "internal_error",
                message: "the server could not handle this request; its log has the details under request id \(requestID)", requestID: requestID)
        }
    }
}
