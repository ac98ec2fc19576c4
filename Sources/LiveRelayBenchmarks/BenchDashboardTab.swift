import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// A browser's tab open on a dashboard page, as the page's script behaves: signed in through the
/// form with a key, it follows the page's events stream and draws the page again at each
/// `changed`, one draw at a time (changes during a draw: one more draw after it).
struct BenchDashboardTab: Sendable {
    let baseURL: String
    let page: String
    /// A browser's own: it keeps the sign-in's redirect to read its cookie.
    private let http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: .init(redirectConfiguration: .disallow))

    init(baseURL: String, page: String) {
        self.baseURL = baseURL
        self.page = page
    }

    /// Follows the page until the task is cancelled; gives how long each draw took.
    func follow(signingInWith key: String) async throws -> [Duration] {
        defer { Task { [http] in try? await http.shutdown() } }
        let session = try await signIn(key)
        var draws: [Duration] = []
        let first = try await draw(session, into: &draws)
        guard let events = first.firstMatch(of: /data-events="([^"]+)"/)?.1 else {
            throw BenchDashboardTabError("\(page) names no events stream")
        }
        let (changes, announce) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let stream = try await get(String(events).replacingOccurrences(of: "&amp;", with: "&"), session: session)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                defer { announce.finish() }
                for try await chunk in stream.body where String(buffer: chunk).contains("event: changed") { announce.yield() }
            }
            for await _ in changes {
                // A draw cut short by the run's end is not counted.
                do { _ = try await draw(session, into: &draws) } catch {
                    guard Task.isCancelled else { throw error }
                    break
                }
            }
            group.cancelAll()
            return draws
        }
    }

    /// The session's cookie, signed in as a person would: the form's token, then the key.
    private func signIn(_ key: String) async throws -> String {
        let form = try await get("/dashboard/sign-in", session: nil)
        let text = String(buffer: try await form.body.collect(upTo: 1 << 20))
        guard let token = text.firstMatch(of: /name="csrf" value="([^"]+)"/)?.1, let formCookie = Self.cookie(form.headers) else {
            throw BenchDashboardTabError("the sign-in form has no token")
        }
        var request = HTTPClientRequest(url: baseURL + "/dashboard/sign-in")
        request.method = .POST
        request.headers.add(name: "content-type", value: "application/x-www-form-urlencoded")
        request.headers.add(name: "cookie", value: formCookie)
        let fields = [("csrf", String(token)), ("next", page), ("key", key)]
        let encoded = fields.map { "\($0)=\($1.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }.joined(separator: "&")
        request.body = .bytes(ByteBuffer(string: encoded))
        let answer = try await http.execute(request, timeout: .seconds(30))
        _ = try await answer.body.collect(upTo: 1 << 20)
        guard answer.status == .seeOther, let session = Self.cookie(answer.headers, named: "liverelay_session") else {
            throw BenchDashboardTabError("signing in answered \(answer.status.code)")
        }
        return session
    }

    private func draw(_ session: String, into draws: inout [Duration]) async throws -> String {
        let started = ContinuousClock.now
        let answer = try await get(page, session: session)
        let text = String(buffer: try await answer.body.collect(upTo: 64 << 20))
        guard answer.status == .ok else { throw BenchDashboardTabError("\(page) answered \(answer.status.code)") }
        draws.append(ContinuousClock.now - started)
        return text
    }

    private func get(_ path: String, session: String?) async throws -> HTTPClientResponse {
        var request = HTTPClientRequest(url: baseURL + path)
        if let session { request.headers.add(name: "cookie", value: session) }
        return try await http.execute(request, timeout: .hours(1))
    }

    /// `name=value` of the first cookie set (named `name`, when given).
    private static func cookie(_ headers: HTTPHeaders, named name: String? = nil) -> String? {
        headers["set-cookie"].lazy.compactMap { $0.split(separator: ";").first.map(String.init) }
            .first { name == nil || $0.hasPrefix(name! + "=") }
    }
}

struct BenchDashboardTabError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = "dashboard tab: " + description }
}
