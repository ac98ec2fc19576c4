import Testing
import WebPages

/// A live page's stream, tick by tick (a tick is 250 ms): what it says, and when a page that
/// takes long to draw is offered its next refresh.
struct LiveStreamTests {
    /// The states a page goes through, one a tick; what the stream says at each.
    static func said(_ states: [String], spacing: Duration, forcedEvery: Duration? = nil) -> [LiveStream.Say] {
        var stream = LiveStream(shown: "0", forcedEvery: forcedEvery)
        return states.map { state in
            defer { stream.ticked() }
            return stream.next(current: state, spacing: spacing)
        }
    }

    @Test func aChangeIsSaidAtTheNextTickWhenThePageIsCheapToDraw() {
        #expect(Self.said(["0", "1", "2", "2", "3"], spacing: .zero) == [.nothing, .changed("1"), .changed("2"), .nothing, .changed("3")])
    }

    /// A page that took 115 ms to draw waits 9 × 115 ms (five ticks) after each change it was
    /// told of; what changed meanwhile comes at once then, as the latest state.
    @Test func aPageDearToDrawHearsOfChangesLessOften() {
        let spacing = DrawCosts.spacing(afterDrawing: .milliseconds(115))
        #expect(spacing == .milliseconds(1035))
        let states = (1...12).map(String.init)
        #expect(
            Self.said(states, spacing: spacing) == [
                .changed("1"), .nothing, .nothing, .nothing, .nothing, .changed("6"), .nothing, .nothing, .nothing, .nothing,
                .changed("11"), .nothing,
            ])
        // Past the spacing, a change is said at the tick it comes.
        #expect(Self.said(["1", "1", "1", "1", "1", "1", "2"], spacing: spacing).last == .changed("2"))
    }

    @Test func aQuietStreamSaysItIsStillThereEveryFiveSecondsEvenWhileAChangeWaits() {
        let quiet = Self.said(Array(repeating: "0", count: 41), spacing: .zero)
        #expect(quiet.indices.filter { quiet[$0] == .heartbeat } == [20, 40])
        // A change held back does not keep the heartbeat from going.
        let held = Self.said(["1"] + Array(repeating: "2", count: 21), spacing: .seconds(60))
        #expect(held.first == .changed("1") && held[20] == .heartbeat && !held.dropFirst().contains(.changed("2")))
    }

    /// On a store other instances share, a change is said every 5 s even when none was seen here.
    @Test func aForcedChangeComesEveryFiveSecondsOfQuiet() {
        let said = Self.said(Array(repeating: "0", count: 41), spacing: .zero, forcedEvery: .seconds(5))
        #expect(said.indices.filter { said[$0] != .nothing } == [20, 40])
        #expect(said[20] == .changed("0"))
    }

    @Test func drawCostsAreKeptByPageTheLatestCounting() {
        let costs = DrawCosts()
        #expect(costs.spacing("/dashboard") == .zero && costs.spacing(nil) == .zero)
        costs.record("/dashboard", took: .milliseconds(115))
        costs.record("/dashboard/deliveries", took: .milliseconds(4))
        #expect(costs.spacing("/dashboard") == .milliseconds(1035))
        #expect(costs.spacing("/dashboard/deliveries") == .milliseconds(36))
        costs.record("/dashboard", took: .milliseconds(2))
        #expect(costs.spacing("/dashboard") == .milliseconds(18))
        // Paths beyond the few dozen pages there are are not kept.
        for index in 0..<100 { costs.record("/dashboard/\(index)", took: .seconds(1)) }
        #expect(costs.spacing("/dashboard/99") == .zero)
    }
}
