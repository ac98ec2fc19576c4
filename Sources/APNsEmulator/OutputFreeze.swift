import NIOCore

/// A connection's output, held while it is frozen (`ServerAnswer.frozen`): every write and
/// flush waits, then goes out in order when it thaws. Placed below HTTP/2, it holds what NIOHTTP2
/// writes by itself as well (PING and SETTINGS acknowledgements, WINDOW_UPDATE), as a hung server
/// or a congested path does; a client cannot tell the freeze from a dead connection by a PING.
/// It carries whatever passes (bytes below HTTP/2, frames in tests), untouched.
final class OutputFreeze: ChannelOutboundHandler {
    typealias OutboundIn = Any

    private var context: ChannelHandlerContext?
    private var thawsAt: NIODeadline?
    private var thaw: Scheduled<Void>?
    private var held: [(data: NIOAny, promise: EventLoopPromise<Void>?)] = []
    private var flushHeld = false

    var isFrozen: Bool { thawsAt != nil }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        dropHeld()
        self.context = nil
    }

    /// Holds the output from now until `duration` from now; what was written before goes out
    /// first. A freeze already longer stays as it is.
    func freeze(for duration: TimeAmount) {
        guard let context else { return }
        let until = context.eventLoop.now + duration
        if let thawsAt, thawsAt >= until { return }
        if thawsAt == nil { context.flush() }
        thawsAt = until
        thaw?.cancel()
        thaw = context.eventLoop.assumeIsolated().scheduleTask(deadline: until) { [self] in
            thawsAt = nil
            thaw = nil
            guard let context = self.context else { return }
            let output = held
            held = []
            for (data, promise) in output { context.write(data, promise: promise) }
            if flushHeld {
                flushHeld = false
                context.flush()
            }
        }
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard isFrozen else {
            context.write(data, promise: promise)
            return
        }
        held.append((data, promise))
    }

    func flush(context: ChannelHandlerContext) {
        guard isFrozen else {
            context.flush()
            return
        }
        flushHeld = true
    }

    /// A frozen connection that closes never writes what it held.
    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        if mode != .input { dropHeld() }
        context.close(mode: mode, promise: promise)
    }

    private func dropHeld() {
        thaw?.cancel()
        thaw = nil
        thawsAt = nil
        let output = held
        held = []
        flushHeld = false
        for (_, promise) in output { promise?.fail(ChannelError.ioOnClosedChannel) }
    }
}

@available(*, unavailable)
extension OutputFreeze: Sendable {}
