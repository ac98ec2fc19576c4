import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayTesting
import NIOHTTP1
import Testing

/// Wrong keys are counted, logged without the key, and an address that keeps trying them is
/// refused before each try costs a lookup, until its allowance refills.
@Suite(.timeLimit(.minutes(2)))
struct AuthenticationFailureTests {
    @Test func anAddressThatKeepsFailingIsRefusedForAWhileAndTheLogNamesItButNeverTheKey() async throws {
        let logs = CapturedLogs()
        try await withRelayHarness(logs: logs) { relay in
            #expect(try await relay.get("/v1/deliveries").status == 200)
            let wrong = (0..<25).map { "lr_server_wrong\($0)" }
            var statuses: [Int] = []
            for secret in wrong {
                let answer = try await relay.call(.GET, "/v1/deliveries", scope: nil, secret: secret)
                statuses.append(answer.status)
                if answer.status == 429 {
                    #expect(answer.json["error"]?["code"] == .string("too_many_failures"))
                    #expect(answer.header("retry-after") == "1")
                }
            }
            #expect(statuses == Array(repeating: 401, count: 20) + Array(repeating: 429, count: 5))
            let metrics = relay.relay.metrics
            #expect(metrics.value(.authenticationFailuresTotal, ["route": "api"]) == 20)
            #expect(metrics.value(.authenticationRefusedTotal, ["route": "api"]) == 5)
            // One line for the first failure; the rest wait for the next line, a minute on.
            let lines = logs.lines(containing: "authentication failed")
            #expect(lines.count == 1 && lines.first?.metadata["source"] == "127.0.0.1" && lines.first?.metadata["failures"] == "1")
            for line in logs.all {
                #expect(!wrong.contains { "\(line.message) \(line.metadata)".contains($0) }, "a key in the log: \(line)")
            }
            // A key seen live before still gets through from the refused address (a proxy's).
            #expect(try await relay.get("/v1/deliveries").status == 200)
            // The dashboard's sign-in shares the allowance.
            let browser = DashboardBrowser(relay)
            #expect(try await browser.signIn(key: "lr_admin_wrong").status == 429)

            // Its allowance refills at one a second: after a minute, failures are heard of again.
            try await relay.advance(by: 61)
            #expect(try await relay.call(.GET, "/v1/deliveries", scope: nil, secret: "lr_server_wrong").status == 401)
            #expect(try await relay.get("/v1/deliveries").status == 200)
            // The second line counts the failures since the first: 19 of the flood and this one.
            let later = logs.lines(containing: "authentication failed")
            #expect(later.count == 2 && later.last?.metadata["failures"] == "20")
            #expect(metrics.value(.authenticationRefusedTotal, ["route": "dashboard"]) == 1)
        }
    }
}
