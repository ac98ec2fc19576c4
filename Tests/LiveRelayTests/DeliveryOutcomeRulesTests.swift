import APNs
import Foundation
import LiveRelayStore
import Testing

@testable import LiveRelay

@Suite struct DeliveryOutcomeRulesTests {
    static let rules = DeliveryOutcomeRules(policy: DispatchPolicy(initialBackoff: 1, maximumBackoff: 300, maximumAttempts: 8))
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    @Test(arguments: [
        APNsError(status: 410, reason: .unregistered), APNsError(status: 400, reason: .badDeviceToken),
        APNsError(status: 400, reason: .deviceTokenNotForTopic), APNsError(status: 410, reason: .expiredToken),
        // A reason APNs adds tomorrow, with the status that says the token is gone.
        APNsError(status: 410, reason: APNsReason("TokenRetired")),
    ])
    func aTokenAPNsNoLongerKnowsIsDead(_ error: APNsError) {
        #expect(
            Self.rules.outcome(of: error, attempts: 1, at: Self.now)
                == .failed(status: error.status, reason: error.reason.rawValue, tokenIsDead: true))
    }

    @Test func whatAPNsAdvisesRetryingComesBackWithDoublingBackoffUntilTheLastAttempt() {
        let busy = APNsError(status: 429, reason: .tooManyRequests)
        #expect(Self.rules.outcome(of: busy, attempts: 1, at: Self.now) == .retry(at: Self.now + 1, status: 429, reason: "TooManyRequests"))
        #expect(Self.rules.outcome(of: busy, attempts: 3, at: Self.now) == .retry(at: Self.now + 4, status: 429, reason: "TooManyRequests"))
        #expect(
            Self.rules.outcome(of: busy, attempts: 8, at: Self.now)
                == .failed(status: 429, reason: "TooManyRequests (gave up after 8 attempts)", tokenIsDead: false))
        #expect(
            Self.rules.outcome(of: APNsError(status: 503, reason: .serviceUnavailable), attempts: 2, at: Self.now)
                == .retry(
                    at: Self.now + 2, status: 503, reason: "ServiceUnavailable"))
    }

    @Test func aRequestAPNsRefusesAsMalformedIsADeadLetterAndTheTokenLives() {
        #expect(
            Self.rules.outcome(of: APNsError(status: 400, reason: .badPriority), attempts: 1, at: Self.now)
                == .failed(status: 400, reason: "BadPriority", tokenIsDead: false))
    }

    @Test func noAnswerIsRetried() {
        struct Timeout: Error, CustomStringConvertible { var description: String { "timed out" } }
        #expect(
            Self.rules.outcome(ofNoAnswer: Timeout(), attempts: 1, at: Self.now)
                == .retry(at: Self.now + 1, status: nil, reason: "no answer: timed out"))
    }

    /// A claimed push is sent only in the first half of its lease: its answer, or the request
    /// timeout, then comes before another instance may claim it again.
    @Test func aClaimedPushIsSentOnlyInTheFirstHalfOfItsLease() {
        let policy = DispatchPolicy(lease: 60, requestTimeout: .seconds(10))
        let leasedUntil = Self.now + 60
        #expect(policy.maySend(leasedUntil: leasedUntil, at: Self.now))
        #expect(policy.maySend(leasedUntil: leasedUntil, at: Self.now + 30))
        #expect(!policy.maySend(leasedUntil: leasedUntil, at: Self.now + 30.5))
        #expect(!policy.maySend(leasedUntil: leasedUntil, at: Self.now + 70))
    }
}
