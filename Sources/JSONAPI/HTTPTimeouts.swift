import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import NIOCore
import ServiceLifecycle
import Synchronization

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
package struct BodyDeadlineMiddleware<Context: RequestContext>: RouterMiddleware {
    let deadlines: BodyDeadlines

    package init(timeout: Duration) {
        deadlines = BodyDeadlines(timeout: timeout)
    }

    package func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        // A request without a body (most GETs) is not watched.
        guard request.headers[.contentLength].map({ $0 != "0" }) ?? (request.headers[.transferEncoding] != nil) else {
            return try await next(request, context)
        }
        let refusal: APIError
        switch try await deadlines.read(request.body, upTo: context.maxUploadSize) {
        case .body(let collected):
            var request = request
            request.body = RequestBody(buffer: collected)
            return try await next(request, context)
        case .timedOut:
            refusal = APIError(
                .requestTimeout, code: "request_timeout",
                message: "the request body did not arrive within \(deadlines.timeout.components.seconds) s")
        case .stopping:
            refusal = APIError(
                .serviceUnavailable, code: "shutting_down", message: "the server is stopping: the request body had not arrived; send it again")
        }
        var response = try refusal.response(from: request, context: context)
        response.headers[.connection] = "close"
        return response
    }
}

/// What came first while a body was awaited.
enum BodyArrival: Sendable {
    case body(ByteBuffer), timedOut, stopping
}

/// The bodies being read, each with its deadline. A body is read by a task of its own while its
/// request waits for the first of: the body, its deadline, a graceful shutdown. One task sleeps
/// until the earliest deadline and ends the reads past theirs. A request costs one task and a
/// lock taken thrice, where a task group of three tasks and a timer of its own cost thread
/// wake-ups (`Documentation/benchmarks.md`, "Where a request goes"). The request's own task is
/// never cancelled: its answer could not be written then.
final class BodyDeadlines: Sendable {
    let timeout: Duration

    /// A read in progress: who waits for it, the task that reads, and what ended it before its
    /// request began to wait (a shutdown under way, a cancelled request).
    private struct Reading {
        let deadline: ContinuousClock.Instant
        var waiting: CheckedContinuation<Result<BodyArrival, any Error>, Never>?
        var reader: Task<Void, Never>?
        var ended: Result<BodyArrival, any Error>?
    }

    private struct State {
        var readings: [Int: Reading] = [:]
        var nextID = 0
        var sweeping = false
    }

    private let state = Mutex(State())

    init(timeout: Duration) {
        self.timeout = timeout
    }

    func read(_ body: RequestBody, upTo limit: Int) async throws -> BodyArrival {
        let (id, startSweeper) = state.withLock { state -> (Int, Bool) in
            let id = state.nextID
            state.nextID += 1
            state.readings[id] = Reading(deadline: .now + timeout)
            defer { state.sweeping = true }
            return (id, !state.sweeping)
        }
        if startSweeper { Task { await self.sweep() } }
        let reader = Task {
            let collected: Result<BodyArrival, any Error>
            do { collected = .success(.body(try await body.collect(upTo: limit))) } catch { collected = .failure(error) }
            self.end(id, collected)
        }
        let arrival = await withTaskCancellationHandler {
            await withGracefulShutdownHandler {
                await withCheckedContinuation { (waiting: CheckedContinuation<Result<BodyArrival, any Error>, Never>) in
                    let endedAlready = state.withLock { state -> Result<BodyArrival, any Error>? in
                        guard let reading = state.readings[id] else { return .failure(CancellationError()) }
                        if let ended = reading.ended {
                            state.readings[id] = nil
                            return ended
                        }
                        state.readings[id]?.waiting = waiting
                        state.readings[id]?.reader = reader
                        return nil
                    }
                    if let endedAlready {
                        reader.cancel()
                        waiting.resume(returning: endedAlready)
                    }
                }
            } onGracefulShutdown: {
                self.end(id, .success(.stopping))
            }
        } onCancel: {
            self.end(id, .failure(CancellationError()))
        }
        return try arrival.get()
    }

    /// Ends a read with `arrival`, the first time only: its request goes on, its reader is
    /// cancelled. Before its request waits, the end is kept for it.
    private func end(_ id: Int, _ arrival: Result<BodyArrival, any Error>) {
        let ended = state.withLock { state -> Reading? in
            guard let reading = state.readings[id], reading.ended == nil else { return nil }
            guard reading.waiting != nil else {
                state.readings[id]?.ended = arrival
                return nil
            }
            state.readings[id] = nil
            return reading
        }
        ended?.reader?.cancel()
        ended?.waiting?.resume(returning: arrival)
    }

    /// Sleeps until the earliest deadline, ends the reads past theirs, and stops once none is left
    /// (decided under the lock a new read takes to know whether to start one).
    private func sweep() async {
        while true {
            let (expired, next) = state.withLock { state -> ([Int], ContinuousClock.Instant?) in
                let now = ContinuousClock.now
                let open = state.readings.filter { $0.value.ended == nil }
                let expired = open.filter { $0.value.deadline <= now }.map(\.key)
                let earliest = open.values.lazy.map(\.deadline).filter { $0 > now }.min()
                if earliest == nil && expired.isEmpty { state.sweeping = false }
                return (expired, earliest)
            }
            if !expired.isEmpty {
                for id in expired { end(id, .success(.timedOut)) }
                continue
            }
            guard let next else { return }
            try? await Task.sleep(until: next, clock: .continuous)
        }
    }
}
