import NIOCore
import Testing

@testable import APNs

/// When a connection that owes answers is PINGed, and when it is taken for dead (`ConnectionLiveness`).
@Suite struct ConnectionLivenessTests {
    let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
    func at(_ milliseconds: Int64) -> NIODeadline { start + .milliseconds(milliseconds) }

    func liveness(patience: TimeAmount = .seconds(1)) -> ConnectionLiveness {
        var liveness = ConnectionLiveness(minimumPatience: patience, now: .uptimeNanoseconds(0))
        _ = liveness.owesAnswers(from: start)
        return liveness
    }

    @Test func silenceBringsAPingAndAPingUnansweredTheEnd() {
        var liveness = liveness()
        #expect(liveness.check(at: at(999), owesAnswers: true) == .checkAt(at(1000)))
        #expect(liveness.check(at: at(1000), owesAnswers: true) == .ping(checkAt: at(2000)))
        #expect(liveness.check(at: at(1999), owesAnswers: true) == .checkAt(at(2000)))
        #expect(liveness.check(at: at(2000), owesAnswers: true) == .dead(silentFor: .seconds(2)))
    }

    @Test func anythingReadIsLifeAndTheSilenceCountsFromThen() {
        var liveness = liveness()
        liveness.heard(at: at(600))
        #expect(liveness.check(at: at(1000), owesAnswers: true) == .checkAt(at(1600)))
        #expect(liveness.check(at: at(1600), owesAnswers: true) == .ping(checkAt: at(2600)))
        liveness.heard(at: at(1700))  // the PING's acknowledgement, or an answer
        #expect(liveness.check(at: at(2600), owesAnswers: true) == .checkAt(at(2700)))
        #expect(liveness.check(at: at(2700), owesAnswers: true) == .ping(checkAt: at(3700)), "silent again: another PING, not the end")
    }

    @Test func aConnectionThatOwesNothingIsNotChecked() {
        var liveness = liveness()
        #expect(liveness.check(at: at(5000), owesAnswers: false) == .stop)
        // Hours of quiet while nothing was owed are no sign: the silence counts from the next request.
        #expect(liveness.owesAnswers(from: at(3_600_000)) == at(3_601_000))
        #expect(liveness.check(at: at(3_600_500), owesAnswers: true) == .checkAt(at(3_601_000)))
    }

    @Test func aPingOutstandingWhenNothingIsOwedAnyMoreIsForgotten() {
        var liveness = liveness()
        #expect(liveness.check(at: at(1000), owesAnswers: true) == .ping(checkAt: at(2000)))
        #expect(liveness.check(at: at(1500), owesAnswers: false) == .stop)
        _ = liveness.owesAnswers(from: at(1600))
        #expect(liveness.check(at: at(2000), owesAnswers: true) == .checkAt(at(2600)), "no end for the old PING")
    }

    @Test func patienceIsTenRoundTripsWhenThatIsLongerTheHandshakesUntilAnAnswerCameThenTheFastestAnswers() {
        var liveness = liveness()
        #expect(liveness.patience == .seconds(1))
        liveness.measured(handshake: .milliseconds(400))  // a far path, or a busy machine
        #expect(liveness.patience == .seconds(4))
        liveness.measured(answer: .milliseconds(900))  // an answer measures the path better
        #expect(liveness.patience == .seconds(9))
        liveness.measured(answer: .milliseconds(250))
        #expect(liveness.patience == .milliseconds(2500))
        liveness.measured(answer: .milliseconds(600))  // a slow answer says nothing of the path
        #expect(liveness.patience == .milliseconds(2500))
        liveness.measured(answer: .milliseconds(20))
        #expect(liveness.patience == .seconds(1), "never below the minimum")
        #expect(liveness.check(at: at(999), owesAnswers: true) == .checkAt(at(1000)))
    }
}
