import Crypto
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import Testing

/// Two `liverelay serve` processes on one PostgreSQL database, sending to `liverelay emulator` in a
/// third (TLS HTTP/2 on loopback; its journal holds every request). The three run apart and at the
/// lowest CPU priority, so that their load does not starve the tests running beside these (whose
/// APNs timeouts are real time). In CI a missing PostgreSQL fails these tests; elsewhere they are
/// reported skipped.
@Suite(.serialized, .timeLimit(.minutes(10)), .enabled(if: TestPostgres.isAvailable || TestPostgres.isCI, Comment(rawValue: TestPostgres.skipNote)))
struct SeveralInstancesTests {
    static let bundleID = "com.example.instances"
    static let devices = 10_000
    /// Fewer for the kill test, which sends two updates and waits out a lease: debug builds at the
    /// lowest CPU priority send a few hundred pushes a second here.
    static let devicesAtTheKill = 2_000

    /// A fan-out of 10,000 accepted by one instance is sent by both (the other hears of it by
    /// NOTIFY), each push exactly once: APNs' count equals the accepted count.
    @Test func aFanOutAcceptedByOneInstanceIsSentByBothEachPushOnce() async throws {
        try await withTwoInstances(devices: Self.devices) { setup, one, two, keys in
            let update = try await one.call(.POST, "/v1/activities/match/update", key: keys.server, body: Self.update("on the way"))
            #expect(update.status == 200, "\(update.json)")
            #expect(update.json["deliveries"] == .integer(Self.devices))
            try await eventually(every: .milliseconds(250)) { try await setup.store.deliveryCounts()[.sent] == Self.devices }
            #expect(try await setup.store.deliveryCounts() == [.sent: Self.devices])
            let journal = try await setup.journalCounts()
            #expect(journal.requests == Self.devices)
            #expect(journal.counts == ["Success": Self.devices])

            // Each instance sent a share, and the shares add up.
            let sent = [try await Self.sentCount(one, keys.admin), try await Self.sentCount(two, keys.admin)]
            #expect(sent.allSatisfy { $0 > 0 }, "each instance sends part of the fan-out: \(sent)")
            #expect(sent.reduce(0, +) == Self.devices)
            print("fan-out of \(Self.devices) through two instances: \(sent[0]) sent by the accepting one, \(sent[1]) by the other")
            #expect(await one.stop() == 0)
            #expect(await two.stop() == 0)
        }
    }

    /// SIGKILL one instance while both are sending a fan-out and a newer update is waiting: the
    /// other finishes both, nothing accepted is lost, every device ends on the latest update. The
    /// only duplicates are pushes the dead instance had sent but not recorded at the kill (they
    /// are among those it held claimed); their number is reported.
    @Test func killingOneInstanceInTheMiddleOfAFanOutLosesNothing() async throws {
        try await withTwoInstances(devices: Self.devicesAtTheKill) { setup, one, two, keys in
            #expect(try await one.call(.POST, "/v1/activities/match/update", key: keys.server, body: Self.update("on the way")).status == 200)
            // Both instances are sending it.
            try await eventually(every: .milliseconds(50)) {
                let sentByTwo = try await Self.sentCount(two, keys.admin)
                return try await setup.journalCounts().requests >= 400 && sentByTwo > 0
            }
            let latest = try await one.call(.POST, "/v1/activities/match/update", key: keys.server, body: Self.update("around the corner"))
            #expect(latest.status == 200)
            let claimed = try await setup.store.deliveryCounts()[.sending, default: 0]
            await two.kill()

            // The survivor sends the rest; the dead instance's claims come due when their lease
            // (30 s here) runs out.
            try await eventually(every: .milliseconds(250)) {
                let counts = try await setup.store.deliveryCounts()
                return counts[.queued, default: 0] == 0 && counts[.sending, default: 0] == 0
            }
            let counts = try await setup.store.deliveryCounts()
            #expect(counts[.failed] == nil && counts[.skipped] == nil, "\(counts)")

            // What APNs accepted, per device: every one has the latest update, none lost.
            let accepted = try Self.acceptedUpdates(try await setup.journal())
            #expect(accepted.perDevice.count == Self.devicesAtTheKill)
            #expect(accepted.newestStatus == "around the corner")
            #expect(accepted.perDevice.values.allSatisfy { $0.keys.max() == accepted.newest }, "every device ends on the latest update")
            let duplicates = accepted.duplicates
            print("kill test: \(claimed) pushes claimed by the two instances at the kill; \(duplicates) sent twice")
            #expect(duplicates <= claimed, "duplicates come only from pushes claimed at the kill")
            #expect(await one.stop() == 0)
        }
    }

    /// Events written by both instances, for many keys, reach each of two endpoints once, in
    /// order per key, whichever instance posts them (they claim one at a time).
    @Test(.enabled(if: WebhookReceiver.isAvailable || TestRequirement.isCI, Comment(rawValue: WebhookReceiver.skipNote)))
    func eachEventIsPostedToEachEndpointOnceByTwoInstances() async throws {
        try await withTwoInstances(devices: 10) { setup, one, two, keys in
            var receivers: [WebhookReceiver] = []
            // One endpoint made through each instance: each knows at once that there is one to post to.
            for server in [one, two] {
                let port = try freeLoopbackPort()
                let made = try await server.call(
                    .POST, "/v1/webhooks", key: keys.server, body: .object([("url", .string("http://127.0.0.1:\(port)/hooks"))]))
                #expect(made.status == 201, "\(made.json)")
                receivers.append(try await WebhookReceiver.start(secret: try #require(made.json["secret"]?.stringValue), port: port))
            }
            do {
                // Each key: its activity reported through one instance, its dismissal through the
                // other: three events (started, ended on the device, ended on every device).
                let count = 40
                for number in 1...count {
                    let (first, second) = number % 2 == 0 ? (one, two) : (two, one)
                    let device = JSONValue.string("iphone-\(number)")
                    let token: JSONValue = .object([
                        ("deviceID", device), ("attributesType", .string("DeliveryAttributes")),
                        ("token", .string(InstancesSetup.token(100_000 + number))), ("environment", .string("sandbox")),
                    ])
                    #expect(try await first.call(.POST, "/v1/activities/k-\(number)/tokens", key: keys.client, body: token).status == 201)
                    let ended: JSONValue = .object([("deviceID", device), ("state", .string("dismissed")), ("cause", .string("person"))])
                    #expect(try await second.call(.POST, "/v1/activities/k-\(number)/ended", key: keys.client, body: ended).status == 200)
                }
                try await eventually(every: .milliseconds(100)) { try receivers.allSatisfy { try $0.received().count >= 3 * count } }
                for receiver in receivers {
                    let received = try receiver.received()
                    #expect(received.count == 3 * count && received.allSatisfy { $0.verified })
                    #expect(Set(received.compactMap(\.id)).count == 3 * count, "each event once")
                    for number in [1, 2, count] {
                        let log = try await one.call(.GET, "/v1/events?key=k-\(number)", key: keys.server).json["events"]?.arrayElements ?? []
                        let posted = received.filter { $0.event?["key"] == .string("k-\(number)") }.map { $0.event?["id"] }
                        #expect(posted == log.map { $0["id"] } && posted.count == 3, "k-\(number) in order")
                    }
                }
                // Each instance counts what it posted (at least once: a post whose answer was lost
                // is posted again, and counted again, with the same id). A post is counted once its
                // answer is read, which may come just after the receiver has the event.
                var posted: [Int] = []
                try await eventually(every: .milliseconds(100)) {
                    posted = []
                    for server in [one, two] {
                        let metrics = try await server.call(.GET, "/metrics", key: keys.admin).text
                        let line = metrics.split(separator: "\n").first { $0.hasPrefix(#"liverelay_webhook_attempts_total{result="delivered"}"#) }
                        posted.append(line.flatMap { $0.split(separator: " ").last }.flatMap { Int($0) } ?? 0)
                    }
                    return posted.reduce(0, +) >= 2 * 3 * count
                }
                print("webhooks through two instances: \(posted[0]) events posted by one, \(posted[1]) by the other")
            } catch {
                for receiver in receivers { await receiver.stop() }
                throw error
            }
            for receiver in receivers { await receiver.stop() }
            #expect(await one.stop() == 0)
            #expect(await two.stop() == 0)
        }
    }

    /// Runs `body` under a deadline with the emulator holding `devices` tokens and two instances
    /// (`one` made the first keys); closes the setup, failed or not.
    private func withTwoInstances(
        devices: Int,
        _ body: @escaping @Sendable (InstancesSetup, ServeProcess, ServeProcess, (admin: String, server: String, client: String)) async throws -> Void
    ) async throws {
        let directory = try TestFiles.folder("serve")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withDeadline(.seconds(480)) {
            let setup = try await InstancesSetup.start(in: directory, devices: devices)
            do {
                try await setup.store.running {
                    try await setup.seed()
                    let (one, two) = (try await setup.startInstance("one"), try await setup.startInstance("two"))
                    try await body(setup, one, two, try initialKeys(dataDir: directory + "/one"))
                }
            } catch {
                await setup.close()
                throw error
            }
            await setup.close()
        }
    }

    /// Per device token, how many times APNs accepted each update (by its timestamp); the newest
    /// timestamp and its status; how many were accepted more than once.
    static func acceptedUpdates(_ requests: [JSONValue]) throws
        -> (perDevice: [String: [Int: Int]], newest: Int, newestStatus: String?, duplicates: Int)
    {
        var perDevice: [String: [Int: Int]] = [:]
        var statusByTimestamp: [Int: String] = [:]
        for request in requests where request["status"]?.doubleValue == 200 {
            guard let path = request["path"]?.stringValue, let body = request["body"]?.stringValue else { continue }
            let token = String(path.split(separator: "/").last ?? "")
            let aps = try JSONValue(parsing: body)["aps"]
            guard let timestamp = aps?["timestamp"]?.doubleValue.map({ Int($0) }) else { continue }
            perDevice[token, default: [:]][timestamp, default: 0] += 1
            statusByTimestamp[timestamp] = aps?["content-state"]?["status"]?.stringValue
        }
        let newest = statusByTimestamp.keys.max() ?? 0
        var duplicates = 0
        for counts in perDevice.values {
            for count in counts.values where count > 1 { duplicates += count - 1 }
        }
        return (perDevice, newest, statusByTimestamp[newest], duplicates)
    }

    /// An update at priority 5, as a large fan-out is sent (no budget to count per device).
    static func update(_ status: String) -> JSONValue {
        .object([("contentState", .object([("status", .string(status)), ("etaMinutes", .integer(10))])), ("priority", .integer(5))])
    }

    /// Pushes an instance has had accepted, from its metrics.
    static func sentCount(_ server: ServeProcess, _ adminKey: String) async throws -> Int {
        let text = try await server.call(.GET, "/metrics", key: adminKey).text
        return text.split(separator: "\n").filter { $0.hasPrefix("liverelay_pushes_total{") && $0.contains("result=\"sent\"") }
            .compactMap { $0.split(separator: " ").last.flatMap { Int($0) } }.reduce(0, +)
    }
}

/// `liverelay emulator` with `devices` tokens, a fresh PostgreSQL database holding one key
/// (`match`) with an update token on each, and how to start `serve` instances on them.
struct InstancesSetup {
    let emulator: ChildProcess
    let ports: EmulatorBanner
    let database: String
    let store: PostgresStore
    let directory: String
    let devices: Int

    static func start(in directory: String, devices: Int) async throws -> InstancesSetup {
        let signingKey = P256.Signing.PrivateKey()
        try signingKey.pemRepresentation.write(toFile: directory + "/key.p8", atomically: true, encoding: .utf8)
        // The instances' one master key: each has a data directory of its own.
        try (MasterKey.generate().base64 + "\n").write(toFile: directory + "/master.key", atomically: true, encoding: .utf8)
        let tokens = (1...devices).map { "\(Self.token($0)):\(SeveralInstancesTests.bundleID)" }.joined(separator: "\n")
        try tokens.write(toFile: directory + "/tokens.txt", atomically: true, encoding: .utf8)
        let emulator = try ChildProcess.start(
            liverelayExecutable.path,
            [
                "emulator", "--ca-file", directory + "/ca.pem", "--key-file", directory + "/key.p8", "--key-id", "MANYKEY001",
                "--team-id", "MANYTEAM01", "--tokens-file", directory + "/tokens.txt", "--journal-capacity", String(4 * devices),
            ],
            environment: ChildProcess.environment(dropping: "LIVERELAY_"), yielding: true)
        let ports: EmulatorBanner
        do {
            ports = try await EmulatorBanner.read(from: emulator)
        } catch {
            emulator.send(SIGKILL)
            throw error
        }
        let database = try await TestPostgres.freshDatabase()
        let store = try PostgresStore(url: database)
        return InstancesSetup(emulator: emulator, ports: ports, database: database, store: store, directory: directory, devices: devices)
    }

    /// Migrates the database, and seeds the key and an update token per device (the tokens above)
    /// in one statement each. The store runs.
    func seed() async throws {
        try await store.migrate()
        let now = Int(Date().timeIntervalSince1970)
        try await TestPostgres.psql(
            database,
            """
            INSERT INTO activities (bundle_id, key, attributes_type, state, started_at, last_timestamp)
            VALUES ('\(SeveralInstancesTests.bundleID)', 'match', 'DeliveryAttributes', 'active', \(now), 0);
            INSERT INTO activity_tokens (bundle_id, key, device_id, token, frequent_pushes, registered_at, state, environment)
            SELECT '\(SeveralInstancesTests.bundleID)', 'match', 'iphone-' || i, lpad(to_hex(i), 64, '0'), false, \(now), 'live', 'sandbox'
            FROM generate_series(1, \(devices)) AS i
            """)
    }

    /// The token of device `index`, as the seeding statement writes it.
    static func token(_ index: Int) -> String {
        let hex = String(index, radix: 16)
        return String(repeating: "0", count: 64 - hex.count) + hex
    }

    /// A `serve` instance with its own data directory, on the shared database.
    func startInstance(_ name: String) async throws -> ServeProcess {
        try await ServeProcess.start(
            [
                "serve", "--data-dir", directory + "/" + name, "--http-port", "0", "--database", database, "--key-file", directory + "/key.p8",
                "--key-id", "MANYKEY001", "--team-id", "MANYTEAM01", "--bundle-id", SeveralInstancesTests.bundleID, "--environment", "custom",
                "--host", "127.0.0.1", "--port", ports.sandboxPush, "--management-port", ports.sandboxManagement, "--ca-file", directory + "/ca.pem",
                "--claim-lease", "30", "--webhook-addresses", "loopback", "--master-key-file", directory + "/master.key",
                // The emulator here (a debug build) answers a few hundred pushes a second: more in
                // flight would only wait past the request timeout.
                "--max-in-flight", "100",
            ], yielding: true)
    }

    /// How many requests the emulator received, and how many of each outcome.
    func journalCounts() async throws -> (requests: Int, counts: [String: Int]) {
        let answer = try await httpCall(.GET, ports.control + "/journal/counts")
        var counts: [String: Int] = [:]
        if case .object(let members) = answer.json["counts"] {
            for (outcome, count) in members { counts[outcome] = count.doubleValue.map { Int($0) } }
        }
        return (answer.json["requests"]?.doubleValue.map { Int($0) } ?? -1, counts)
    }

    /// Every request the emulator kept, oldest first.
    func journal() async throws -> [JSONValue] {
        var requests: [JSONValue] = []
        var after = 0
        while true {
            let page = try await httpCall(.GET, ports.control + "/journal?after=\(after)&limit=1000").json
            guard case .array(let entries) = page["requests"], !entries.isEmpty, let last = page["last"]?.doubleValue.map({ Int($0) }) else {
                return requests
            }
            requests += entries
            after = last
        }
    }

    func close() async {
        emulator.send(SIGKILL)
        _ = await emulator.exitCode()
    }
}
