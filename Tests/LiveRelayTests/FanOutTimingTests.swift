import Foundation
import LiveRelayTesting
import Testing

@testable import LiveRelay

/// `liverelay_fanout_duration_seconds`: a request of several pushes, from its acceptance to the
/// answer of its last push.
@Suite struct FanOutTimingTests {
    @Test func aFanOutIsTimedFromAcceptanceToItsLastAnswerOnly() {
        let metrics = RelayMetrics()
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        metrics.noteAccepted(requestID: "one", pushes: 1, at: t0)
        metrics.noteAccepted(requestID: "three", pushes: 3, at: t0)
        metrics.noteAnswered(requestID: "one", at: t0 + 1)
        metrics.noteAnswered(requestID: "three", at: t0 + 2)
        metrics.noteAnswered(requestID: "three", at: t0 + 4)
        #expect(PrometheusSamples(metrics.text).value("liverelay_fanout_duration_seconds_count") == nil)
        metrics.noteAnswered(requestID: "three", at: t0 + 7)
        let samples = PrometheusSamples(metrics.text)
        #expect(samples.value("liverelay_fanout_duration_seconds_count") == 1)
        #expect(samples.value("liverelay_fanout_duration_seconds_sum") == 7)
    }

    @Test func theFanOutsKeptAreBoundedTheOldestForgottenFirst() {
        let metrics = RelayMetrics()
        let t0 = Date(timeIntervalSince1970: 1_800_000_000)
        for number in 0...RelayMetrics.fanOutsKept { metrics.noteAccepted(requestID: "r\(number)", pushes: 2, at: t0 + Double(number)) }
        for number in 0...RelayMetrics.fanOutsKept {
            metrics.noteAnswered(requestID: "r\(number)", at: t0 + 5000)
            metrics.noteAnswered(requestID: "r\(number)", at: t0 + 5000)
        }
        // The first was forgotten to keep the others; every other one was measured.
        #expect(PrometheusSamples(metrics.text).value("liverelay_fanout_duration_seconds_count") == Double(RelayMetrics.fanOutsKept))
    }
}
