/// The connection-level receive window of an HTTP/2 endpoint that handles frames itself: the
/// client's streams handler, and the emulator's server (`NIOHTTP2Handler` leaves this to a stream
/// multiplexer, which it has not). Without it the peer stalls once 65,535 bytes of DATA arrived.
/// This grows the window to `targetSize` at once and gives the consumed bytes back whenever half
/// of it has been used.
package struct ConnectionReceiveWindow {
    package static let targetSize = 1 << 24
    private static let initialSize = 65_535

    private var grown = false
    private var consumed = 0

    package init() {}

    /// The connection's WINDOW_UPDATE increment to send after receiving a frame that carried
    /// `flowControlledBytes` (a DATA frame's whole payload, padding included; 0 for any other).
    package mutating func increment(receiving flowControlledBytes: Int) -> Int? {
        var increment = 0
        if !grown {
            grown = true
            increment += Self.targetSize - Self.initialSize
        }
        consumed += flowControlledBytes
        if consumed >= Self.targetSize / 2 {
            increment += consumed
            consumed = 0
        }
        return increment > 0 ? increment : nil
    }
}
