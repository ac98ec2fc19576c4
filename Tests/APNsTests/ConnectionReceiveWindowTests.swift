import NIOCore
import NIOHTTP2
import Testing

@testable import APNs
@testable import APNsEmulator

@Suite struct ConnectionReceiveWindowTests {
    func data(_ bytes: Int, padding: Int? = nil) -> HTTP2Frame {
        HTTP2Frame(
            streamID: 1, payload: .data(.init(data: .byteBuffer(ByteBuffer(repeating: 0, count: bytes)), endStream: true, paddingBytes: padding)))
    }

    func increment(_ frame: HTTP2Frame?) -> Int? {
        guard let frame, frame.streamID == .rootStream, case .windowUpdate(let increment) = frame.payload else { return nil }
        return increment
    }

    @Test func theWindowGrowsOnTheFirstFrameAndIsGivenBackAtHalf() {
        var window = ConnectionReceiveWindow()
        let target = ConnectionReceiveWindow.targetSize
        #expect(increment(window.windowUpdate(after: HTTP2Frame(streamID: .rootStream, payload: .settings(.ack)))) == target - 65_535)
        // The peer may now send `target` bytes; after half of them, they are given back.
        var returned = 0
        var sent = 0
        while sent < 2 * target {
            let frame = data(4_000, padding: sent == 0 ? 9 : nil)
            sent += 4_000 + (sent == 0 ? 10 : 0)
            if let more = increment(window.windowUpdate(after: frame)) { returned += more }
            // Never more outstanding than the window: the peer would stall.
            #expect(sent - returned < target)
        }
        #expect(returned > target)
    }
}
