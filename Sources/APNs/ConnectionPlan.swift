/// Which connection of a pool takes the next request, or whether to open another: the pool's one
/// decision, as a value (`ConnectionPlanTests`). APNs announces how many streams a connection may
/// carry: one until a request with a valid provider token is accepted, then what it chooses (500 to
/// 1,500 have been seen), and again one after a rejected push for some while. A connection with
/// room takes the request, the roomiest first so the load spreads. When every connection is full,
/// another is opened, up to the most allowed, but only if each open one has answered and carries
/// more than one stream: one stream means APNs has not accepted the token yet (or no longer
/// does), and more connections would only fail the same way. Otherwise the request waits on the
/// connection that is least over its limit, in its streams handler, until a stream closes.
struct ConnectionPlan: Sendable, Hashable {
    /// What the pool knows of one connection.
    struct Connection: Sendable, Hashable {
        /// Still connecting (TCP, TLS and ALPN).
        var isConnecting = false
        /// An answer came on it: its stream limit is the one APNs settled on for the token.
        var hasAnswered = false
        /// Requests handed to it and not yet answered.
        var openStreams = 0
        /// What its last SETTINGS frame announced; 1 until one comes.
        var streamLimit = 1
    }

    enum Choice: Sendable, Hashable {
        case use(Int)
        case open
    }

    /// The pool keeps at least this many connections once used, and opens at most this many.
    var connections: ClosedRange<Int>

    func choose(among open: some Collection<Connection>) -> Choice {
        if open.count < connections.lowerBound { return .open }
        var roomiest: (index: Int, room: Int)?
        var leastOver: (index: Int, over: Int)?
        var allSettled = true
        for (index, connection) in open.enumerated() {
            let room = (connection.isConnecting ? 0 : connection.streamLimit) - connection.openStreams
            if room > 0, room > roomiest?.room ?? 0 { roomiest = (index, room) }
            if -room < leastOver?.over ?? .max { leastOver = (index, -room) }
            allSettled = allSettled && !connection.isConnecting && connection.hasAnswered && connection.streamLimit > 1
        }
        if let roomiest { return .use(roomiest.index) }
        if open.count < connections.upperBound, allSettled { return .open }
        guard let leastOver else { return .open }
        return .use(leastOver.index)
    }
}
