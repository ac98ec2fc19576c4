import APNs
import Foundation
import LiveRelayStore

/// What an APNs answer means for a delivery, as its retry advice says (`APNsReason`'s table, or its
/// status for a reason APNs adds later): a token to drop is dead (`410`, `BadDeviceToken`,
/// `DeviceTokenNotForTopic`, …); what APNs advises retrying comes back later with exponential
/// backoff, until `maximumAttempts`; the rest are dead letters.
package struct DeliveryOutcomeRules: Sendable {
    let policy: DispatchPolicy

    func outcome(of error: APNsError, attempts: Int, at now: Date) -> DeliveryOutcome {
        let reason = error.reason.rawValue
        switch error.advice {
        case .dropToken:
            return .failed(status: error.status, reason: reason, tokenIsDead: true)
        case .retryWithBackoff, .retryAfterDelay, .refreshTokenAndRetry:
            return retryOrGiveUp(status: error.status, reason: reason, attempts: attempts, at: now)
        case .fixRequest:
            return .failed(status: error.status, reason: reason, tokenIsDead: false)
        }
    }

    static func killsToken(_ error: APNsError) -> Bool { error.advice == .dropToken }

    /// Whether a push that failed with this stored answer killed its token: nothing sent to the
    /// token again can arrive, so it is not offered for a retry.
    package static func killedToken(status: Int?, reason: String?) -> Bool {
        guard let status else { return false }
        return killsToken(APNsError(status: status, reason: APNsReason(reason ?? "")))
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
