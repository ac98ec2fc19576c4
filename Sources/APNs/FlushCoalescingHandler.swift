import NIOCore

/// Sits between TLS and HTTP/2 and turns the flushes of one event-loop tick into one: fewer TLS
/// records and system calls under load, no delay when idle. But at most `flushEvery` flushes wait,
/// so that when hundreds of requests are written in one tick APNs starts on the first while the
/// rest are written, instead of both ends taking turns at the whole batch.
///
/// The streams handler flushes `NIOHTTP2Handler` after every request because of what it does with
/// the DATA frames written between two flushes: it sends them in the order of a hash set, not of
/// their streams. APNs then answers out of order, and each end removes every answered stream from
/// the middle of its sorted stream map, which costs a shift of all the streams after it (with
/// 800 in flight, a sixth of the client's time). Flushed one by one, streams close oldest first.
final class FlushCoalescingHandler: ChannelOutboundHandler {
    typealias OutboundIn = IOData
    typealias OutboundOut = IOData

    static let flushEvery = 32

    private var unflushed = 0
    private var flushScheduled = false

    func flush(context: ChannelHandlerContext) {
        unflushed += 1
        if unflushed >= Self.flushEvery {
            unflushed = 0
            context.flush()
        }
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            guard unflushed > 0 else { return }
            unflushed = 0
            context.flush()
        }
    }
}

@available(*, unavailable)
extension FlushCoalescingHandler: Sendable {}
