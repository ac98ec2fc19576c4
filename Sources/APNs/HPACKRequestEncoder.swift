import NIOCore

/// HPACK (RFC 7541) for the header blocks the client sends. A provider sends the same few fields
/// on every request, so after the first one each indexable field is a single byte naming its
/// dynamic-table entry; the fields that change with every request (`:path`, `apns-id`, …) are
/// literals kept out of the table. Strings are written as they are, not Huffman-coded: a request
/// is one or two dozen bytes longer, and NIOHPACK's Huffman coding took 6% of the client's time.
/// The peer's decoder is mirrored exactly: the same entries, sizes and evictions (§4).
struct HPACKRequestEncoder {
    /// The table size this encoder uses at most: the initial SETTINGS_HEADER_TABLE_SIZE.
    static let preferredTableSize = 4_096

    private(set) var maxTableSize = preferredTableSize
    /// Oldest first; entry `i` has HPACK index 61 + (count - i).
    private var table: [(name: String, value: String)] = []
    private var tableSize = 0
    /// The size to announce at the start of the next block, after the peer changed its setting.
    private var sizeUpdate: Int?

    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the table shrinks at once to fit it, and the next
    /// block starts by saying so (§6.3).
    mutating func peerAllowsTableSize(_ size: Int) {
        let size = min(size, Self.preferredTableSize)
        guard size != maxTableSize else { return }
        maxTableSize = size
        sizeUpdate = min(sizeUpdate ?? size, size)
        evict(toFit: 0)
    }

    /// Appends the header block of `fields`, in their order.
    mutating func encode(_ fields: [APNsRequest.Header], to bytes: inout ByteBuffer) {
        if let size = sizeUpdate {
            sizeUpdate = nil
            Self.writeInteger(size, prefixBits: 5, flags: 0x20, to: &bytes)
        }
        for field in fields { encode(field, to: &bytes) }
    }

    private mutating func encode(_ field: APNsRequest.Header, to bytes: inout ByteBuffer) {
        if field.indexable, let index = dynamicIndex(field.name, field.value) {
            Self.writeInteger(index, prefixBits: 7, flags: 0x80, to: &bytes)  // §6.1
            return
        }
        var nameIndex: Int?
        for (offset, entry) in Self.staticTable.enumerated() where entry.name == field.name {
            if entry.value == field.value {
                Self.writeInteger(offset + 1, prefixBits: 7, flags: 0x80, to: &bytes)
                return
            }
            if nameIndex == nil { nameIndex = offset + 1 }
        }
        if nameIndex == nil { nameIndex = dynamicIndex(field.name, nil) }
        if field.indexable {
            Self.writeInteger(nameIndex ?? 0, prefixBits: 6, flags: 0x40, to: &bytes)  // §6.2.1
        } else {
            Self.writeInteger(nameIndex ?? 0, prefixBits: 4, flags: 0x00, to: &bytes)  // §6.2.2
        }
        if nameIndex == nil { Self.writeString(field.name, to: &bytes) }
        Self.writeString(field.value, to: &bytes)
        if field.indexable { insert(field.name, field.value) }
    }

    /// The index of the newest entry with this name (and this value, unless nil).
    private func dynamicIndex(_ name: String, _ value: String?) -> Int? {
        var position = table.count
        while position > 0 {
            position -= 1
            if table[position].name == name, value.map({ table[position].value == $0 }) ?? true {
                return Self.staticTable.count + table.count - position
            }
        }
        return nil
    }

    /// §4.4: the oldest entries go until the new one fits; one larger than the table empties it.
    private mutating func insert(_ name: String, _ value: String) {
        let size = Self.entrySize(name, value)
        evict(toFit: size)
        guard size <= maxTableSize else { return }
        table.append((name, value))
        tableSize += size
    }

    private mutating func evict(toFit size: Int) {
        var evicted = 0
        while evicted < table.count, tableSize + size > maxTableSize {
            tableSize -= Self.entrySize(table[evicted].name, table[evicted].value)
            evicted += 1
        }
        table.removeFirst(evicted)
    }

    /// §4.1: an entry's size counts its name, its value and 32 bytes.
    private static func entrySize(_ name: String, _ value: String) -> Int {
        name.utf8.count + value.utf8.count + 32
    }

    /// §5.1: the value in the low `prefixBits` bits of a byte whose high bits are `flags`, and as
    /// many 7-bit continuation bytes as it needs.
    static func writeInteger(_ value: Int, prefixBits: Int, flags: UInt8, to bytes: inout ByteBuffer) {
        let limit = (1 << prefixBits) - 1
        guard value >= limit else {
            bytes.writeInteger(flags | UInt8(value))
            return
        }
        bytes.writeInteger(flags | UInt8(limit))
        var rest = value - limit
        while rest >= 128 {
            bytes.writeInteger(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        bytes.writeInteger(UInt8(rest))
    }

    /// §5.2, without Huffman coding.
    private static func writeString(_ string: String, to bytes: inout ByteBuffer) {
        writeInteger(string.utf8.count, prefixBits: 7, flags: 0x00, to: &bytes)
        bytes.writeString(string)
    }

    /// Appendix A: index 1 is the first entry.
    static let staticTable: [(name: String, value: String)] = [
        (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
        (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
        (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
        ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
        ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""), ("cache-control", ""),
        ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""), ("content-length", ""),
        ("content-location", ""), ("content-range", ""), ("content-type", ""), ("cookie", ""), ("date", ""),
        ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""), ("if-match", ""),
        ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""), ("if-unmodified-since", ""),
        ("last-modified", ""), ("link", ""), ("location", ""), ("max-forwards", ""), ("proxy-authenticate", ""),
        ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""), ("retry-after", ""),
        ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""), ("transfer-encoding", ""),
        ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
    ]
}
