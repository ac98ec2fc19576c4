import Testing

@testable import APNs

/// Which connection takes the next request, and when the pool opens another (`ConnectionPlan`).
@Suite struct ConnectionPlanTests {
    typealias Connection = ConnectionPlan.Connection
    let plan = ConnectionPlan(connections: 1...4)

    static let connecting = Connection(isConnecting: true, openStreams: 1)
    static func settled(open: Int, limit: Int = 1000) -> Connection {
        Connection(hasAnswered: true, openStreams: open, streamLimit: limit)
    }

    @Test func theFirstRequestOpensAConnection() {
        #expect(plan.choose(among: []) == .open)
    }

    @Test func upToTheLeastCountEveryRequestOpensOneAndThenTheyShare() {
        let plan = ConnectionPlan(connections: 3...3)
        #expect(plan.choose(among: [Self.settled(open: 0)]) == .open, "room on the first is not enough")
        #expect(plan.choose(among: [Self.connecting, Self.connecting]) == .open)
        let three = [Self.connecting, Connection(isConnecting: true, openStreams: 0), Self.connecting]
        #expect(plan.choose(among: three) == .use(1), "the least loaded of those still connecting")
    }

    @Test func theRoomiestConnectionTakesTheRequestSoTheLoadSpreads() {
        let open = [Self.settled(open: 900), Self.settled(open: 200), Self.settled(open: 600)]
        #expect(plan.choose(among: open) == .use(1))
        #expect(plan.choose(among: [Self.settled(open: 999), Self.settled(open: 1000)]) == .use(0), "one stream of room is room")
    }

    @Test func aConnectionIsFullAtTheLimitItsServerAnnounced() {
        let lowered = [Self.settled(open: 10, limit: 10), Self.settled(open: 300)]
        #expect(plan.choose(among: lowered) == .use(1))
        #expect(plan.choose(among: [Self.settled(open: 10, limit: 10), Self.settled(open: 1000)]) == .open)
    }

    @Test func whenEveryConnectionIsFullAnotherOpensUpToTheMost() {
        #expect(plan.choose(among: [Self.settled(open: 1000)]) == .open)
        #expect(plan.choose(among: Array(repeating: Self.settled(open: 1000), count: 3)) == .open)
        let most = [Self.settled(open: 1003), Self.settled(open: 1001), Self.settled(open: 1002), Self.settled(open: 1004)]
        #expect(plan.choose(among: most) == .use(1), "at the most, it waits where the fewest wait")
    }

    @Test func noConnectionOpensWhileAnotherIsStillFindingItsLimit() {
        // Connecting, or connected with the one stream APNs allows before a token is accepted:
        // its real limit is not known yet, so the request waits on the least loaded of all.
        let opening = [Self.settled(open: 1000), Connection(isConnecting: true, openStreams: 3)]
        #expect(plan.choose(among: opening) == .use(0))
        let unanswered = [Self.settled(open: 1002), Connection(openStreams: 1, streamLimit: 1)]
        #expect(plan.choose(among: unanswered) == .use(1))
    }

    @Test func aConnectionHeldToOneStreamAfterItsAnswersOpensNoOther() {
        // APNs keeps one stream while it refuses the token (and drops to one after a rejected
        // push): another connection would be refused the same way.
        let refused = [Connection(hasAnswered: true, openStreams: 40, streamLimit: 1)]
        #expect(plan.choose(among: refused) == .use(0))
        #expect(plan.choose(among: refused + [Self.settled(open: 1000)]) == .use(1))
    }
}
