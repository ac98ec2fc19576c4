import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// An endpoint's URL as this server posts to it: `http` or `https`, a host, a port in 1–65535
/// (written, or the scheme's), no user or password, nothing that is not printable. Read when the
/// endpoint is saved and again before every attempt: a URL saved by an older release, or changed
/// in the database, is refused there too, never handed to the network code (a port of 99999 once
/// trapped in it, and the server died at every restart).
package struct WebhookTarget: Sendable, Hashable {
    /// The longest URL kept.
    package static let maximumLength = 2048

    /// The host, without an IPv6 literal's brackets or the root's final dot, in lower case.
    package var host: String
    package var port: Int

    /// Why a URL is refused, in words for the person who gave it.
    package struct Refusal: Error, Sendable, Hashable {
        package var reason: String
    }

    package static func parse(_ text: String) -> Result<WebhookTarget, Refusal> {
        func refused(_ reason: String) -> Result<WebhookTarget, Refusal> { .failure(Refusal(reason: reason)) }
        guard text.utf8.count <= maximumLength else { return refused("must be at most \(maximumLength) bytes") }
        // A NUL once shortened the URL kept; CR and LF would end a request line early.
        if let control = text.unicodeScalars.first(where: { $0.value < 0x21 || $0.value == 0x7F || (0x80...0x9F).contains($0.value) }) {
            return refused("must not hold spaces or control characters (U+\(String(format: "%04X", control.value)))")
        }
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme) else {
            return refused("must be an http:// or https:// URL")
        }
        guard var host = url.host, !host.isEmpty else { return refused("must name a host") }
        guard url.user == nil, url.password == nil else { return refused("must not carry a user or password") }
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        host = host.lowercased()
        if host.hasSuffix(".") { host.removeLast() }
        guard !host.isEmpty else { return refused("must name a host") }
        let port: Int
        switch Self.writtenPort(text) {
        case nil: port = scheme == "https" ? 443 : 80
        case let written?:
            guard let number = Int(written), (1...65_535).contains(number) else { return refused("the port must be 1 to 65535, not \(written)") }
            port = number
        }
        // 127.1, 2130706433, 0x7f000001 and 0 are all addresses to the system's resolver: only the
        // four decimal numbers are read as one here, so the others are refused, not taken for names.
        if WebhookAddresses.ip(host) == nil, Self.isLooseIPv4(host) {
            return refused("\(host) is an IPv4 address written loosely: write it as four decimal numbers (a.b.c.d)")
        }
        return .success(WebhookTarget(host: host, port: port))
    }

    /// The port as written after the host (nil when none is), read from the text itself:
    /// `URLComponents` has no port for one too large to be an `Int`, which a client would then
    /// take for the scheme's.
    static func writtenPort(_ text: String) -> Substring? {
        guard let start = text.range(of: "://")?.upperBound else { return nil }
        let authority = text[start...].prefix { !"/?#".contains($0) }
        let hostAndPort = authority.split(separator: "@", omittingEmptySubsequences: false).last ?? authority
        let afterHost = hostAndPort.lastIndex(of: "]").map { hostAndPort[hostAndPort.index(after: $0)...] } ?? hostAndPort
        guard let colon = afterHost.lastIndex(of: ":") else { return nil }
        let port = afterHost[afterHost.index(after: colon)...]
        return port.isEmpty ? nil : port
    }

    /// Whether the C library reads `host` as an IPv4 address (`inet_aton`: one to four numbers,
    /// decimal, octal or hex).
    static func isLooseIPv4(_ host: String) -> Bool {
        var address = in_addr()
        return inet_aton(host, &address) != 0
    }
}
