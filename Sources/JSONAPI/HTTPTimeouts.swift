import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import ServiceLifecycle

/// How long a client of one of our HTTP APIs may take: the defence against slow and idle
/// connections (headers sent a byte at a time, bodies trickled in, connections left open).
package struct HTTPTimeouts: Sendable, Hashable {
    /// A connection with no request in progress is closed after this long. It also bounds how
    /// long a request's head may take to arrive: bytes of an unfinished head are not activity.
    package var idle: Duration
    /// A request's body must arrive whole within this long after its head, or the answer is
    /// `408 request_timeout` and the connection is closed.
    package var body: Duration

    package init(idle: Duration = .seconds(60), body: Duration = .seconds(30)) {
        self.idle = idle
        self.body = body
    }

    /// What either may be set to, in seconds.
    package static let allowedSeconds = 0.1...3600.0

    /// The HTTP/1.1 server that closes idle connections.
    package var server: HTTPServerBuilder {
        .http1(configuration: HTTP1Channel.Configuration(idleTimeout: TimeAmount(idle)))
    }
}

/// Reads the whole body before any route, within `HTTPTimeouts.body`; routes then read it from
/// memory. A body that takes longer is refused with 408 and its connection closed, instead of
/// holding a connection (and a task) for as long as the client likes. A body still arriving when
/// the server starts to stop is refused with 503 at once: a client sending slowly held SIGTERM
/// back for the whole graceful period (16.5 s).
/// What came first while a body was awaited.
private enum BodyArrival: Sendable { case body(ByteBuffer), timedOut, stopping }

package struct BodyDeadlineMiddleware<Context: RequestContext>: RouterMiddleware {
    let timeout: Duration

    package init(timeout: Duration) {
        self.timeout = timeout
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // A request without a body (most GETs) costs no task group.
        guard request.headers[.contentLength].map({ $0 != "0" }) ?? (request.headers[.transferEncoding] != nil) else {
            return try await next(request, context)
        }
        let body = request.body
        let limit = context.maxUploadSize
        let timeout = timeout
        let arrival = try await withThrowingTaskGroup(of: BodyArrival.self) { group in
            group.addTask { .body(try await body.collect(upTo: limit)) }
            group.addTask {
                try await Task.sleep(for: timeout)
                return .timedOut
            }
            group.addTask {
                try await gracefulShutdown()
                return .stopping
            }
            defer { group.cancelAll() }
            return try await group.next() ?? .timedOut
        }
        let refusal: APIError
        switch arrival {
        case .body(let collected):
            var request = request
            request.body = RequestBody(buffer: collected)
            return try await next(request, context)
        case .timedOut:
            refusal = APIError(
                .requestTimeout, code: "request_timeout", message: "the request body did not arrive within \(timeout.components.seconds) s")
        case .stopping:
            refusal = APIError(
                .serviceUnavailable, code: "shutting_down", message: "the server is stopping: the request body had not arrived; send it again")
        }
        var response = try refusal.response(from: request, context: context)
        response.headers[.connection] = "close"
        return response
    }
}
