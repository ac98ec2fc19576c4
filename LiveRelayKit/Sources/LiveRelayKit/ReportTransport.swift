import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sends one report's request to the server and says how it went; never throws.
@_spi(Adapter) public protocol ReportTransport: Sendable {
    func send(_ request: ReportRequest) async -> SendOutcome
}

/// The server over `URLSession`, with the client key and LiveRelayKit's version in the headers.
@_spi(Adapter) public struct URLSessionTransport: ReportTransport {
    public let server: URL
    public let clientKey: String
    public let session: URLSession
    /// A request not answered within this is taken as unreachable, and retried.
    public let timeout: TimeInterval

    public init(server: URL, clientKey: String, session: URLSession = .shared, timeout: TimeInterval = 30) {
        self.server = server
        self.clientKey = clientKey
        self.session = session
        self.timeout = timeout
    }

    public func send(_ report: ReportRequest) async -> SendOutcome {
        let base = server.absoluteString.hasSuffix("/") ? String(server.absoluteString.dropLast()) : server.absoluteString
        guard let url = URL(string: base + report.path) else {
            return .answered(status: 400, retryAfter: nil, message: "not a URL: \(base + report.path)")
        }
        var request = URLRequest(url: url, timeoutInterval: timeout)
        request.httpMethod = report.method
        request.httpBody = report.body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(clientKey)", forHTTPHeaderField: "Authorization")
        request.setValue(LiveRelayKitVersion.current, forHTTPHeaderField: LiveRelayKitVersion.header)
        // Answered once: by the request, or by the task's cancellation (`.unreachable`).
        let answer = Locked<(given: Bool, to: CheckedContinuation<SendOutcome, Never>?)>((false, nil))
        @Sendable func give(_ outcome: SendOutcome) {
            let waiting = answer.withLock { answer -> CheckedContinuation<SendOutcome, Never>? in
                guard !answer.given else { return nil }
                defer { answer = (true, nil) }
                return answer.to
            }
            waiting?.resume(returning: outcome)
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<SendOutcome, Never>) in
                let cancelled = answer.withLock { answer in
                    if !answer.given { answer.to = continuation }
                    return answer.given
                }
                guard !cancelled else { return continuation.resume(returning: .unreachable("cancelled")) }
                session.dataTask(with: request) { data, response, error in give(Self.outcome(data, response, error)) }.resume()
            }
        } onCancel: {
            // The request is left to end by itself (within its timeout), its answer unread: on
            // Linux, cancelling a URLSession task can crash the process (FoundationNetworking
            // asserts when the cancel meets the task's own completion; seen at serve's SIGTERM)
            // or deadlock (its async `data(for:)`). A report not answered is sent again later.
            give(.unreachable("cancelled"))
        }
    }

    private static func outcome(_ data: Data?, _ response: URLResponse?, _ error: (any Error)?) -> SendOutcome {
        if let error { return .unreachable("\(error)") }
        guard let http = response as? HTTPURLResponse else { return .unreachable("not an HTTP answer") }
        let retryAfter = http.value(forHTTPHeaderField: "Retry-After").flatMap(Double.init)
        return .answered(status: http.statusCode, retryAfter: retryAfter, message: String(decoding: (data ?? Data()).prefix(1_000), as: UTF8.self))
    }
}

/// Which LiveRelayKit sent a report: the server shows it with the device.
public enum LiveRelayKitVersion {
    public static let current = "0.2.0"
    public static let header = "LiveRelayKit-Version"
}
