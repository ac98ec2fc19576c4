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
                Registers --activities update tokens under one key in a fresh SQLite store,
                then, --rounds times: accepts one update through the service (its pushes are
                queued in the accepting transaction), claims every push in batches of the
                dispatcher's size, and records each as sent in batches of half that. Reports
                this process's CPU time and the wall time per push for each step, as the mean
                of the rounds. `bench server` measures the whole system; this isolates the part
                the store decides.
                With --database postgres://…, the store is that PostgreSQL database (empty, or
                seeded by an earlier run with the same count and holding no push still to
                send), and the CPU time of PostgreSQL's processes on this machine is reported
                beside this process's: what the database does for each push, in the foreground
                (the vacuum of the row versions each step leaves is not counted unless it runs
                meanwhile).
                """)

        @Option(help: "Activities under the fanned-out key.") var activities: Int = 100_000
        @Option(help: "Fan-outs measured (each after the last one is recorded).") var rounds: Int = 3
        @Option(help: ArgumentHelp("A PostgreSQL database (default: SQLite in a temporary file).", valueName: "postgres://…"))
        var database: String?

        func validate() throws {
            guard activities > 0, rounds > 0 else { throw ValidationError("activities and rounds must be positive") }
            try Bench.requirePostgres(database, sqliteIs: "a temporary file")
        }

        func run() async throws {
            let steps = try await Bench.withStore(database) { store, location in
                try await seed(store, at: location)
                return try await measureRounds(store)
            }
            print("")
            print("per push, mean of \(rounds) fan-outs to \(activities) activities:")
            var total = Measured()
            for (name, runs) in steps {
                let mean = runs.reduce(Measured(), +) / Double(runs.count)
                total = total + mean
                print("  \(name.padding(toLength: 7, withPad: " ", startingAt: 0)) \(format(mean, activities))")
            }
            print("  total   \(format(total, activities))")
        }

        /// Each round's accept, claim and record, measured.
        private func measureRounds(_ store: any RelayStore) async throws -> [(name: String, runs: [Measured])] {
            let relay = RelayService(store: store, configuration: RelayConfiguration(), apns: nil, masterKey: .generate())
            _ = try await relay.registerApp(
                AppRegistration(
                    bundleID: BenchFixture.bundle, teamID: BenchFixture.teamID, keyID: BenchFixture.keyID,
                    signingKey: P256.Signing.PrivateKey().pemRepresentation))
            let policy = relay.configuration.dispatch
            var accept: [Measured] = []
            var claim: [Measured] = []
            var record: [Measured] = []
            for round in 1...rounds {
                let request = ChangeRequest(
                    event: .update, contentState: .object([("home", .integer(round)), ("away", .integer(1))]), priority: .fixed(.immediate))
                accept.append(
                    try await measure {
                        _ = try await relay.change(app: BenchFixture.bundle.value, key: "match", request)
                    })
                var claimed: [DeliveryRecord] = []
                claim.append(
                    try await measure {
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
                record.append(
                    try await measure {
                        for start in stride(from: 0, to: answers.count, by: policy.batchSize / 2) {
                            try await store.recordOutcomes(
                                Array(answers[start..<min(answers.count, start + policy.batchSize / 2)]), at: relay.currentDate)
                        }
                    })
            }
            return [("accept", accept), ("claim", claim), ("record", record)]
        }

        /// Registers the tokens under "match", unless an earlier run did: data with another count, or
        /// with pushes still to send (they would be claimed with the fan-out's), is refused rather than measured.
        private func seed(_ store: any RelayStore, at location: StoreLocation) async throws {
            let counts = try await store.counts()
            if counts.liveActivityTokens != 0 || counts.pushToStartTokens != 0 {
                guard (counts.liveActivityTokens, counts.pushToStartTokens) == (activities, 0) else {
                    throw ValidationError(
                        "\(location) holds \(counts.liveActivityTokens) live activity and \(counts.pushToStartTokens) push-to-start tokens, not \(activities) and 0: use another --database"
                    )
                }
                guard try await store.nextDueDate() == nil else {
                    throw ValidationError("\(location) holds pushes still to send: use another --database")
                }
                print("reusing the \(activities) tokens under \"match\" in \(location)")
                return
            }
            let seeding = ContinuousClock.now
            try await BenchFixture.register(
                store, activityTokens: BenchFixture.fanOutTokens(activities, registeredAt: Date()), attributesType: "ScoreAttributes")
            print("registered \(activities) tokens under \"match\" in \(String(format: "%.1f", (ContinuousClock.now - seeding).seconds)) s")
        }

        /// CPU seconds of this process and, when the store is PostgreSQL, of its processes here; wall seconds.
        struct Measured {
            var cpu = 0.0
            var database = 0.0
            var wall = 0.0

            static func + (a: Measured, b: Measured) -> Measured {
                Measured(cpu: a.cpu + b.cpu, database: a.database + b.database, wall: a.wall + b.wall)
            }
            static func / (a: Measured, n: Double) -> Measured { Measured(cpu: a.cpu / n, database: a.database / n, wall: a.wall / n) }
        }

        private func measure(_ body: () async throws -> Void) async throws -> Measured {
            let onPostgres = database != nil
            let before = (resourceUsage(), onPostgres ? postgresCPUSeconds() : 0)
            let start = ContinuousClock.now
            try await body()
            let after = (resourceUsage(), onPostgres ? postgresCPUSeconds() : 0)
            return Measured(
                cpu: after.0.user + after.0.system - before.0.user - before.0.system, database: after.1 - before.1,
                wall: (ContinuousClock.now - start).seconds)
        }

        private func format(_ measured: Measured, _ pushes: Int) -> String {
            let perPush = { (seconds: Double) in seconds * 1e6 / Double(pushes) }
            return String(format: "%6.1f µs CPU", perPush(measured.cpu))
                + (database == nil ? "" : String(format: ", PostgreSQL %6.1f µs CPU", perPush(measured.database)))
                + String(format: ", %6.1f µs wall", perPush(measured.wall))
        }
    }
}
