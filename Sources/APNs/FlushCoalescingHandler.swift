import NIOCore

/// Sits between TLS and HTTP/2 and turns the flushes of one event-loop tick into one: fewer TLS
/// records and system calls under load, no delay when idle. But at most `flushEvery` flushes wait,
/// so that when hundreds of requests are written in one tick APNs starts on the first while the
/// rest are written, instead of both ends taking turns at the whole batch.
///
/// What is written between two flushes goes down as one buffer. NIOSSL seals each write as a TLS
/// record of its own, and NIOHTTP2 writes three per request (the HEADERS frame, a DATA frame's
/// header, its body): each end would seal or open three records per push instead of one per batch.
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
    /// The bytes written since the last flush, and the promise that completes with their write.
    private var pending: ByteBuffer?
    private var pendingPromise: EventLoopPromise<Void>?

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        switch unwrapOutboundIn(data) {
        case .byteBuffer(var bytes):
            if pending == nil {
                pending = context.channel.allocator.buffer(capacity: max(bytes.readableBytes, 4096))
            }
            pending!.writeBuffer(&bytes)
            if let promise {
                if let pendingPromise {
                    pendingPromise.futureResult.cascade(to: promise)
                } else {
                    pendingPromise = promise
                }
            }
        case .fileRegion:
            writePending(context: context)
            context.write(data, promise: promise)
        }
    }

    func flush(context: ChannelHandlerContext) {
        unflushed += 1
        if unflushed >= Self.flushEvery {
            unflushed = 0
            writePendingAndFlush(context: context)
        }
        guard !flushScheduled else { return }
        flushScheduled = true
        context.eventLoop.assumeIsolated().execute { [self] in
            flushScheduled = false
            guard unflushed > 0 else { return }
            unflushed = 0
            writePendingAndFlush(context: context)
        }
    }

    func close(context: ChannelHandlerContext, mode: CloseMode, promise: EventLoopPromise<Void>?) {
        // Written but not flushed: the channel fails it on close, as it would without this handler.
        writePending(context: context)
        context.close(mode: mode, promise: promise)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        writePending(context: context)
    }

    private func writePendingAndFlush(context: ChannelHandlerContext) {
        writePending(context: context)
        context.flush()
    }

    private func writePending(context: ChannelHandlerContext) {
        guard let bytes = pending else { return }
        let promise = pendingPromise
        pending = nil
        pendingPromise = nil
        context.write(wrapOutboundOut(.byteBuffer(bytes)), promise: promise)
    }
}

@available(*, unavailable)
extension FlushCoalescingHandler: Sendable {}
