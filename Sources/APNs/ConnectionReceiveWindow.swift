import NIOCore
import NIOHTTP2

/// The connection-level receive window of an HTTP/2 endpoint that handles frames itself.
/// `NIOHTTP2Handler` leaves WINDOW_UPDATE to its stream multiplexer; without one, the peer
/// stalls once 65,535 bytes of DATA have arrived. This grows the window to `targetSize` on the
/// first frame and gives the consumed bytes back whenever half of it has been used.
/// (Stream windows need nothing: one push is at most 5 KB and each stream starts a fresh window.)
package struct ConnectionReceiveWindow {
    package static let targetSize = 1 << 24
    private static let initialSize = 65_535

    private var grown = false
    private var consumed = 0

    package init() {}

    /// The WINDOW_UPDATE to send for this inbound frame, if any.
    package mutating func windowUpdate(after frame: HTTP2Frame) -> HTTP2Frame? {
        var increment = 0
        if !grown {
            grown = true
            increment += Self.targetSize - Self.initialSize
        }
        if case .data(let data) = frame.payload {
            // Flow control counts the padding and its length byte too.
            consumed += data.data.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0)
            if consumed >= Self.targetSize / 2 {
                increment += consumed
                consumed = 0
            }
        }
        guard increment > 0 else { return nil }
        return HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: increment))
    }
}
