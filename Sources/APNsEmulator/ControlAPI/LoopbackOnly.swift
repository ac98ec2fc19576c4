import Foundation
import HTTPTypes
import Hummingbird
import JSONAPI

/// The control port asks for no key: it trusts whoever can reach loopback. A web page in the
/// developer's browser can reach loopback too, so the port refuses what only a page would send:
/// - a `Host` that is not a loopback name (DNS rebinding: another site's name pointed at
///   127.0.0.1, which would let its page read the journal), `403 host`;
/// - an `Origin` that is not a loopback origin (a cross-site request; `null` is a sandboxed one),
///   `403 origin`;
/// - a write whose body is not `application/json` (the only kinds a page can send without the
///   browser asking first are forms and `text/plain`), `415 content-type`; the devices page's
///   forms (`formRoutes`) carry this process's token instead.
struct LoopbackOnlyMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Paths whose writes are the devices page's forms.
    let formRoutes: Set<String>

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let host = request.head.authority, !Self.isLoopback(host: host) {
            throw APIError(
                .forbidden, code: "host_not_loopback",
                message: "the control API answers loopback names only (127.0.0.1, localhost, [::1]), not \(host.prefix(100))", field: "host")
        }
        if let origin = request.headers[.origin], !Self.isLoopback(origin: origin) {
            throw APIError(
                .forbidden, code: "cross_site", message: "the control API takes no requests from other sites' pages (origin \(origin.prefix(100)))",
                field: "origin")
        }
        if [.post, .put, .patch, .delete].contains(request.method), !formRoutes.contains(request.uri.path), Self.hasBody(request),
            !Self.isJSON(request.headers[.contentType])
        {
            throw APIError(
                .unsupportedMediaType, code: "unsupported_media_type",
                message: "a write's body must be sent as application/json (curl: -H 'content-type: application/json')", field: "content-type")
        }
        return try await next(request, context)
    }

    /// `127.0.0.1`, any of 127.0.0.0/8, `localhost` and `[::1]`, with or without a port.
    static func isLoopback(host: String) -> Bool {
        var name = host.lowercased()[...]
        if name.hasPrefix("[") {
            guard let end = name.firstIndex(of: "]") else { return false }
            return name[name.index(after: name.startIndex)..<end] == "::1"
        }
        if let colon = name.lastIndex(of: ":") {
            guard name[name.index(after: colon)...].allSatisfy(\.isASCII), name[name.index(after: colon)...].allSatisfy(\.isNumber) else {
                return false
            }
            name = name[..<colon]
        }
        if name == "localhost" { return true }
        let parts = name.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts[0] == "127" && parts.allSatisfy { part in UInt8(part) != nil }
    }

    /// `http://` or `https://` and a loopback host.
    static func isLoopback(origin: String) -> Bool {
        for scheme in ["http://", "https://"] where origin.lowercased().hasPrefix(scheme) {
            return isLoopback(host: String(origin.dropFirst(scheme.count)))
        }
        return false
    }

    private static func hasBody(_ request: Request) -> Bool {
        if let length = request.headers[.contentLength] { return length != "0" }
        return request.headers[.transferEncoding] != nil || request.headers[.contentType] != nil
    }

    private static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        return contentType.split(separator: ";").first?.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }
}
