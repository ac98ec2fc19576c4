import APNs
import APNsEmulator
import ArgumentParser
import AsyncHTTPClient
import Crypto
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import NIOCore
import NIOHTTP1
import Synchronization
import WebPages

extension Bench {
    struct Server: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Load `liverelay serve` (a child process) against the emulator (another): fan-out, latency, memory.",
            discussion: """
                Seeds a fresh data directory with --tokens registered tokens (--activities
                update tokens under one key, --keys keys of one token each, the rest
                push-to-start tokens), starts the emulator with full validation and
                `liverelay serve` on that data, then measures:
                  1. one update fanned out to every activity under the key, until APNs has
                     accepted every push, as pushes/s and as a fraction of `bench client` (our
                     APNs client alone, same emulator, same count), measured just before and
                     just after; --fan-outs times, the median fraction being the result (single
                     runs vary a lot on a shared machine); target ≥ 75% on SQLite with the
                     server's CPU ≤ 30 µs a push, none on PostgreSQL (every push keeps its
                     own row);
                  2. single-key updates sent open-loop at --rate requests/s, latency from the
                     scheduled send time to the answer, and the CPU a request; target p99
                     ≤ 5 ms and ≤ 400 µs on SQLite, ≤ 15 ms and ≤ 1 ms for the servers and
                     PostgreSQL together on PostgreSQL;
                  3. a page of 1,000 pushes, 21 times, beside GET /v1/health and the store's
                     own read of the page from this process; target median ≤ 5 ms on SQLite,
                     ≤ 2× the store's read on PostgreSQL;
                  4. each server's resident memory with the tokens registered, after the rest;
                     target ≤ 150 MB.
                With --webhooks, then (on a receiver in this process, which checks every
                signature): each fan-out again without and with a webhook endpoint, the
                second's time over the first's (target ≤ 1.05); and the --keys keys' devices
                reporting their activity dismissed, two events each, posted to the endpoint:
                events a second from the first report to the last post (target ≥ 2,000).
                With --distance-share and --apns-latency, each fan-out runs first with the
                emulator answering at once and then after the latency, and its share is the
                second's pushes/s over the first's (target ≥ 90%: the latency hidden by
                concurrency); `bench client` is not run.
                With --database postgres://…, the servers share that PostgreSQL database
                (empty, or seeded by an earlier run with the same counts) and --instances of
                them run: the fan-out is accepted by the first and sent by all, the single-key
                updates go to each in turn.
                """)

        @Option(help: "Activities under the fanned-out key.") var activities: Int = 100_000
        @Option(help: "Tokens registered in all.") var tokens: Int = 1_000_000
        @Option(help: "Keys for the latency run, one token each.") var keys: Int = 1_000
        @Option(help: "Updates per second in the latency run.") var rate: Int = 1_000
        @Option(help: "Seconds of the latency run (after one second of warm-up).") var seconds: Int = 10
        @Option(
            help: ArgumentHelp(
                "Write each request of the latency run, warm-up included, as a CSV line: when it was due (seconds from the start), its latency, how late it was sent, its status (0: no answer). Stalls show as runs of slow requests.",
                valueName: "file"))
        var latencyLog: String?
        @Option(help: "Pushes in flight for the `bench client` reference.") var inFlight: Int = 100
        @Option(help: "Fan-outs measured, each between two runs of the reference; the median share is the result (0: latency and memory only).")
        var fanOuts: Int = 3
        @Option(help: "Keep the seeded data here and reuse it on the next run with the same counts (default: a fresh temporary directory).")
        var dataDir: String?
        @Option(help: ArgumentHelp("A PostgreSQL database for the servers (default: SQLite in the data directory).", valueName: "postgres://…"))
        var database: String?
        @Option(help: "`serve` instances on the database (more than one needs PostgreSQL).") var instances: Int = 1
        @Option(help: "The emulator answers this many milliseconds late, as APNs at a distance: 100, or 40-120 drawn for each request.")
        var apnsLatency: String = "0"
        @Option(help: "`serve --max-in-flight` (default: serve's own).") var maxInFlight: Int?
        @Flag(help: "Measure each fan-out at 0 ms and then at --apns-latency, as a share of the first.")
        var distanceShare = false
        @Flag(
            help:
                "With --distance-share: then one more fan-out at --apns-latency, with GOAWAY, a dropped connection and a connection frozen for 5 s in its middle."
        )
        var badDay = false
        @Flag(help: "Then measure webhooks: fan-outs without and with an endpoint, and events posted a second.")
        var webhooks = false
        @Option(
            help: ArgumentHelp(
                "During the single-key run, a browser's tab open on this dashboard page (/dashboard: the overview), signed in with the admin key: it draws the page again at each change the page's stream announces.",
                valueName: "path"))
        var dashboardTab: String?

        func validate() throws {
            guard activities > 0, keys > 0, rate > 0, seconds > 0, inFlight > 0, fanOuts >= 0 else {
                throw ValidationError("activities, keys, rate, seconds and in-flight must be positive, fan-outs not negative")
            }
            guard tokens >= activities + keys else { throw ValidationError("--tokens must be at least --activities + --keys") }
            try Bench.requirePostgres(database, sqliteIs: "the data directory's own")
            guard (1...16).contains(instances) else { throw ValidationError("instances: must be 1 to 16, got \(instances)") }
            guard instances == 1 || database != nil else { throw ValidationError("instances: several need a shared --database postgres://…") }
            let latency = try APNsLatency.option(apnsLatency, "apns-latency")
            guard !distanceShare || !latency.isZero else { throw ValidationError("distance-share: needs an --apns-latency other than 0") }
            guard !badDay || (distanceShare && fanOuts > 0) else { throw ValidationError("bad-day: needs --distance-share and at least one fan-out") }
            if let dashboardTab, dashboardTab != "/dashboard", !dashboardTab.hasPrefix("/dashboard/") {
                throw ValidationError("dashboard-tab: a dashboard page's path (/dashboard, /dashboard/deliveries…), got \(dashboardTab)")
            }
            // Found out now rather than after the run.
            if let latencyLog, !FileManager.default.createFile(atPath: latencyLog, contents: nil) {
                throw ValidationError("latency-log: cannot write \(latencyLog)")
            }
        }

        private var isShared: Bool { database != nil }

        func run() async throws {
            let directory = try Bench.scratchFolder()
            defer { try? FileManager.default.removeItem(at: directory) }
            let dataDir = self.dataDir ?? directory.appendingPathComponent("data").path
            try FileManager.default.createDirectory(atPath: dataDir, withIntermediateDirectories: true)
            let privateKey = P256.Signing.PrivateKey()
            let keyFile = directory.appendingPathComponent("key.p8").path
            try privateKey.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
            let caFile = directory.appendingPathComponent("ca.pem").path
            let latency = try APNsLatency.option(apnsLatency, "apns-latency")
            let endpoint = try EndpointProcess.start(
                caFile: caFile, arguments: ["--emulator-key-file", keyFile, "--tokens", String(activities + keys), "--latency", latency.text])
            defer { endpoint.stop() }
            say("emulator (full validation): 127.0.0.1:\(endpoint.port), pid \(endpoint.pid), APNs latency \(latency)")

            let location = database.map(StoreLocation.init) ?? .sqlite(path: DataDirectory(dataDir).database)
            let store = try await location.open()
            try await store.running {
                try await store.migrate()
                let seeding = ContinuousClock.now
                // Kept data is as old as its seeding: activities within an hour of the system's
                // 8-hour end, or past it, start again, or the run would measure refusals.
                let restarted = try await store.restartActivities(app: BenchFixture.bundle.value, startedBefore: Date() - 7 * 3600, at: Date())
                if try await isSeeded(store, at: location) {
                    say("reusing the data seeded in \(location)" + (restarted > 0 ? ", its \(restarted) activities started again" : ""))
                } else {
                    try await seed(store)
                    say(
                        "seeded \(tokens) tokens in \(location) in \(String(format: "%.1f", (ContinuousClock.now - seeding).seconds)) s: \(activities) under key \"match\", \(keys) keys of one, \(tokens - activities - keys) push-to-start"
                    )
                }
                let apiKeys = (
                    admin: try await RelayService.createAPIKey(name: "bench admin", scope: .admin, in: store, at: Date()).secret,
                    server: try await RelayService.createAPIKey(name: "bench server", scope: .server, in: store, at: Date()).secret
                )

                // The reference: our client alone, same emulator, same number of pushes.
                let signingKey = try APNsSigningKey(privateKey: privateKey, keyID: BenchFixture.keyID, teamID: BenchFixture.teamID)
                let clientConfiguration = APNsClient.Configuration(
                    environment: .custom(host: "127.0.0.1", port: endpoint.port, channelManagementPort: endpoint.port, caFile: caFile),
                    signingKey: signingKey, requestTimeout: .seconds(30))
                let request = try BenchFixture.request()
                func reference() async throws -> Double {
                    try await withAPNsClient(configuration: clientConfiguration) { client in
                        _ = try await sendPushes(client: client, count: 5_000, inFlight: inFlight, request: request)
                        return try await sendPushes(client: client, count: activities, inFlight: inFlight, request: request).rate
                    }
                }
                var firstReference = 0.0
                if !distanceShare {
                    firstReference = try await reference()
                    say("bench client (before):  \(Int(firstReference)) pushes/s")
                }

                // The instances' master key: the data directory's own serves SQLite; PostgreSQL
                // requires one given (kept there too, so a reused database opens again).
                let masterKeyFile = DataDirectory(dataDir).masterKey
                if database != nil, !FileManager.default.fileExists(atPath: masterKeyFile) {
                    try MasterKey.generate().base64.write(toFile: masterKeyFile, atomically: true, encoding: .utf8)
                }
                var servers: [ServerProcess] = []
                defer { for server in servers { server.stop() } }
                for index in 0..<instances {
                    // Each instance has a data directory of its own; they share the database.
                    let instanceDir = index == 0 ? dataDir : dataDir + "/instance-\(index + 1)"
                    try FileManager.default.createDirectory(atPath: instanceDir, withIntermediateDirectories: true)
                    let server = try await ServerProcess.start(
                        [
                            "serve", "--data-dir", instanceDir, "--http-port", "0", "--key-file", keyFile, "--key-id", BenchFixture.keyID,
                            "--team-id", BenchFixture.teamID, "--bundle-id", BenchFixture.bundle.value, "--environment", "custom",
                            "--host", "127.0.0.1", "--port", String(endpoint.port), "--management-port", String(endpoint.port), "--ca-file", caFile,
                        ] + (database.map { ["--database", $0, "--master-key-file", masterKeyFile] } ?? [])
                            + (maxInFlight.map { ["--max-in-flight", String($0)] } ?? [])
                            + (webhooks ? ["--webhook-addresses", "loopback"] : []))
                    servers.append(server)
                    say("server \(index + 1): \(server.baseURL), pid \(server.pid); resident memory at start \(server.memory().current) MB")
                }
                let idle = servers.map { $0.memory() }

                let http = HTTPClient(
                    eventLoopGroupProvider: .singleton,
                    configuration: HTTPClient.Configuration(
                        connectionPool: .init(idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: 64)))
                do {
                    let apis = servers.map { BenchAPI(http: http, baseURL: $0.baseURL, keys: apiKeys) }
                    try await measure(
                        apis: apis, servers: servers, outbox: store, endpoint: endpoint, idle: idle, reference: reference,
                        firstReference: firstReference)
                } catch {
                    try? await http.shutdown()
                    throw error
                }
                try await http.shutdown()
            }
        }

        private func measure(
            apis: [BenchAPI], servers: [ServerProcess], outbox: any RelayStore, endpoint: EndpointProcess, idle: [(current: Int, peak: Int)],
            reference: () async throws -> Double, firstReference: Double
        ) async throws {
            // PostgreSQL's fan-out share has no target: every push keeps its own row in the history
            // (ARCHITECTURE.md, "Decisions"). Its page of 1,000 is held to the database's own read.
            let targets =
                isShared
                ? (
                    share: "none (retired on PostgreSQL)", push: "", p99: "≤ 15 ms", request: "≤ 1,000 µs, the servers and PostgreSQL together",
                    page: "≤ 2× the store's read"
                )
                : (share: "≥ 75%", push: "  target server ≤ 30 µs", p99: "≤ 5 ms", request: "≤ 400 µs", page: "≤ 5 ms")
            let engine = isShared ? "PostgreSQL, \(instances) instance\(instances == 1 ? "" : "s")" : "SQLite"

            // 1. Fan-outs, each between two runs of the reference (or each at 0 ms, then at the
            // distance); the median share is the result.
            var before = firstReference
            var shares: [Double] = []
            let distance = try APNsLatency.option(apnsLatency, "apns-latency")
            var farSeconds: [Double] = []
            /// CPU seconds of every `serve` instance.
            let serverSeconds = { servers.map { $0.cpuSeconds() }.reduce(0, +) }
            /// The fan-out, and the CPU µs a push of the servers (all instances), the emulator, and
            /// PostgreSQL's processes on this machine (0 on SQLite).
            func cpuPerPush(_ body: () async throws -> FanOut) async throws -> (FanOut, server: Double, emulator: Double, database: Double) {
                let before = (serverSeconds(), processCPUSeconds(endpoint.pid), postgresCPUSeconds())
                let fanOut = try await body()
                let per = { (seconds: Double) in seconds * 1e6 / Double(activities) }
                return (
                    fanOut, per(serverSeconds() - before.0), per(processCPUSeconds(endpoint.pid) - before.1),
                    per(postgresCPUSeconds() - before.2)
                )
            }
            for round in stride(from: 1, through: distanceShare ? fanOuts : 0, by: 1) {
                try endpoint.answer(after: .none)
                let (near, nearServer, nearEmulator, _) = try await cpuPerPush {
                    try await measureFanOut(api: apis[0], outbox: outbox, endpoint: endpoint, round: 2 * round - 1)
                }
                try endpoint.answer(after: distance)
                let (far, farServer, farEmulator, _) = try await cpuPerPush {
                    try await measureFanOut(api: apis[0], outbox: outbox, endpoint: endpoint, round: 2 * round)
                }
                let share = far.rate / near.rate
                shares.append(share)
                farSeconds.append(far.settledSeconds)
                let sending = try await apis[0].sending()
                say(
                    "fan-out \(round) of \(fanOuts), one update to \(activities) activities: at 0 ms \(String(format: "%.2f", near.seconds)) s, \(Int(near.rate)) pushes/s; at \(distance) \(String(format: "%.2f", far.seconds)) s, \(Int(far.rate)) pushes/s; share \(String(format: "%.0f", 100 * share))%"
                )
                say(
                    "  then: \(sending); CPU µs a push, server and emulator: at 0 ms \(Int(nearServer)) and \(Int(nearEmulator)), at \(distance) \(Int(farServer)) and \(Int(farEmulator)); accepted twice: \(near.acceptedTwice) and \(far.acceptedTwice)"
                )
            }
            if badDay {
                // GOAWAY at 30% of the fan-out, a dropped connection at 50%, a freeze at 70%.
                let undisturbed = farSeconds.sorted().percentile(0.5)
                let faults: [(Double, BenchFault)] = [(0.3, .goaway), (0.5, .reset), (0.7, .freeze)]
                let (bad, server, _, _) = try await cpuPerPush {
                    try await measureFanOut(api: apis[0], outbox: outbox, endpoint: endpoint, round: 2 * fanOuts + 1, faults: faults)
                }
                say(
                    "bad day at \(distance), one update to \(activities) activities with GOAWAY at 30%, a dropped connection at 50%, a connection frozen 5 s at 70%: every push recorded sent after \(String(format: "%.2f", bad.settledSeconds)) s, \(String(format: "%.2f", bad.settledSeconds / undisturbed))× the undisturbed median \(String(format: "%.2f", undisturbed)) s  target ≤ 2×"
                )
                say(
                    "  every push recorded sent once; APNs accepted \(bad.acceptedTwice) of them twice (sent again after their connection dropped or was taken for dead with them unanswered); faults not played: \(try endpoint.faultsInForce()); server CPU \(Int(server)) µs a push"
                )
                say(
                    "  faults played at \(bad.faultsPlayedAt.map { String(format: "%.2f s", $0) }.joined(separator: ", ")); APNs had accepted as many pushes as the fan-out has at \(String(format: "%.2f", bad.seconds)) s"
                )
            }
            if distanceShare, fanOuts > 0 {
                say("")
                say(
                    "fan-out at \(distance) vs at 0 ms, \(engine): median \(String(format: "%.0f", 100 * shares.sorted().percentile(0.5)))% of \(fanOuts) (\(shares.map { String(format: "%.0f%%", 100 * $0) }.joined(separator: ", ")))  target ≥ 90%"
                )
            }
            for round in stride(from: 1, through: distanceShare ? 0 : fanOuts, by: 1) {
                let (fanOut, serverCPU, emulatorCPU, databaseCPU) = try await cpuPerPush {
                    try await measureFanOut(api: apis[0], outbox: outbox, endpoint: endpoint, round: round)
                }
                let after = try await reference()
                let share = fanOut.rate / ((before + after) / 2)
                shares.append(share)
                say(
                    "fan-out \(round) of \(fanOuts), one update to \(activities) activities: \(String(format: "%.2f", fanOut.seconds)) s, \(Int(fanOut.rate)) pushes/s (accepted in \(String(format: "%.0f", fanOut.acceptSeconds * 1000)) ms); bench client after: \(Int(after)) pushes/s; share \(String(format: "%.0f", 100 * share))%"
                )
                say("  then: \(try await apis[0].sending()); server 1 resident memory \(servers[0].memory().current) MB")
                say(
                    "  CPU µs a push: server\(servers.count > 1 ? "s" : "") \(Int(serverCPU)), emulator \(Int(emulatorCPU))"
                        + (isShared ? ", PostgreSQL \(Int(databaseCPU)) (its processes on this machine)" : "") + targets.push)
                before = after
            }
            if !distanceShare, fanOuts > 0 {
                say("")
                say(
                    "fan-out vs bench client (the mean of the runs just before and after), \(engine): median \(String(format: "%.0f", 100 * shares.sorted().percentile(0.5)))% of \(fanOuts) (\(shares.map { String(format: "%.0f%%", 100 * $0) }.joined(separator: ", ")))  target \(targets.share)"
                )
            }

            // 2. Latency of single-key updates at a fixed rate.
            func statementsRun() async throws -> Int {
                var total = 0
                for api in apis { total += try await api.statementsRun() }
                return total
            }
            let statementsBefore = try await statementsRun()
            let cpuBefore = (serverSeconds(), postgresCPUSeconds())
            let upkeepBefore = try await (outbox as? PostgresStore)?.upkeep()
            let tab = dashboardTab.map { page in
                let tab = BenchDashboardTab(baseURL: apis[0].baseURL, page: page)
                return Task { try await tab.follow(signingInWith: apis[0].keys.admin) }
            }
            let latency = try await measureLatency(apis: apis, seconds: seconds, log: latencyLog)
            tab?.cancel()
            let draws = try await tab?.value
            let upkeepAfter = try await (outbox as? PostgresStore)?.upkeep()
            // Its one second of warm-up included, as the CPU was spent on it too.
            let requests = Double(rate * (seconds + 1))
            let serverCPU = (serverSeconds() - cpuBefore.0) * 1e6 / requests
            let databaseCPU = (postgresCPUSeconds() - cpuBefore.1) * 1e6 / requests
            // The push each update makes is recorded sent by the same instances meanwhile.
            let statements = Double(try await statementsRun() - statementsBefore) / requests
            // The reference: what any request costs these servers before a route takes it, sent
            // the same way at the same rate (a path no route has: 404).
            let noRouteSeconds = min(seconds, 5)
            let noRouteBefore = serverSeconds()
            let noRoute = try await measureLatency(apis: apis, seconds: noRouteSeconds) { "/v1/no-such-route/order-\($0)" }
            let noRouteCPU = (serverSeconds() - noRouteBefore) * 1e6 / Double(rate * (noRouteSeconds + 1))
            say("")
            say(
                "single-key updates at \(rate)/s for \(seconds) s (\(latency.count) requests, open loop, \(engine)): p50 \(String(format: "%.2f", latency.p50 * 1000)) ms, p99 \(String(format: "%.2f", latency.p99 * 1000)) ms, max \(String(format: "%.1f", latency.max * 1000)) ms  target p99 \(targets.p99)"
            )
            say(
                "  achieved \(Int(latency.achievedRate)) requests/s; answers other than 200: \(latency.failureSummary); of which the sender's own lag: p50 \(String(format: "%.2f", latency.senderLagP50 * 1000)) ms, p99 \(String(format: "%.2f", latency.senderLagP99 * 1000)) ms"
            )
            say(
                "  CPU µs a request: server\(servers.count > 1 ? "s" : "") \(Int(serverCPU))"
                    + (isShared ? ", PostgreSQL \(Int(databaseCPU)) (its processes on this machine)" : "")
                    + "; statements a request, its push's included: \(String(format: "%.1f", statements))  target \(targets.request)")
            if let dashboardTab, let draws {
                let median = draws.map(\.seconds).sorted().percentile(0.5)
                say(
                    "  meanwhile a dashboard tab on \(dashboardTab): \(draws.count) draws of the page, median \(String(format: "%.1f", median * 1000)) ms"
                        + " (each change announced \(LivePage.drawCostFactor)× the last draw after the one before)")
            }
            say(
                "  reference, the same load to a path no route takes (answers other than 200: \(noRoute.failureSummary)): server CPU \(Int(noRouteCPU)) µs a request, p99 \(String(format: "%.2f", noRoute.p99 * 1000)) ms; "
                    + "the update \(String(format: "%.1f", serverCPU / noRouteCPU))× that")
            if let upkeepBefore, let upkeepAfter {
                say(
                    "  PostgreSQL's upkeep meanwhile: \(upkeepAfter.checkpoints - upkeepBefore.checkpoints) checkpoint(s) begun, "
                        + "\(String(format: "%.1f", upkeepAfter.checkpointSeconds - upkeepBefore.checkpointSeconds)) s of writing and syncing by checkpoints that ended, "
                        + "\(upkeepAfter.autovacuums - upkeepBefore.autovacuums) table(s) autovacuumed or autoanalyzed")
            }

            // 3. A listing, one request at a time, against the cheapest answer in the same run.
            let listing = try await measureListing(api: apis[0], store: outbox)
            say("")
            say(
                "a page of 1,000 pushes (GET /v1/deliveries?limit=1000), \(listing.rounds) times, \(engine): median \(String(format: "%.2f", listing.page * 1000)) ms, "
                    + "\(String(format: "%.1f", listing.page / listing.read))× the store's own read of it from this process (\(String(format: "%.2f", listing.read * 1000)) ms); "
                    + "GET /v1/health \(String(format: "%.2f", listing.health * 1000)) ms  target median \(targets.page)"
            )

            if webhooks { try await measureWebhooks(api: apis[0], server: servers[0], outbox: outbox, endpoint: endpoint, engine: engine) }

            // 4. Memory.
            say("")
            for (index, server) in servers.enumerated() {
                let after = server.memory()
                say(
                    "server \(index + 1) resident memory with \(tokens) registered tokens: \(after.current) MB now, \(after.peak) MB at peak (\(idle[index].current) MB at start)  target ≤ 150 MB"
                )
            }
        }

        // MARK: Webhooks

        /// Fan-outs without and with an endpoint, then events posted a second.
        private func measureWebhooks(api: BenchAPI, server: ServerProcess, outbox: any RelayStore, endpoint: EndpointProcess, engine: String)
            async throws
        {
            let receiver = try await BenchWebhookReceiver.start()
            defer { Task { await receiver.stop() } }
            func makeEndpoint() async throws -> String {
                let made = try await api.post(
                    "/v1/webhooks", key: api.keys.server,
                    body: .object([("url", .string("http://127.0.0.1:\(receiver.port)/hooks")), ("bundleID", .string(BenchFixture.bundle.value))]))
                guard made.status == 201, let id = made.json["id"]?.stringValue,
                    let secret = made.json["secret"]?.stringValue.flatMap(WebhookSecret.init)
                else { throw ValidationError("could not make a webhook endpoint: \(made.status) \(made.text)") }
                receiver.secret.withLock { $0 = secret }
                return id
            }
            say("")
            var ratios: [Double] = []
            // In turn without then with, and with then without: a machine that slows down or
            // speeds up during a pair weighs on both orders alike.
            for round in 1...max(1, fanOuts) {
                var seconds: (without: Double, with: Double) = (0, 0)
                for withEndpoint in round % 2 == 1 ? [false, true] : [true, false] {
                    let id = withEndpoint ? try await makeEndpoint() : nil
                    let fanOut = try await measureFanOut(
                        api: api, outbox: outbox, endpoint: endpoint, round: 100 + 2 * round + (withEndpoint ? 1 : 0))
                    if let id { _ = try await api.call(.DELETE, "/v1/webhooks/\(id)", key: api.keys.server) }
                    if withEndpoint { seconds.with = fanOut.seconds } else { seconds.without = fanOut.seconds }
                }
                ratios.append(seconds.with / seconds.without)
                say(
                    "fan-out with webhooks \(round): one update to \(activities) activities without an endpoint \(String(format: "%.2f", seconds.without)) s, with one \(String(format: "%.2f", seconds.with)) s: \(String(format: "%.3f", seconds.with / seconds.without))×"
                )
            }
            say(
                "fan-out with a webhook endpoint vs without, \(engine): median \(String(format: "%.3f", ratios.sorted().percentile(0.5)))× of \(ratios.count)  target ≤ 1.05×"
            )

            say("  server resident memory \(server.memory().current) MB")

            // Each device of the --keys keys reports its activity dismissed, two events a key,
            // while the endpoint is disabled; enabled, it is posted the backlog as fast as it goes.
            let id = try await makeEndpoint()
            _ = try await api.call(.PATCH, "/v1/webhooks/\(id)", key: api.keys.server, body: .object([("enabled", .bool(false))]))
            // Client keys enough that none goes past its request rate (500/s, bursts of 1,000).
            var clients: [String] = []
            for index in 0..<20 {
                let made = try await api.post(
                    "/v1/api-keys", key: api.keys.admin,
                    body: .object([
                        ("name", .string("bench client \(index)")), ("scope", .string("client")), ("bundleID", .string(BenchFixture.bundle.value)),
                    ]))
                guard made.status == 201, let client = made.json["secret"]?.stringValue else {
                    throw ValidationError("could not make a client key: \(made.status) \(made.text)")
                }
                clients.append(client)
            }
            let events = 2 * keys
            let clientKeys = clients
            let start = ContinuousClock.now
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<keys {
                    if index >= 64 { try await group.next() }
                    group.addTask {
                        let answer = try await api.post(
                            "/v1/activities/order-\(index)/ended", key: clientKeys[index % clientKeys.count],
                            body: .object([("deviceID", .string("phone-\(index)")), ("state", .string("dismissed")), ("cause", .string("person"))]))
                        guard answer.status == 200 else { throw ValidationError("a report was refused: \(answer.status) \(answer.text)") }
                    }
                }
                try await group.waitForAll()
            }
            let reported = (ContinuousClock.now - start).seconds
            say(
                "  \(events) events written by \(keys) reports in \(String(format: "%.2f", reported)) s; server resident memory \(server.memory().current) MB"
            )
            let posting = ContinuousClock.now
            let enabled = try await api.call(.PATCH, "/v1/webhooks/\(id)", key: api.keys.server, body: .object([("enabled", .bool(true))]))
            guard enabled.status == 200 else { throw ValidationError("could not enable the endpoint: \(enabled.status) \(enabled.text)") }
            let deadline = ContinuousClock.now + .seconds(300)
            while receiver.counts.withLock({ $0.verified + $0.refused }) < events, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            let counts = receiver.counts.withLock { $0 }
            let seconds = (counts.lastAt - posting).seconds
            say(
                "events posted to a webhook endpoint, \(engine): \(counts.verified) of \(events) verified in \(String(format: "%.2f", seconds)) s, \(Int(Double(counts.verified) / seconds)) events/s; refused \(counts.refused), repeated \(counts.repeated)  target ≥ 2,000 events/s"
            )
            say("  server resident memory \(server.memory().current) MB")
        }

        // MARK: Listing

        /// The median seconds of a page of 1,000 pushes, of `/v1/health` (the cheapest answer) and
        /// of the store's own read of the same rows from this process (what the database costs on
        /// this machine now, before the server adds its JSON and HTTP), in turn.
        private func measureListing(api: BenchAPI, store: any RelayStore) async throws -> (page: Double, health: Double, read: Double, rounds: Int) {
            let rounds = 21
            var page: [Double] = []
            var health: [Double] = []
            var read: [Double] = []
            func seconds(_ path: String) async throws -> Double {
                let start = ContinuousClock.now
                let answer = try await api.get(path, key: api.keys.server)
                guard answer.status == 200 else { throw ValidationError("GET \(path) answered \(answer.status): \(answer.text.prefix(200))") }
                return (ContinuousClock.now - start).seconds
            }
            for _ in 0..<rounds {
                page.append(try await seconds("/v1/deliveries?limit=1000"))
                health.append(try await seconds("/v1/health"))
                let start = ContinuousClock.now
                _ = try await store.deliveries(DeliveryQuery(limit: 1_000, includePayloads: false))
                read.append((ContinuousClock.now - start).seconds)
            }
            return (page.sorted().percentile(0.5), health.sorted().percentile(0.5), read.sorted().percentile(0.5), rounds)
        }

        // MARK: Seeding

        /// Whether the store holds the data of an earlier run with the same counts; data with other
        /// counts is refused rather than measured.
        private func isSeeded(_ store: any RelayStore, at location: StoreLocation) async throws -> Bool {
            let counts = try await store.counts()
            if (counts.pushToStartTokens, counts.liveActivityTokens) == (0, 0) { return false }
            let expected = (tokens - activities - keys, activities + keys)
            guard (counts.pushToStartTokens, counts.liveActivityTokens) == expected else {
                throw ValidationError(
                    "\(location) holds \(counts.pushToStartTokens) push-to-start and \(counts.liveActivityTokens) live activity tokens, not \(expected.0) and \(expected.1): use another --data-dir or --database"
                )
            }
            return true
        }

        /// Registers the tokens before the server starts: registering a million through HTTP would
        /// measure the seeding, not the server.
        private func seed(_ store: any RelayStore) async throws {
            let now = Date()
            let singles = (0..<keys).map { index in
                ActivityTokenRecord(
                    bundleID: BenchFixture.bundle.value, key: "order-\(index)", deviceID: "phone-\(index)",
                    token: BenchFixture.token(activities + index), frequentPushesEnabled: false, environment: .sandbox, registeredAt: now)
            }
            let idle = (0..<(tokens - activities - keys)).map { index in
                PushToStartTokenRecord(
                    bundleID: BenchFixture.bundle.value, deviceID: "idle-\(index)", attributesType: "DeliveryAttributes",
                    token: String(repeating: "0", count: 144) + BenchFixture.hex16(index),
                    frequentPushesEnabled: false, environment: .sandbox, updatedAt: now)
            }
            try await BenchFixture.register(
                store, activityTokens: BenchFixture.fanOutTokens(activities, registeredAt: now), attributesType: "ScoreAttributes")
            try await BenchFixture.register(store, activityTokens: singles, attributesType: "DeliveryAttributes", pushToStart: idle)
        }

        // MARK: Fan-out

        struct FanOut {
            var seconds: Double
            var acceptSeconds: Double
            var rate: Double
            /// Until every push was recorded sent (APNs judges a push as it comes, before its
            /// answer, which a fault may hold back or lose).
            var settledSeconds: Double
            /// Pushes APNs accepted beyond one each.
            var acceptedTwice: Int
            /// When each fault was played, from the start.
            var faultsPlayedAt: [Double] = []
        }

        /// One update to every activity under the key; `faults` are played once that share of the
        /// fan-out has been accepted.
        private func measureFanOut(
            api: BenchAPI, outbox: any RelayStore, endpoint: EndpointProcess, round: Int, faults: [(Double, BenchFault)] = []
        ) async throws -> FanOut {
            var faults = faults[...]
            var faultsPlayedAt: [Double] = []
            let sentBefore = try await outbox.deliveryCounts()[.sent] ?? 0
            let acceptedBefore = try endpoint.accepted()
            let start = ContinuousClock.now
            let answer = try await api.post(
                "/v1/activities/match/update", key: api.keys.server,
                body: .object([
                    ("contentState", .object([("home", .integer(round)), ("away", .integer(1)), ("minute", .integer(60 + round))])),
                    ("priority", .integer(10)),
                ]))
            guard answer.status == 200 else { throw ValidationError("the fan-out update was refused: \(answer.status) \(answer.text)") }
            let accepted = ContinuousClock.now - start
            // Done when APNs has accepted them all, as the endpoint counts: asking the database
            // took a quarter of a core from PostgreSQL, whose outbox index is full of the fan-out's
            // dead entries until it is vacuumed.
            while case let done = try endpoint.accepted() - acceptedBefore, done < activities {
                if let (share, fault) = faults.first, Double(done) >= share * Double(activities) {
                    try endpoint.play(fault)
                    faults.removeFirst()
                    faultsPlayedAt.append((ContinuousClock.now - start).seconds)
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            let elapsed = (ContinuousClock.now - start).seconds
            // Then every push must have been recorded sent, once.
            while try await outbox.nextDueDate() != nil {
                try await Task.sleep(for: .milliseconds(100))
            }
            let settled = (ContinuousClock.now - start).seconds
            let counts = try await outbox.deliveryCounts()
            let sent = (counts[.sent] ?? 0) - sentBefore
            guard sent == activities else {
                throw ValidationError("\(sent) of \(activities) pushes were sent: \(counts)")
            }
            let acceptedTwice = try endpoint.accepted() - acceptedBefore - activities
            return FanOut(
                seconds: elapsed, acceptSeconds: accepted.seconds, rate: Double(activities) / elapsed, settledSeconds: settled,
                acceptedTwice: acceptedTwice, faultsPlayedAt: faultsPlayedAt)
        }

        // MARK: Latency

        struct Latency {
            var count: Int
            var p50: Double
            var p99: Double
            var max: Double
            /// How late the sender itself was in sending, included in the latencies above.
            var senderLagP50: Double
            var senderLagP99: Double
            var achievedRate: Double
            /// Answers other than 200 by status (0: no answer).
            var failures: [Int: Int]

            var failureSummary: String {
                let total = failures.values.reduce(0, +)
                guard total > 0 else { return "0" }
                let byStatus = failures.sorted { $0.key < $1.key }.map { "\($0.key == 0 ? "no answer" : String($0.key)): \($0.value)" }
                return "\(total) (\(byStatus.joined(separator: ", ")))"
            }
        }

        /// Open loop: request `i` is due at `i / rate` seconds, and its latency counts from then, so a
        /// slow answer that delays the sender is not hidden. Server keys are spread over the requests
        /// to stay within the per-key rate limit.
        private func measureLatency(
            apis: [BenchAPI], seconds: Int, log: String? = nil, path: (Int) -> String = { "/v1/activities/order-\($0)/update" }
        ) async throws -> Latency {
            let api = apis[0]
            var serverKeys: [String] = []
            for index in 0..<max(1, (rate + 399) / 400) {
                let made = try await api.post(
                    "/v1/api-keys", key: api.keys.admin,
                    body: .object([
                        ("name", .string("bench-\(index)")), ("scope", .string("server")),
                    ]))
                guard made.status == 201, let secret = made.json["secret"]?.stringValue else {
                    throw ValidationError("could not make a server key: \(made.status) \(made.text)")
                }
                serverKeys.append(secret)
            }
            let warmup = rate
            let requests = (0..<(warmup + rate * seconds)).map { index in
                let body = JSONValue.object([("contentState", .object([("status", .string("step \(index)")), ("etaMinutes", .integer(index % 60))]))])
                return BenchLoadClient.Request(
                    server: index % apis.count, path: path(index % keys), bearer: serverKeys[index % serverKeys.count],
                    body: body.serialized)
            }
            let (outcomes, elapsed) = try await BenchLoadClient(baseURLs: apis.map(\.baseURL)).run(requests, rate: rate)
            if let log {
                let lines = outcomes.enumerated().map { index, outcome in
                    "\(Double(index) / Double(rate)),\(outcome.latency),\(outcome.lag),\(outcome.status)"
                }
                try (["due_seconds,latency_seconds,sender_lag_seconds,status"] + lines).joined(separator: "\n").write(
                    toFile: log, atomically: true, encoding: .utf8)
            }
            let results = outcomes.dropFirst(warmup)
            let sorted = results.map(\.latency).sorted()
            let lags = results.map(\.lag).sorted()
            return Latency(
                count: results.count, p50: sorted.percentile(0.50), p99: sorted.percentile(0.99), max: sorted.last ?? 0,
                senderLagP50: lags.percentile(0.50), senderLagP99: lags.percentile(0.99),
                achievedRate: Double(requests.count) / elapsed,
                failures: Dictionary(results.filter { $0.status != 200 }.map { ($0.status, 1) }, uniquingKeysWith: +))
        }
    }
}

/// A line on standard output at once, even through a pipe, so that progress shows as it comes.
private func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

/// The server's API, for the benchmark.
struct BenchAPI: Sendable {
    let http: HTTPClient
    let baseURL: String
    let keys: (admin: String, server: String)

    struct Answer {
        var status: Int
        var text: String
        /// Parsed when asked for: a timed request (the listing's page) measures the server, not
        /// this client's parsing of what it sent.
        var json: JSONValue { (try? JSONValue(parsing: text)) ?? .null }
    }

    /// How the server sends now, from its gauges on `/metrics` (0 when absent): its in-flight
    /// limit, its APNs connections and the shortest round trip it measured.
    func sending() async throws -> String {
        let samples = try await metrics()
        let value = { (name: Metric) in Int(samples.value(name.rawValue) ?? 0) }
        let roundTrip = Double(value(Metric.apnsRoundTripShortestMicroseconds)) / 1000
        return "in flight at most \(value(Metric.inFlightLimit)), \(value(Metric.apnsConnections)) APNs connection(s), "
            + "shortest round trip \(String(format: "%.1f", roundTrip)) ms"
    }

    /// The statements the server has run on its store since it started (`/metrics`).
    func statementsRun() async throws -> Int {
        Int(try await metrics().value(Metric.storeStatements.rawValue) ?? 0)
    }

    /// The server's series on `/metrics`, read with the admin key.
    private func metrics() async throws -> PrometheusSamples {
        var request = HTTPClientRequest(url: baseURL + "/metrics")
        request.headers.add(name: "authorization", value: "Bearer \(keys.admin)")
        let response = try await http.execute(request, timeout: .seconds(30))
        return PrometheusSamples(String(buffer: try await response.body.collect(upTo: 4 * 1024 * 1024)))
    }

    func post(_ path: String, key: String, body: JSONValue) async throws -> Answer {
        try await call(.POST, path, key: key, body: body)
    }

    func get(_ path: String, key: String) async throws -> Answer {
        try await call(.GET, path, key: key, body: nil)
    }

    func call(_ method: HTTPMethod, _ path: String, key: String, body: JSONValue? = nil) async throws -> Answer {
        var request = HTTPClientRequest(url: baseURL + path)
        request.method = method
        request.headers.add(name: "authorization", value: "Bearer \(key)")
        if let body {
            request.headers.add(name: "content-type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body.serialized))
        }
        let response = try await http.execute(request, timeout: .seconds(30))
        let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
        return Answer(status: Int(response.status.code), text: String(buffer: bytes))
    }
}

/// `liverelay serve` as a child process, so that its memory is its own.
struct ServerProcess {
    let process: Process
    let baseURL: String
    var pid: Int32 { process.processIdentifier }

    static func start(_ arguments: [String]) async throws -> ServerProcess {
        // The announcement's first line says where the API is.
        let (process, output, text) = try startThisExecutable(arguments)
        guard text.hasPrefix("LiveRelay server:"), let url = text.split(separator: " ").first(where: { $0.hasPrefix("http://") }) else {
            process.terminate()
            BenchInterruption.stopped(process.processIdentifier)
            throw ValidationError("liverelay serve did not start: \(text)")
        }
        // Keep draining, so that a full pipe never blocks the server.
        Thread.detachNewThread { _ = try? output.fileHandleForReading.readToEnd() }
        return ServerProcess(process: process, baseURL: String(url))
    }

    /// CPU time (user and system) the process has used, in seconds, from /proc.
    func cpuSeconds() -> Double { processCPUSeconds(pid) }

    /// Resident memory now and at its peak, in MB, from /proc.
    func memory() -> (current: Int, peak: Int) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        func field(_ name: String) -> Int {
            let line = status.split(separator: "\n").first { $0.hasPrefix(name + ":") }
            let kilobytes = line?.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
            return kilobytes * 1024 / 1_000_000
        }
        return (field("VmRSS"), field("VmHWM"))
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
        BenchInterruption.stopped(pid)
    }
}

/// CPU time every PostgreSQL process on this machine has used, in seconds (those /proc names
/// `postgres`): the database's part of a fan-out when it runs here. Processes that end meanwhile
/// (an autovacuum worker) take theirs with them, so this is a floor.
func postgresCPUSeconds() -> Double {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.compactMap(Int32.init).reduce(0) { total, pid in
        let name = (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)) ?? ""
        return name.hasPrefix("postgres") ? total + processCPUSeconds(pid) : total
    }
}

/// CPU time (user and system) process `pid` has used, in seconds: /proc/<pid>/stat's utime and
/// stime, in clock ticks of 1/100 s.
func processCPUSeconds(_ pid: Int32) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
        let close = stat.lastIndex(of: ")")
    else { return 0 }
    // After the command name: state is field 3, utime 14 and stime 15.
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / 100
}
