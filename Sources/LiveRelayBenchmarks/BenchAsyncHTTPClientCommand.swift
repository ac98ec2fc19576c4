import APNs
import APNsEmulator
import ArgumentParser
import AsyncHTTPClient
import Crypto
import Foundation
import LiveActivityKit
import NIOCore
import NIOHTTP1
import NIOSSL

extension Bench {
    /// The provider clients people use are built on AsyncHTTPClient: the emulator must serve them
    /// under load without losing a request.
    struct AsyncHTTPClientLoad: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "async-http-client",
            abstract: "Send pushes with AsyncHTTPClient to the emulator (full validation, another process) and count those lost.",
            discussion: """
                One HTTPClient, HTTP/2 over TLS with the emulator's CA, --in-flight POSTs at
                once to /3/device/<token> with the APNs headers and a provider token, as
                provider libraries built on it send. Reports pushes/s and every request that
                did not get its 200, by error; target 0. The emulator logs each connection it
                ends, with its reason.

                With --reset-every N, the emulator answers after \(Self.resetLatency) ms and every
                Nth push is given up after \(Self.resetDeadline) ms, as a library
                with a short deadline gives up: AsyncHTTPClient resets its stream
                (RST_STREAM CANCEL). Those are counted apart; the other pushes must all be
                answered 200 on connections that stay up.
                """)

        /// The emulator's latency and the client's deadline in the reset mode: the request is
        /// sent well before its deadline, and its answer comes well after.
        static let resetLatency = 20
        static let resetDeadline = 5

        @Option(help: "Pushes to send.") var pushes: Int = 8_000
        @Option(help: "Pushes in flight at once.") var inFlight: Int = 100
        @Option(help: "Give up every Nth push before its answer, resetting its stream (0: none).") var resetEvery: Int = 0

        func validate() throws {
            guard pushes > 0, inFlight > 0 else { throw ValidationError("pushes and in-flight must be positive") }
            guard resetEvery >= 0 else { throw ValidationError("reset-every must be 0 or more") }
        }

        func run() async throws {
            let directory = try Bench.scratchFolder()
            defer { try? FileManager.default.removeItem(at: directory) }
            let caFile = directory.appendingPathComponent("ca.pem").path
            let privateKey = P256.Signing.PrivateKey()
            let keyFile = directory.appendingPathComponent("key.p8").path
            try privateKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
            let endpoint = try EndpointProcess.start(caFile: caFile, arguments: ["--emulator-key-file", keyFile])
            defer { endpoint.stop() }
            if resetEvery > 0 { try endpoint.answer(after: try APNsLatency(parsing: "\(Self.resetLatency)")) }
            print("emulator (full validation): 127.0.0.1:\(endpoint.port), pid \(endpoint.pid); \(pushes) pushes, \(inFlight) in flight")

            var tls = TLSConfiguration.makeClientConfiguration()
            tls.trustRoots = .file(caFile)
            var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
            configuration.httpVersion = .automatic
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            let signingKey = try APNsSigningKey(privateKey: privateKey, keyID: BenchFixture.keyID, teamID: BenchFixture.teamID)
            let providerToken = signingKey.makeProviderToken(issuedAt: Date())
            let request = try BenchFixture.request()
            let body = request.body ?? []
            let url = "https://127.0.0.1:\(endpoint.port)/3/device/\(BenchFixture.token.hex)"
            let pushes = self.pushes
            let inFlight = self.inFlight
            let resetEvery = self.resetEvery
            let start = ContinuousClock.now
            var failures: [String: Int]
            do {
                failures = try await withThrowingTaskGroup(of: [String: Int].self) { workers in
                    for worker in 0..<inFlight {
                        workers.addTask {
                            var failed: [String: Int] = [:]
                            for index in stride(from: worker, to: pushes, by: inFlight) {
                                let givenUp = resetEvery > 0 && index % resetEvery == 0
                                var push = HTTPClientRequest(url: url)
                                push.method = .POST
                                push.headers.add(name: "authorization", value: "bearer \(providerToken)")
                                push.headers.add(name: "apns-push-type", value: "liveactivity")
                                push.headers.add(name: "apns-topic", value: "\(BenchFixture.bundle.value).push-type.liveactivity")
                                push.headers.add(name: "apns-priority", value: "10")
                                push.body = .bytes(body)
                                do {
                                    let response = try await client.execute(
                                        push, timeout: givenUp ? .milliseconds(Int64(Self.resetDeadline)) : .seconds(30))
                                    let answer = try await response.body.collect(upTo: 4096)
                                    if response.status != .ok { failed["\(response.status.code) \(String(buffer: answer))", default: 0] += 1 }
                                    if givenUp { failed[Self.answeredBeforeItsDeadline, default: 0] += 1 }
                                } catch let error as HTTPClientError where givenUp && error == .deadlineExceeded {
                                    failed[Self.givenUp, default: 0] += 1
                                } catch {
                                    failed["\(error)", default: 0] += 1
                                }
                            }
                            return failed
                        }
                    }
                    return try await workers.reduce(into: [:]) { all, some in all.merge(some, uniquingKeysWith: +) }
                }
            } catch {
                try await client.shutdown()
                throw error
            }
            let seconds = (ContinuousClock.now - start).seconds
            try await client.shutdown()
            let givenUp = failures.removeValue(forKey: Self.givenUp) ?? 0
            let early = failures.removeValue(forKey: Self.answeredBeforeItsDeadline) ?? 0
            let lost = failures.values.reduce(0, +)
            let sent = pushes - givenUp
            if resetEvery > 0 {
                print("given up before their answers (streams reset): \(givenUp); answered before their deadline anyway: \(early)")
            }
            print(
                "AsyncHTTPClient: \(sent - lost) of \(sent) pushes answered 200 in \(String(format: "%.2f", seconds)) s, \(Int(Double(pushes) / seconds)) pushes/s; the emulator accepted \(try endpoint.accepted())"
            )
            for (error, count) in failures.sorted(by: { $0.value > $1.value }) { print("  \(count) failed: \(error)") }
            print("failures: \(lost)  target 0")
        }

        private static let givenUp = "given up"
        private static let answeredBeforeItsDeadline = "answered before its deadline"
    }
}
