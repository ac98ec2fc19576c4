import ArgumentParser
import Crypto
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore

extension Bench {
    struct Outbox: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The outbox's own cost of a fan-out, without the network: accept, claim and record, in CPU µs per push.",
            discussion: """
                Registers --activities update tokens under one key in a fresh SQLite store, then, --rounds times: accepts
                one update through the service (its pushes are queued in the accepting transaction), claims every push
                in batches of the dispatcher's size, and records each as sent in batches of half that. Reports this
                process's CPU time and the wall time per push for each step, as the mean of the rounds. `bench server`
                measures the whole system; this isolates the part the store decides.
                """)

        @Option(help: "Activities under the fanned-out key.") var activities: Int = 100_000
        @Option(help: "Fan-outs measured (each after the last one is recorded).") var rounds: Int = 3

        func validate() throws {
            guard activities > 0, rounds > 0 else { throw ValidationError("activities and rounds must be positive") }
        }

        func run() async throws {
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("liverelay-bench-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let store = try SQLiteStore(path: directory.appendingPathComponent("liverelay.sqlite").path)
            try await store.migrate()
            let seeding = ContinuousClock.now
            let registeredAt = Date()
            for index in 0..<activities {
                try await store.saveActivityToken(
                    ActivityTokenRecord(
                        bundleID: BenchFixture.bundle.value, key: "match", deviceID: "fan-\(index)", token: BenchFixture.token(index),
                        frequentPushesEnabled: false, environment: .sandbox, registeredAt: registeredAt),
                    attributesType: "ScoreAttributes")
            }
            print("registered \(activities) tokens under \"match\" in \(String(format: "%.1f", (ContinuousClock.now - seeding).seconds)) s")

            let relay = RelayService(store: store, configuration: RelayConfiguration(), wire: RelayWire(), apns: nil)
            _ = try await relay.registerApp(AppRegistration(
                bundleID: BenchFixture.bundle, teamID: BenchFixture.teamID, keyID: BenchFixture.keyID,
                signingKey: P256.Signing.PrivateKey().pemRepresentation))
            let policy = relay.configuration.dispatch
            var steps: [String: [Measured]] = [:]
            for round in 1...rounds {
                let request = ChangeRequest(
                    event: .update, contentState: .object([("home", .integer(round)), ("away", .integer(1))]), priority: .fixed(10))
                steps["accept", default: []].append(try await measure {
                    _ = try await relay.change(app: BenchFixture.bundle.value, key: "match", request)
                })
                var claimed: [DeliveryRecord] = []
                steps["claim", default: []].append(try await measure {
                    while true {
                        let now = relay.currentDate
                        let batch = try await store.claimDeliveries(dueBy: now, limit: policy.batchSize, leaseUntil: now + policy.lease)
                        if batch.isEmpty { break }
                        claimed += batch
                    }
                })
                guard claimed.count == activities else { throw ValidationError("claimed \(claimed.count) pushes, not \(activities)") }
                // The answers are made first: Foundation reads /dev/urandom for every UUID.
                let answers = claimed.map { ($0.id, DeliveryOutcome.sent(status: 200, apnsID: UUID().uuidString.lowercased())) }
                steps["record", default: []].append(try await measure {
                    for start in stride(from: 0, to: answers.count, by: policy.batchSize / 2) {
                        try await store.recordOutcomes(Array(answers[start..<min(answers.count, start + policy.batchSize / 2)]), at: relay.currentDate)
                    }
                })
            }
            print("")
            print("per push, mean of \(rounds) fan-outs to \(activities) activities:")
            var total = Measured(cpu: 0, wall: 0)
            for step in ["accept", "claim", "record"] {
                let runs = steps[step] ?? []
                let mean = Measured(cpu: runs.map(\.cpu).reduce(0, +) / Double(runs.count), wall: runs.map(\.wall).reduce(0, +) / Double(runs.count))
                total.cpu += mean.cpu
                total.wall += mean.wall
                print("  \(step.padding(toLength: 7, withPad: " ", startingAt: 0)) \(format(mean, activities))")
            }
            print("  total   \(format(total, activities))")
        }

        struct Measured {
            var cpu: Double
            var wall: Double
        }

        private func measure(_ body: () async throws -> Void) async throws -> Measured {
            let before = resourceUsage()
            let start = ContinuousClock.now
            try await body()
            let after = resourceUsage()
            return Measured(cpu: after.user + after.system - before.user - before.system, wall: (ContinuousClock.now - start).seconds)
        }

        private func format(_ measured: Measured, _ pushes: Int) -> String {
            String(format: "%6.1f µs CPU, %6.1f µs wall", measured.cpu * 1e6 / Double(pushes), measured.wall * 1e6 / Double(pushes))
        }
    }
}
