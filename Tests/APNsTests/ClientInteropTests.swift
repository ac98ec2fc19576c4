import APNs
import APNsEmulator
import Foundation
import LiveRelayTesting
import NIOCore
import Testing

/// nghttpd, nghttp2's server, wherever it is installed; in CI it must be.
enum Nghttpd {
    static let path = ProcessInfo.processInfo.environment["LIVERELAY_NGHTTPD"] ?? "/usr/sbin/nghttpd"
    static var isAvailable: Bool { FileManager.default.isExecutableFile(atPath: path) }
    static var skipNote: String {
        isAvailable ? "" : "SKIPPED: the client's HTTP/2 was NOT tested against nghttpd: \(path) is missing (Debian: apt-get install nghttp2-server)"
    }
}

/// The client's HTTP/2 against another implementation than the emulator's (NIOHTTP2): nghttpd,
/// strict about HPACK and flow control, set up to exercise what APNs' defaults never do.
@Suite struct ClientInteropTests {
    /// nghttpd echoes every body back. It allows 20 streams at once, 16,383 bytes of window per
    /// stream and a 256-byte header table, which the 300-byte `authorization` field never fits:
    /// requests wait for streams, bodies for window, and every block follows evictions.
    @Test(.enabled(if: Nghttpd.isAvailable || TestRequirement.isCI, Comment(rawValue: Nghttpd.skipNote)))
    func everyBodyComesBackWholeFromNghttpdThroughItsLimits() async throws {
        let directory = try TestFiles.folder("nghttpd")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificates = try EmulatorCertificates.generate()
        try certificates.writeCertificateAuthority(to: "\(directory)/ca.pem")
        try certificates.writeServerIdentity(certificateTo: "\(directory)/server.pem", keyTo: "\(directory)/key.pem")
        let port = try freeLoopbackPort()
        let server = try ChildProcess.start(
            Nghttpd.path,
            [
                "--echo-upload", "-a", "127.0.0.1", "-m", "20", "-w", "14", "-c", "256", "-d", directory,
                String(port), "\(directory)/key.pem", "\(directory)/server.pem",
            ],
            environment: [:], output: .null)
        defer {
            server.send(SIGKILL)
            _ = server.waitUntilExit()
        }

        try await withDeadline(.seconds(60)) {
            // nghttpd is starting: it says nothing when it listens.
            try await eventually {
                guard let probe = try? await RawTCPConnection.connect(port: port) else { return false }
                await probe.close()
                return true
            }
            let configuration = APNsClient.Configuration(
                environment: .custom(host: "127.0.0.1", port: port, channelManagementPort: port, caFile: "\(directory)/ca.pem"),
                signingKey: TestSigningKey().signingKey, connectionsPerHost: 1...1,
                requestTimeout: .seconds(30))
            let sizes = [0, 17, 1_000, 16_383, 16_384, 40_000, 70_000]
            try await withAPNsClient(configuration: configuration) { client in
                try await withThrowingTaskGroup(of: Void.self) { group in
                    for index in 0..<140 {
                        group.addTask {
                            let body = (0..<sizes[index % sizes.count]).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ index) }
                            let request = APNsRequest(
                                service: .push, method: .post, path: "/3/device/\(index)",
                                headers: [
                                    .init("apns-push-type", "liveactivity"),
                                    .init("x-request", "request \(index % 9)"),
                                    .init("apns-id", UUID().uuidString.lowercased(), indexable: false),
                                ],
                                body: body.isEmpty ? nil : body)
                            let answer = try await client.execute(request)
                            #expect(answer.status == 200, "request \(index)")
                            #expect(answer.body.map { Array($0.readableBytesView) } ?? [] == body, "request \(index)")
                        }
                    }
                    try await group.waitForAll()
                }
            }
        }
    }
}
