import Foundation
import HTTPTypes
import Hummingbird
import LiveActivityKit

/// Every failure of a JSON API, as one shape: `{"error": {"code", "message", "field"}}`, with the
/// status chosen here and nowhere else.
public struct APIError: Error, HTTPResponseError, CustomStringConvertible {
    public let status: HTTPResponse.Status
    /// Stable and machine-readable (`missing`, `unknown_key`, `not_found`, …).
    public let code: String
    public let message: String
    /// The request field, path parameter or query parameter at fault.
    public let field: String?
    /// On a `500`: the id under which the server's log holds what went wrong.
    public let requestID: String?

    public init(_ status: HTTPResponse.Status, code: String, message: String, field: String? = nil, requestID: String? = nil) {
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.requestID = requestID
    }

    public var description: String { field.map { "\($0): \(message)" } ?? message }

    /// A field that breaks a rule: 400 with the rule's code.
    public static func invalid(_ error: LiveActivityValidationError, field: String? = nil) -> APIError {
        APIError(.badRequest, code: error.code.description, message: error.message, field: field ?? error.field)
    }

    /// A body field that breaks a rule: 400.
    package init(_ error: JSONFieldError) {
        self.init(.badRequest, code: error.code, message: error.message, field: error.field)
    }

    public static func invalid(_ field: String, _ rule: String) -> APIError {
        APIError(.badRequest, code: "invalid_value", message: rule, field: field)
    }

    public static func notFound(_ field: String, _ message: String) -> APIError {
        APIError(.notFound, code: "not_found", message: message, field: field)
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var error: [(String, JSONValue)] = [("code", .string(code)), ("message", .string(message))]
        if let field { error.append(("field", .string(field))) }
        if let requestID { error.append(("requestID", .string(requestID))) }
        return Response(
            status: status, headers: [.contentType: "application/json"],
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
        } catch let error as APIError {
            throw error
        } catch let error as JSONFieldError {
            throw APIError(error)
        } catch let error as any HTTPResponseError {
            let code = error.status.reasonPhrase.lowercased().replacingOccurrences(of: " ", with: "_")
            let message = (error as? HTTPError)?.body ?? error.status.reasonPhrase
            throw APIError(error.status, code: code, message: message)
        } catch {
            // The detail (a database error names its statement) goes to the log, never to the client.
            let requestID = "req_" + (0..<8).map { _ in String(format: "%02x", UInt8.random(in: .min ... .max)) }.joined()
            context.logger.error(
                "API request failed",
                metadata: ["request.id": "\(requestID)", "http.method": "\(request.method)", "http.path": "\(request.uri.path)", "error": "\(error)"])
            throw APIError(
                .internalServerError, code: "internal_error",
                message: "the server could not handle this request; its log has the details under request id \(requestID)", requestID: requestID)
        }
    }
}

/// A JSON request body whose keys are checked before decoding, so that `bundleId` for `bundleID`
/// is an error that says so instead of a silently missing field.
package protocol APIRequestBody: Decodable {
    static var fields: [String] { get }
}

extension Request {
    /// The body as `Body`, or an `APIError` naming the field and the rule.
    package func decodeJSON<Body: APIRequestBody>(_ type: Body.Type, context: some RequestContext) async throws -> Body {
        let buffer = try await body.collect(upTo: context.maxUploadSize)
        _ = try JSONBodyReader(try JSONBodyReader.parse(buffer.readableBytesView), fields: Body.fields)  // the keys, before decoding
        do {
            return try JSONDecoder().decode(Body.self, from: Data(buffer.readableBytesView))
        } catch let error as DecodingError {
            throw APIError(decoding: error)
        }
    }
}

extension APIError {
    package init(decoding error: DecodingError) {
        switch error {
        case .keyNotFound:
            self.init(.badRequest, code: "missing", message: "is required", field: error.valuePath)
        case .typeMismatch(let type, _), .valueNotFound(let type, _):
            self.init(.badRequest, code: "wrong_type", message: "must be \(Self.jsonName(of: type))", field: error.valuePath)
        case .dataCorrupted(let context):
            self.init(.badRequest, code: "invalid_value", message: context.debugDescription, field: error.valuePath)
        @unknown default:
            self.init(.badRequest, code: "invalid_value", message: "\(error)")
        }
    }

    private static func jsonName(of type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type, is Double.Type: "a number"
        case is Bool.Type: "true or false"
        case is [Any].Type: "an array"
        default: "\(type)"
        }
    }
}
