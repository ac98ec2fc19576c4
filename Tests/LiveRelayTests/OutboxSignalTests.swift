import Testing

@testable import LiveRelay

/// How the dispatcher is woken: a signal ends one wait, and only one.
@Suite struct OutboxSignalTests {
    @Test func aSignalledWaitLeavesNothingPendingSoTheNextWaitWaits() async throws {
        let signal = OutboxSignal()
        for _ in 0..<3 {
            let waiting = Task { await signal.wait(upTo: .seconds(600)) }
            while !signal.hasWaiter { await Task.yield() }
            signal.signal()
            await waiting.value
            // The wait's timer, cancelled when the signal ended it, must not leave a signal behind:
            // the next wait would end at once, and leave one again.
            try #require(!signal.isPending)
        }
    }

    @Test func aSignalBeforeTheWaitEndsItAtOnceAndIsUsedUp() async {
        let signal = OutboxSignal()
        signal.signal()
        #expect(signal.isPending)
        await signal.wait(upTo: .seconds(600))
        #expect(!signal.isPending)
    }

    @Test func aCancelledWaitReturnsWithoutASignal() async {
        let signal = OutboxSignal()
        let waiting = Task { await signal.wait(upTo: .seconds(600)) }
        while !signal.hasWaiter { await Task.yield() }
        waiting.cancel()
        await waiting.value
        #expect(!signal.isPending && !signal.hasWaiter)
    }

    @Test func aWaitThatRunsOutAsksForAClaim() async {
        let signal = OutboxSignal()
        _ = signal.takeQueued()
        await signal.wait(upTo: .milliseconds(1), thenClaim: true)
        #expect(signal.takeQueued())
        await signal.wait(upTo: .milliseconds(1), thenClaim: false)
        #expect(!signal.takeQueued())
    }
}
