import APNs
import NIOCore
import NIOEmbedded
import Synchronization

/// What an APNs server sends is untrusted input too: one fuzz input as the bytes of a server
/// through the client's HTTP/2 (`APNsStreamsHandler`), after three requests and before a fourth,
/// then two seconds of silence (a PING, and the end of a connection that owes answers). Whatever
/// came, the client must not crash, and every request it was given must be answered exactly once
/// by the time the connection is gone.
func fuzzServerBytes(_ input: [UInt8]) {
    let channel = EmbeddedChannel()
    let ready = channel.eventLoop.makePromise(of: Void.self)
    let streams = APNsStreamsHandler(status: ConnectionStatus(), ready: ready)
    try! channel.pipeline.syncOperations.addHandler(streams)
    try! channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 443)).wait()
    let answers = Answers()
    func send(bodySize: Int) {
        streams.send(
            APNsStreamRequest(
                headers: [
                    .init(":method", "POST"), .init(":scheme", "https"), .init(":authority", "api.push.apple.com"),
                    .init(":path", "/3/device/abcd", indexable: false), .init("apns-push-type", "liveactivity"),
                ],
                body: bodySize > 0 ? ByteBuffer(repeating: 1, count: bodySize) : nil, deadline: channel.eventLoop.now + .seconds(60),
                answer: { _ in answers.count.add(1, ordering: .relaxed) }))
    }
    for size in [0, 100, 2_000] { send(bodySize: size) }
    // The low bits of the input's first byte say where TLS cuts what it hands over; the rest is
    // the server's.
    let cut = Int((input.first ?? 0) & 0x7F) + 1
    var bytes = ByteBuffer(bytes: input.dropFirst())
    while channel.isActive, let chunk = bytes.readSlice(length: min(cut, bytes.readableBytes)), chunk.readableBytes > 0 {
        _ = try? channel.writeInbound(chunk)
        channel.pipeline.fireChannelReadComplete()
        channel.embeddedEventLoop.run()
    }
    send(bodySize: 10)
    channel.embeddedEventLoop.advanceTime(by: .seconds(1))
    channel.embeddedEventLoop.advanceTime(by: .seconds(1))
    ready.fail(CancellationError())
    _ = try? channel.finish()
    precondition(answers.count.load(ordering: .relaxed) == 4, "\(answers.count.load(ordering: .relaxed)) answers to 4 requests")
}

private final class Answers: Sendable {
    let count = Atomic<Int>(0)
}
