import Foundation
import NIOPosix

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which addresses webhook endpoints may have. A server that posts wherever a key holder says
/// could be made to reach what only it can reach (a cloud's metadata service, a database on its
/// network): by default only public addresses, checked when an endpoint is saved and again, as
/// its name resolves then, before every attempt.
package enum WebhookAddresses: String, Sendable, Hashable, CaseIterable {
    /// Public addresses only: not loopback, private, link-local, shared, reserved or multicast.
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

    /// Checks an endpoint's address as given: a URL of `http` or `https` with a host, without
    /// credentials; a host that is an IP or `localhost` must be allowed. The reason, if refused.
    package func refusal(ofURL text: String) -> String? {
        guard text.utf8.count <= 2048 else { return "must be at most 2048 bytes" }
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme) else {
            return "must be an http:// or https:// URL"
        }
        guard let host = url.host, !host.isEmpty else { return "must name a host" }
        guard url.user == nil, url.password == nil else { return "must not carry a user or password" }
        let kind = Self.kind(ofHost: host)
        guard let kind, !allows(kind) else { return nil }
        return "\(host) is a \(kind == .loopback ? "loopback" : "private") address: this server posts only to \(allowedText)"
            + " (serve --webhook-addresses)"
    }

    /// What this allows, for messages.
    var allowedText: String {
        switch self {
        case .public: "public addresses"
        case .loopback: "public and loopback addresses"
        case .any: "any address"
        }
    }

    /// The reason an attempt to `host` is refused, once its name is resolved; nil when every
    /// address it resolves to is allowed (or it resolves to none, which the attempt then reports).
    package func refusal(ofResolvedHost host: String) async -> String? {
        if self == .any { return nil }
        let bare = Self.bare(host)
        let addresses = await Self.resolve(bare)
        for address in addresses {
            let kind = Self.kind(ofIP: address) ?? .private
            if !allows(kind) {
                return
                    "\(bare) resolves to \(Self.text(address)), a \(kind == .loopback ? "loopback" : "private") address: this server posts only to \(allowedText) (serve --webhook-addresses)"
            }
        }
        return nil
    }

    // MARK: Addresses

    /// The host without an IPv6 literal's brackets.
    static func bare(_ host: String) -> String {
        host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// The kind of a host given as an IP or `localhost`; nil for a name (known once resolved).
    package static func kind(ofHost host: String) -> Kind? {
        let bare = bare(host).lowercased()
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
        if bytes.allSatisfy({ $0 == 0 }) { return .private }  // ::
        if bytes[0] & 0xfe == 0xfc { return .private }  // fc00::/7, unique local
        if bytes[0] == 0xfe && bytes[1] & 0xc0 == 0x80 { return .private }  // fe80::/10, link-local
        if bytes[0] == 0xff { return .private }  // multicast
        if bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0x0d && bytes[3] == 0xb8 { return .private }  // 2001:db8::/32, documentation
        return .public
    }

    static func kind(ofIPv4 b: [UInt8]) -> Kind {
        switch (b[0], b[1]) {
        case (127, _): .loopback
        case (0, _), (10, _), (169, 254), (192, 168), (255, _): .private
        case (172, 16...31), (100, 64...127), (198, 18...19): .private  // private, shared (CGNAT), benchmarking
        case (192, 0) where b[2] == 0 || b[2] == 2: .private  // IETF protocol assignments, documentation
        case (198, 51) where b[2] == 100, (203, 0) where b[2] == 113: .private  // documentation
        case (224...255, _): .private  // multicast, reserved
        default: .public
        }
    }

    /// The addresses `host` resolves to now (none when it does not resolve), asked of the system's
    /// resolver on NIO's thread pool: `getaddrinfo` blocks.
    static func resolve(_ host: String) async -> [[UInt8]] {
        if let literal = ip(host) { return [literal] }
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
