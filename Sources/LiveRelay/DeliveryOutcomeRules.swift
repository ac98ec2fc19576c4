import APNs
import Foundation
import LiveRelayStore

/// What an APNs answer means for a delivery: `410`, `BadDeviceToken`, `DeviceTokenNotForTopic`,
/// `ExpiredToken` and `Unregistered` kill the token; what APNs advises retrying comes back later
/// with exponential backoff, until `maximumAttempts`; the rest are dead letters.
struct DeliveryOutcomeRules {
    let policy: DispatchPolicy

    func outcome(of error: APNsError, attempts: Int, at now: Date) -> DeliveryOutcome {
        let reason = error.reason.rawValue
        if error.status == 410 || error.reason == .badDeviceToken || error.reason == .deviceTokenNotForTopic
            || error.reason == .expiredToken || error.reason == .unregistered
        {
            return .failed(status: error.status, reason: reason, tokenIsDead: true)
        }
        switch error.advice {
        case .retryWithBackoff, .retryAfterDelay, .refreshTokenAndRetry:
            return retryOrGiveUp(status: error.status, reason: reason, attempts: attempts, at: now)
        case .dropToken:
            return .failed(status: error.status, reason: reason, tokenIsDead: true)
        case .fixRequest:
            return .failed(status: error.status, reason: reason, tokenIsDead: false)
        }
    }

    /// No answer came (a timeout, a lost connection): the push may not have arrived.
    func outcome(ofNoAnswer error: any Error, attempts: Int, at now: Date) -> DeliveryOutcome {
        retryOrGiveUp(status: nil, reason: "no answer: \(error)", attempts: attempts, at: now)
    }

    private func retryOrGiveUp(status: Int?, reason: String, attempts: Int, at now: Date) -> DeliveryOutcome {
        guard attempts < policy.maximumAttempts else {
            return .failed(status: status, reason: "\(reason) (gave up after \(attempts) attempts)", tokenIsDead: false)
        }
        return .retry(at: now + policy.backoff(afterAttempts: attempts), status: status, reason: reason)
    }
}
