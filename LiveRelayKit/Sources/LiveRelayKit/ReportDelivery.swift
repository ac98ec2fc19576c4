import Foundation

/// How one attempt to send a report went.
@_spi(Adapter) public enum SendOutcome: Sendable, Hashable {
    /// The server answered with `status`; `retryAfter` from its `Retry-After`, in seconds.
    case answered(status: Int, retryAfter: Double?, message: String)
    /// No answer: no network, the server down, a timeout.
    case unreachable(String)
}

/// What to do with a report after an attempt.
@_spi(Adapter) public enum DeliveryDecision: Sendable, Hashable {
    /// The server has it: done, never sent again.
    case acknowledged
    /// Try again after the pause; the reports after it wait, so that they arrive in order.
    case retry(after: Duration)
    /// The server says it can never succeed (a 4xx other than 408 and 429): dropped, with why.
    case drop(reason: String)
    /// The server refuses the app's key itself (`401`, or a `403` that is not about a grant): a
    /// revoked key, one of another app. Kept, with every report after it, and tried again after
    /// the pause: the operator may put the key right, and dropping would lose what a new build
    /// could still send. The app is told (`LiveRelayClient.status`).
    case pause(after: Duration, reason: String)
    /// The server wants the backend's grant for it (`403 grant_required` or `grant_refused`):
    /// set aside, not in the way of the reports after it, and sent again once the app hands
    /// LiveRelayKit a grant for its key or user.
    case awaitGrant(reason: String)
}

/// When to try again: exponential back-off from one second to five minutes, or the server's
/// `Retry-After` when it gives one (at most an hour).
@_spi(Adapter) public struct RetryPolicy: Sendable, Hashable {
    public var firstPause: Duration = .seconds(1)
    public var longestPause: Duration = .seconds(300)
    /// How long reports wait after the server refused the app's key (`DeliveryDecision.pause`).
    public var refusedPause: Duration = .seconds(3_600)

    public init() {}

    /// The decision after attempt number `attempt` (1 for the first) ended with `outcome`.
    public func decide(_ outcome: SendOutcome, attempt: Int) -> DeliveryDecision {
        switch outcome {
        case .answered(let status, _, _) where (200..<300).contains(status):
            return .acknowledged
        case .answered(let status, let retryAfter, _) where status == 408 || status == 429 || status >= 500:
            if let retryAfter, retryAfter >= 0 { return .retry(after: .milliseconds(Int(min(retryAfter, 3_600) * 1_000))) }
            return .retry(after: backOff(attempt: attempt))
        case .answered(403, _, let message) where Self.grantCodes.contains(where: message.contains):
            return .awaitGrant(reason: "the server wants the backend's grant for it: \(message)")
        case .answered(let status, let retryAfter, let message) where status == 401 || status == 403:
            let pause = retryAfter.map { Duration.milliseconds(Int(min(max($0, 0), 86_400) * 1_000)) } ?? refusedPause
            return .pause(after: pause, reason: "the server refused the app's key (\(status)): \(message)")
        case .answered(let status, _, let message):
            return .drop(reason: "the server refused it for good (\(status)): \(message)")
        case .unreachable:
            return .retry(after: backOff(attempt: attempt))
        }
    }

    /// The server's codes for a report that lacks a grant (its error's `code`, in the answer's body).
    static let grantCodes = [#""code":"grant_required""#, #""code":"grant_refused""#]

    func backOff(attempt: Int) -> Duration {
        let doublings = min(max(attempt - 1, 0), 20)
        return min(firstPause * (1 << doublings), longestPause)
    }
}

/// What LiveRelayKit is doing, for an app to show or log (`LiveRelayClient.status`).
public enum ReportingStatus: Sendable, Hashable {
    /// The server holds everything it should.
    case upToDate
    /// Reports wait to be sent; `lastFailure` says why the last attempt did not get through, if it did not.
    case sending(pending: Int, lastFailure: String?)
    /// The server refuses the app's key (`401`, or `403` for another reason than a grant): the
    /// reports wait, nothing is dropped. Check the client key the app ships.
    case refused(String)
}
