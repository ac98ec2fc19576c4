/// Where one kind of APNs request goes.
public struct APNsEndpoint: Sendable, Hashable {
    public enum TrustRoots: Sendable, Hashable {
        /// The system's CA store (real APNs chains to USERTrust RSA Certification Authority).
        case system
        /// A PEM CA file, such as the one the emulator writes.
        case caFile(String)
    }

    public var host: String
    public var port: Int
    public var trustRoots: TrustRoots

    public init(host: String, port: Int, trustRoots: TrustRoots = .system) {
        self.host = host
        self.port = port
        self.trustRoots = trustRoots
    }

    /// `host:port`, the `:authority` of requests (port left out when it is 443).
    public var authority: String { port == 443 ? host : "\(host):\(port)" }
}

/// Where an APNs environment (`PushEnvironment`, sandbox or production) is served: the host of
/// device and broadcast pushes, and the host of channel management, which Apple serves on other
/// names and ports.
public struct APNsHosts: Sendable, Hashable, CustomStringConvertible {
    public var name: String
    /// `/3/device/<token>` and `/4/broadcasts/apps/<bundle>`.
    public var push: APNsEndpoint
    /// `/1/apps/<bundle>/channels` and `/all-channels`.
    public var channelManagement: APNsEndpoint

    public init(name: String, push: APNsEndpoint, channelManagement: APNsEndpoint) {
        self.name = name
        self.push = push
        self.channelManagement = channelManagement
    }

    /// `api.push.apple.com:443` (or 2197), channels on `api-manage-broadcast.push.apple.com:2196`.
    public static func production(port: Int = 443) -> APNsHosts {
        APNsHosts(
            name: "production",
            push: APNsEndpoint(host: "api.push.apple.com", port: port),
            channelManagement: APNsEndpoint(host: "api-manage-broadcast.push.apple.com", port: 2196))
    }

    /// `api.sandbox.push.apple.com:443` (or 2197), channels on
    /// `api-manage-broadcast.sandbox.push.apple.com:2195`.
    public static func sandbox(port: Int = 443) -> APNsHosts {
        APNsHosts(
            name: "sandbox",
            push: APNsEndpoint(host: "api.sandbox.push.apple.com", port: port),
            channelManagement: APNsEndpoint(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195))
    }

    public static let production = production()
    public static let sandbox = sandbox()

    /// Any APNs-compatible server, such as `liverelay emulator`, trusted through its CA file.
    public static func custom(host: String, port: Int, channelManagementPort: Int, caFile: String?) -> APNsHosts {
        let trust: APNsEndpoint.TrustRoots = caFile.map { .caFile($0) } ?? .system
        return APNsHosts(
            name: "custom",
            push: APNsEndpoint(host: host, port: port, trustRoots: trust),
            channelManagement: APNsEndpoint(host: host, port: channelManagementPort, trustRoots: trust))
    }

    public var description: String { "\(name) (\(push.authority))" }
}
