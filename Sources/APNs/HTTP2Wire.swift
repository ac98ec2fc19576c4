import NIOCore

/// HTTP/2 frames as bytes (RFC 9113 §4 and §6), for the client's connections: what the streams
/// handler reads and writes, without a frame value in between.
enum HTTP2Wire {
    static let clientPreface: StaticString = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    static let frameHeaderSize = 9
    /// SETTINGS_MAX_FRAME_SIZE's initial value, and the largest frame this client accepts (it
    /// announces no other).
    static let defaultMaxFrameSize = 16_384
    static let defaultWindowSize = 65_535
    static let maxWindowSize = Int(Int32.max)

    enum FrameType: UInt8 {
        case data = 0, headers, priority, rstStream, settings, pushPromise, ping, goAway, windowUpdate, continuation
    }

    enum Flag {
        static let endStream: UInt8 = 0x1
        static let ack: UInt8 = 0x1
        static let endHeaders: UInt8 = 0x4
        static let padded: UInt8 = 0x8
        static let priority: UInt8 = 0x20
    }

    enum Setting: UInt16 {
        case headerTableSize = 1, enablePush, maxConcurrentStreams, initialWindowSize, maxFrameSize, maxHeaderListSize
    }

    /// RFC 9113 §7.
    enum ErrorCode: UInt32, CustomStringConvertible {
        case noError = 0, protocolError, internalError, flowControlError, settingsTimeout, streamClosed, frameSizeError,
            refusedStream, cancel, compressionError, connectError, enhanceYourCalm, inadequateSecurity, http11Required

        /// The code's name; an unknown code by its number.
        static func name(_ code: UInt32) -> String {
            ErrorCode(rawValue: code).map(\.description) ?? "error code \(code)"
        }

        var description: String {
            switch self {
            case .noError: "NO_ERROR"
            case .protocolError: "PROTOCOL_ERROR"
            case .internalError: "INTERNAL_ERROR"
            case .flowControlError: "FLOW_CONTROL_ERROR"
            case .settingsTimeout: "SETTINGS_TIMEOUT"
            case .streamClosed: "STREAM_CLOSED"
            case .frameSizeError: "FRAME_SIZE_ERROR"
            case .refusedStream: "REFUSED_STREAM"
            case .cancel: "CANCEL"
            case .compressionError: "COMPRESSION_ERROR"
            case .connectError: "CONNECT_ERROR"
            case .enhanceYourCalm: "ENHANCE_YOUR_CALM"
            case .inadequateSecurity: "INADEQUATE_SECURITY"
            case .http11Required: "HTTP_1_1_REQUIRED"
            }
        }
    }

    /// A frame's nine-byte header.
    struct FrameHeader: Equatable {
        var length: Int
        var type: UInt8
        var flags: UInt8
        var streamID: UInt32

        func has(_ flag: UInt8) -> Bool { flags & flag != 0 }
    }

    /// The next whole frame in `bytes`, its payload as a slice, or nil until all of it has arrived.
    /// A frame longer than `maxFrameSize` is a connection error (§4.2).
    static func readFrame(from bytes: inout ByteBuffer, maxFrameSize: Int) throws(ConnectionError) -> (FrameHeader, ByteBuffer)? {
        guard bytes.readableBytes >= frameHeaderSize,
            let lengthAndType = bytes.getInteger(at: bytes.readerIndex, as: UInt32.self)
        else { return nil }
        let length = Int(lengthAndType >> 8)
        guard length <= maxFrameSize else {
            throw ConnectionError(.frameSizeError, "a frame of \(length) bytes, above the \(maxFrameSize) allowed")
        }
        guard bytes.readableBytes >= frameHeaderSize + length else { return nil }
        let header = FrameHeader(
            length: length, type: UInt8(truncatingIfNeeded: lengthAndType),
            flags: bytes.getInteger(at: bytes.readerIndex + 4)!,
            streamID: bytes.getInteger(at: bytes.readerIndex + 5, as: UInt32.self)! & 0x7FFF_FFFF)
        bytes.moveReaderIndex(forwardBy: frameHeaderSize)
        return (header, bytes.readSlice(length: length)!)
    }

    static func writeFrameHeader(length: Int, type: FrameType, flags: UInt8 = 0, streamID: UInt32, to bytes: inout ByteBuffer) {
        let index = bytes.writerIndex
        bytes.writeRepeatingByte(0, count: frameHeaderSize)
        setFrameHeader(length: length, type: type, flags: flags, streamID: streamID, at: index, in: &bytes)
    }

    /// Fills in the header of a frame whose payload was written after nine reserved bytes.
    static func setFrameHeader(length: Int, type: FrameType, flags: UInt8, streamID: UInt32, at index: Int, in bytes: inout ByteBuffer) {
        bytes.setInteger(UInt32(length) << 8 | UInt32(type.rawValue), at: index)
        bytes.setInteger(flags, at: index + 4)
        bytes.setInteger(streamID, at: index + 5)
    }

    static func writeSettings(_ settings: [(Setting, UInt32)], to bytes: inout ByteBuffer) {
        writeFrameHeader(length: 6 * settings.count, type: .settings, streamID: 0, to: &bytes)
        for (setting, value) in settings {
            bytes.writeInteger(setting.rawValue)
            bytes.writeInteger(value)
        }
    }

    static func writeWindowUpdate(streamID: UInt32, increment: Int, to bytes: inout ByteBuffer) {
        writeFrameHeader(length: 4, type: .windowUpdate, streamID: streamID, to: &bytes)
        bytes.writeInteger(UInt32(increment))
    }

    static func writeRSTStream(streamID: UInt32, code: ErrorCode, to bytes: inout ByteBuffer) {
        writeFrameHeader(length: 4, type: .rstStream, streamID: streamID, to: &bytes)
        bytes.writeInteger(code.rawValue)
    }

    static func writeGoAway(lastStreamID: UInt32, code: ErrorCode, to bytes: inout ByteBuffer) {
        writeFrameHeader(length: 8, type: .goAway, streamID: 0, to: &bytes)
        bytes.writeInteger(lastStreamID)
        bytes.writeInteger(code.rawValue)
    }

    /// The payload of a DATA or HEADERS frame without its padding (§6.1), or a protocol error when
    /// the padding is longer than the frame.
    static func unpadded(_ payload: ByteBuffer, _ header: FrameHeader) throws(ConnectionError) -> ByteBuffer {
        guard header.has(Flag.padded) else { return payload }
        var payload = payload
        guard let padding = payload.readInteger(as: UInt8.self), Int(padding) <= payload.readableBytes else {
            throw ConnectionError(.protocolError, "padding longer than its frame")
        }
        return payload.readSlice(length: payload.readableBytes - Int(padding))!
    }

    /// A connection error (§5.4.1): the connection ends with GOAWAY and this code.
    struct ConnectionError: Error, CustomStringConvertible {
        var code: ErrorCode
        var message: String

        init(_ code: ErrorCode, _ message: String) {
            self.code = code
            self.message = message
        }

        var description: String { "\(code): \(message)" }
    }
}
