import HTTPTypes
import Hummingbird
import Synchronization

/// The methods each path of a router answers, filled once its routes are added.
package final class RouteTable: Sendable {
    private let routes = Mutex<[(segments: [Substring], methods: Set<HTTPRequest.Method>)]>([])

    package init() {}

    /// Takes the router's routes (call after the last one is added).
    package func fill<Context>(from router: Router<Context>) {
        var byPath: [String: Set<HTTPRequest.Method>] = [:]
        for route in router.routes { byPath["\(route.path)", default: []].insert(route.method) }
        routes.withLock { $0 = byPath.map { (Self.segments($0.key), $0.value) } }
    }

    /// The methods the path answers; empty when no route has the path.
    package func methods(for path: String) -> Set<HTTPRequest.Method> {
        let wanted = Self.segments(path)
        return routes.withLock { routes in
            routes.filter { route in
                route.segments.count == wanted.count
                    && zip(route.segments, wanted).allSatisfy { pattern, segment in
                        pattern == segment || pattern.hasPrefix("{") || pattern.hasPrefix(":") || pattern == "*"
                    }
            }.reduce(into: Set()) { $0.formUnion($1.methods) }
        }
    }

    private static func segments(_ path: String) -> [Substring] { path.split(separator: "/") }
}

/// A method a known path does not answer gets `405` with `Allow` (RFC 9110 §15.5.6), not the
/// router's `404`.
package struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    let table: RouteTable

    package init(table: RouteTable) {
        self.table = table
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            let allowed = table.methods(for: request.uri.path)
            guard !allowed.isEmpty, !allowed.contains(request.method) else { throw error }
            let names = allowed.map(\.rawValue).sorted().joined(separator: ", ")
            var response = try APIError(
                .methodNotAllowed, code: "method_not_allowed", message: "\(request.uri.path) answers \(names), not \(request.method)"
            ).response(from: request, context: context)
            response.headers[.allow] = names
            return response
        }
    }
}
