import Foundation
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which addresses webhook endpoints may have. A server that posts wherever a key holder says
/// could be made to reach what only it can reach (a cloud's metadata service, a database on its
/// network): by default only public addresses, checked when an endpoint is saved and again before
/// every attempt, on the address the attempt then connects to.
package enum WebhookAddresses: String, Sendable, Hashable, CaseIterable {
    /// Public addresses only: not loopback, private, link-local, shared, reserved, multicast, or
    /// an IPv6 transition or reserved range.
    case `public`
    /// Public addresses and loopback (the demo's, and tests': a receiver on the same machine).
    case loopback
    /// Any address (a receiver on the server's own network).
    case any

    /// The kind of address an IP is.
    package enum Kind: Sendable, Hashable {
        case `public`
        case loopback
        /// Private, link-local, shared, unspecified, reserved or multicast.
        case `private`
    }

    package func allows(_ kind: Kind) -> Bool {
        switch (self, kind) {
        case (_, .public), (.loopback, .loopback), (.any, _): true
        default: false
        }
    }

    /// Checks an endpoint's address as given (`WebhookTarget`); a host that is an IP or
    /// `localhost` must be allowed, and must not be one of this server's own listeners. The reason,
    /// if refused.
    package func refusal(ofURL text: String, ownPorts: Set<Int> = []) -> String? {
        let target: WebhookTarget
        switch WebhookTarget.parse(text) {
        case .success(let parsed): target = parsed
        case .failure(let refusal): return refusal.reason
        }
        guard let kind = Self.kind(ofHost: target.host) else { return nil }
        if kind == .loopback, ownPorts.contains(target.port) { return Self.ownListener(target) }
        guard !allows(kind) else { return nil }
        return notAllowed(kind, "\(target.host) is ")
    }

    /// Why an address of `kind` is refused, after `named` (the host, and what it resolved to).
    func notAllowed(_ kind: Kind, _ named: String) -> String {
        named + "a \(kind == .loopback ? "loopback" : "private") address: this server posts only to \(allowedText) (serve --webhook-addresses)"
    }

    static func ownListener(_ target: WebhookTarget) -> String {
        "port \(target.port) on loopback is this server's own (its emulator's control API): an endpoint cannot be one"
    }

    /// What this allows, for messages.
    var allowedText: String {
        switch self {
        case .public: "public addresses"
        case .loopback: "public and loopback addresses"
        case .any: "any address"
        }
    }

    /// The address an attempt to `target` connects to: its host resolved once, every address it
    /// resolves to checked, and the first of them (the attempt connects to it, and to nothing the
    /// name might resolve to a moment later); or why there is none.
    package func address(of target: WebhookTarget, ownPorts: Set<Int> = []) async -> Result<[UInt8], WebhookTarget.Refusal> {
        let addresses = await Self.resolve(target.host)
        guard let first = addresses.first else { return .failure(.init(reason: "\(target.host) does not resolve")) }
        for address in addresses {
            let kind = Self.kind(ofIP: address) ?? .private
            if kind == .loopback, ownPorts.contains(target.port) { return .failure(.init(reason: Self.ownListener(target))) }
            if !allows(kind) {
                let named = Self.ip(target.host) == nil ? "\(target.host) resolves to \(Self.text(address)), " : "\(target.host) is "
                return .failure(.init(reason: notAllowed(kind, named)))
            }
        }
        return .success(first)
    }

    // MARK: Addresses

    /// The host without an IPv6 literal's brackets.
    static func bare(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// The kind of a host given as an IP or `localhost` (with or without the root's dot); nil for
    /// a name (known once resolved).
    package static func kind(ofHost host: String) -> Kind? {
        var bare = bare(host).lowercased()
        if bare.hasSuffix(".") { bare.removeLast() }
        if bare == "localhost" || bare.hasSuffix(".localhost") { return .loopback }
        return ip(bare).flatMap(kind(ofIP:))
    }

    /// An IP literal's 4 or 16 bytes.
    static func ip(_ text: String) -> [UInt8]? {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return withUnsafeBytes(of: &v4) { Array($0) } }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 { return withUnsafeBytes(of: &v6) { Array($0) } }
        return nil
    }

    static func text(_ bytes: [UInt8]) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        return bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil
                ? String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
        }
    }

    /// The kind of an IPv4 (4 bytes) or IPv6 (16 bytes) address.
    package static func kind(ofIP bytes: [UInt8]) -> Kind? {
        if bytes.count == 4 { return kind(ofIPv4: bytes) }
        guard bytes.count == 16 else { return nil }
        if bytes == [UInt8](repeating: 0, count: 15) + [1] { return .loopback }
        // IPv4-mapped (::ffff:a.b.c.d) and NAT64 (64:ff9b::a.b.c.d): the IPv4 address decides.
        if bytes.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] || bytes.prefix(12) == [0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0] {
            return kind(ofIPv4: Array(bytes.suffix(4)))
        }
        // ::/96 (IPv4-compatible, ::, and with it), ::ffff:0:0:0/96 (IPv4-translated): never a public host.
        if bytes.prefix(12).allSatisfy({ $0 == 0 }) || bytes.prefix(12) == [0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0] { return .private }
        // swift-format-ignore
        let prefixes: [(bytes: [UInt8], bits: Int)] = [
            ([0xfc], 7),                               // unique local
            ([0xfe, 0x80], 10),                        // link-local
            ([0xfe, 0xc0], 10),                        // site-local (deprecated)
            ([0xff], 8),                               // multicast
            ([0x20, 0x01, 0x0d, 0xb8], 32),            // documentation
            ([0x20, 0x01, 0x00, 0x00], 23),            // IETF protocol assignments (Teredo among them)
            ([0x20, 0x02], 16),                        // 6to4: an IPv4 address inside, relayed
            ([0x00, 0x64, 0xff, 0x9b, 0x00, 0x01], 48), // local-use IPv4/IPv6 translation
            ([0x01, 0x00, 0, 0, 0, 0, 0, 0], 64),      // discard-only
        ]
        for prefix in prefixes where Self.address(bytes, startsWith: prefix.bytes, bits: prefix.bits) { return .private }
        return .public
    }

    /// Whether the first `bits` of `address` are those of `start`.
    static func address(_ address: [UInt8], startsWith start: [UInt8], bits: Int) -> Bool {
        for bit in 0..<bits {
            let mask = UInt8(0x80) >> UInt8(bit % 8)
            if address[bit / 8] & mask != start[bit / 8] & mask { return false }
        }
        return true
    }

    static func kind(ofIPv4 b: [UInt8]) -> Kind {
        switch (b[0], b[1]) {
        case (127, _): .loopback
        case (0, _), (10, _), (169, 254), (192, 168), (255, _): .private
        case (172, 16...31), (100, 64...127), (198, 18...19): .private  // private, shared (CGNAT), benchmarking
        case (192, 0) where b[2] == 0 || b[2] == 2: .private  // IETF protocol assignments, documentation
        case (198, 51) where b[2] == 100, (203, 0) where b[2] == 113: .private  // documentation
        case (192, 88) where b[2] == 99: .private  // 6to4 relays (deprecated)
        case (224...255, _): .private  // multicast, reserved
        default: .public
        }
    }

    /// Tests: a resolver of names in place of the system's (for a name that resolves elsewhere
    /// each time it is asked).
    @TaskLocal package static var resolver: (@Sendable (String) async -> [[UInt8]])?

    /// The addresses `host` resolves to now (none when it does not resolve), asked of the system's
    /// resolver on NIO's thread pool: `getaddrinfo` blocks.
    static func resolve(_ host: String) async -> [[UInt8]] {
        if let literal = ip(host) { return [literal] }
        if let resolver { return await resolver(host) }
        return
            (try? await NIOThreadPool.singleton.runIfActive { () -> [[UInt8]] in
                var hints = addrinfo()
                hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
                var list: UnsafeMutablePointer<addrinfo>?
                guard getaddrinfo(host, nil, &hints, &list) == 0 else { return [] }
                defer { freeaddrinfo(list) }
                var addresses: [[UInt8]] = []
                var next = list
                while let entry = next?.pointee {
                    if entry.ai_family == AF_INET, let address = entry.ai_addr {
                        addresses.append(
                            address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { pointer in
                                var ip = pointer.pointee.sin_addr
                                return withUnsafeBytes(of: &ip) { Array($0) }
                            })
                    } else if entry.ai_family == AF_INET6, let address = entry.ai_addr {
                        addresses.append(
                            address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer in
                                var ip = pointer.pointee.sin6_addr
                                return withUnsafeBytes(of: &ip) { Array($0) }
                            })
                    }
                    next = entry.ai_next
                }
                return addresses
            }) ?? []
    }
}
