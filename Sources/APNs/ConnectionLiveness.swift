import NIOCore

/// Whether a connection that owes answers is still alive: its one decision, as a value
/// (`ConnectionLivenessTests`). A connection can die without a word (a NAT forgets it, a path goes
/// black, a server hangs), and its pushes would wait for their deadline, and a fan-out with them.
/// Apple advises checking a connection's health with an HTTP/2 PING, which a server answers in
/// its HTTP/2 framing, apart from the requests' own work (NIOHTTP2 and nghttp2 do; Apple does
/// not say how APNs does). So: when answers are owed and nothing has been read
/// for `patience`, a PING; when nothing has been read `patience` after it either, the connection
/// is taken for dead. `patience` is at least `minimumPatience` and at least 10 of the
/// connection's round trips, so that a far path is given its time and a PING that comes back is
/// never taken for a dead connection. The round trip is the fastest answer's; until an answer
/// comes, the TLS handshake's, which a busy machine's CPU can make several times longer.
package struct ConnectionLiveness: Sendable, Hashable {
    enum Step: Sendable, Hashable {
        /// No answer is owed: no more checks until one is.
        case stop
        /// Look again then.
        case checkAt(NIODeadline)
        /// Send a PING, and look again then.
        case ping(checkAt: NIODeadline)
        /// Nothing came for this long, though answers were owed and a PING was sent.
        case dead(silentFor: TimeAmount)
    }

    /// One second: a PING to APNs comes back in a fraction of that from anywhere reasonable; a
    /// connection silent for a second with pushes in flight, and a second more after a PING, is
    /// cheaper to replace than to wait for.
    package static let defaultPatience = TimeAmount.seconds(1)

    let minimumPatience: TimeAmount
    private var handshake: TimeAmount?
    private var fastestAnswer: TimeAmount?
    private var lastHeard: NIODeadline
    private var pingSent: NIODeadline?

    init(minimumPatience: TimeAmount, now: NIODeadline) {
        self.minimumPatience = minimumPatience
        self.lastHeard = now
    }

    var patience: TimeAmount { max(minimumPatience, .nanoseconds(((fastestAnswer ?? handshake)?.nanoseconds ?? 0) * 10)) }

    /// Something was read: the peer is alive.
    mutating func heard(at now: NIODeadline) {
        lastHeard = now
        pingSent = nil
    }

    mutating func measured(handshake: TimeAmount) {
        self.handshake = handshake
    }

    mutating func measured(answer roundTrip: TimeAmount) {
        fastestAnswer = min(fastestAnswer ?? roundTrip, roundTrip)
    }

    /// A request went out on a connection that owed nothing: its silence until now was no sign.
    /// Returns when to look first.
    mutating func owesAnswers(from now: NIODeadline) -> NIODeadline {
        lastHeard = max(lastHeard, now)
        return lastHeard + patience
    }

    mutating func check(at now: NIODeadline, owesAnswers: Bool) -> Step {
        guard owesAnswers else {
            pingSent = nil
            return .stop
        }
        if let pingSent {
            let giveUp = pingSent + patience
            return now >= giveUp ? .dead(silentFor: now - lastHeard) : .checkAt(giveUp)
        }
        let quietUntil = lastHeard + patience
        guard now >= quietUntil else { return .checkAt(quietUntil) }
        pingSent = now
        return .ping(checkAt: now + patience)
    }
}
