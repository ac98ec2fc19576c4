import ArgumentParser
import Crypto
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import Synchronization

extension Bench {
    struct Soak: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Months of use in minutes: simulated days through the service on an injected clock, and whether the store stays flat.",
            discussion: """
                Runs the service in this process on a fresh store (SQLite in a temporary file,
                or --database postgres://…) with its clock injected, and plays --days days. A
                day at --scale 1: 20,000 starts, each to one device, whose update token is
                reported at once, then 9 updates and an end of its key (200,000 single-key
                changes); 3 fan-outs to 100,000 tokens registered that day; 5% of the devices'
                push-to-start tokens rotated; 1% of the pushes answered with a dead token.
                Every push is claimed and recorded as the dispatcher does, without a network.
                Each simulated hour the ticker runs (expiry, retention), and retention is run
                to its end, as its once-a-minute runs of 250 ms would over the hour. Prints,
                per day: the database's size, its rows per table, the single-key changes' p99
                (wall time of the service's call), this process's resident memory and the time
                retention took. With --plot, writes them as an SVG.
                """)

        @Option(help: "Simulated days.") var days: Int = 60
        @Option(help: "The size of a day, as a fraction of the day described above.") var scale: Double = 0.05
        @Option(help: "Days the history is kept (serve's --history-days).") var historyDays: Int = RetentionPolicy().historyDays
        @Option(help: "Days ended activities are kept (serve's --ended-days).") var endedDays: Int = RetentionPolicy().endedDays
        @Option(help: ArgumentHelp("A PostgreSQL database (default: SQLite in a temporary file).", valueName: "postgres://…"))
        var database: String?
        @Option(help: ArgumentHelp("Write the figures as an SVG plot here.", valueName: "file")) var plot: String?

        func validate() throws {
            guard (1...400).contains(days) else { throw ValidationError("days: must be 1 to 400") }
            guard scale > 0, scale <= 1 else { throw ValidationError("scale: must be more than 0 and at most 1") }
            guard RetentionPolicy.allowedDays.contains(historyDays), RetentionPolicy.allowedDays.contains(endedDays) else {
                throw ValidationError("history-days and ended-days: must be 1 to 3650")
            }
            try Bench.requirePostgres(database, sqliteIs: "a temporary file")
        }

        func run() async throws {
            let engine = database == nil ? "SQLite" : "PostgreSQL"
            let world = World(scale: scale)
            print(
                "soak on \(engine): \(days) days of \(world.starts) starts (\(world.starts * 10) single-key changes), 3 fan-outs of \(world.fanOut), history \(historyDays) d, ended \(endedDays) d"
            )
            print(Day.header)
            let figures = try await Bench.withStore(database) { store, location in
                guard try await store.footprint().rows["deliveries"] == 0 else {
                    throw ValidationError("database: \(location) is not empty; the soak needs a fresh one")
                }
                let clock = SoakClock()
                var configuration = RelayConfiguration()
                configuration.retention = RetentionPolicy(historyDays: historyDays, endedDays: endedDays)
                let relay = RelayService(
                    store: store, configuration: configuration, apns: nil, masterKey: .generate(), now: { clock.now })
                _ = try await relay.registerApp(
                    AppRegistration(
                        bundleID: BenchFixture.bundle, teamID: BenchFixture.teamID, keyID: BenchFixture.keyID,
                        signingKey: P256.Signing.PrivateKey().pemRepresentation))
                try await world.registerDevices(relay, rotation: 0)
                var figures: [Day] = []
                for day in 1...days {
                    var today = Day(number: day)
                    try await world.play(day: day, relay: relay, store: store, clock: clock, into: &today)
                    let footprint = try await store.footprint()
                    today.bytes = footprint.bytes
                    today.rows = footprint.rows
                    today.residentMegabytes = residentMegabytes()
                    print(today.line)
                    figures.append(today)
                }
                return figures
            }
            if let plot {
                try SoakPlot(engine: engine, scale: scale, historyDays: historyDays, endedDays: endedDays, days: figures).svg
                    .write(toFile: plot, atomically: true, encoding: .utf8)
                print("plot: \(plot)")
            }
        }
    }
}

/// One simulated day's figures.
struct Day {
    var number: Int
    var bytes: Int64 = 0
    var rows: [String: Int] = [:]
    var singleKeyMilliseconds: [Double] = []
    var residentMegabytes = 0
    var retentionSeconds = 0.0
    var pushes = 0

    var p99: Double { singleKeyMilliseconds.sorted().percentile(0.99) }

    static let shownTables = ["deliveries", "payloads", "events", "activities", "activity_tokens", "idempotency_keys"]
    static var header: String {
        "day      MB  "
            + shownTables.map { $0.replacingOccurrences(of: "activity_", with: "act_").padding(toLength: 11, withPad: " ", startingAt: 0) }.joined()
            + "p99 ms  RSS MB  retention s  pushes"
    }
    var line: String {
        String(format: "%3d  %6.1f  ", number, Double(bytes) / 1_000_000)
            + Self.shownTables.map { String(rows[$0] ?? 0).padding(toLength: 11, withPad: " ", startingAt: 0) }.joined()
            + String(format: "%6.2f  %6d  %11.2f  %6d", p99, residentMegabytes, retentionSeconds, pushes)
    }
}

/// The simulated world: devices with push-to-start tokens, and what a day does.
struct World {
    let starts: Int
    let fanOut: Int
    let devices: Int
    static let attributesType = "DeliveryAttributes"

    init(scale: Double) {
        starts = max(1, Int(20_000 * scale) / 24) * 24
        fanOut = max(10, Int(100_000 * scale))
        devices = starts
    }

    var app: String { BenchFixture.bundle.value }

    /// A token for `device`, different at each `rotation`.
    func token(_ kind: String, _ index: Int, _ rotation: Int) throws -> DeviceToken {
        let digest = SHA256.hash(data: Data("\(kind)-\(index)-\(rotation)".utf8))
        return try DeviceToken(digest.map { String(format: "%02x", $0) }.joined())
    }

    /// Every device's push-to-start token, or those whose turn to rotate it is `rotation` (5% a day).
    func registerDevices(_ relay: RelayService, rotation: Int) async throws {
        for index in 0..<devices where rotation == 0 || index % 20 == rotation % 20 {
            try await relay.registerPushToStartToken(
                PushToStartRegistration(
                    deviceID: "device-\(index)", bundleID: app, attributesType: Self.attributesType, token: try token("p2s", index, rotation)))
        }
    }

    func play(day: Int, relay: RelayService, store: any RelayStore, clock: SoakClock, into today: inout Day) async throws {
        try await registerDevices(relay, rotation: day)
        let fanOutKey = "match-\(day)"
        let perHour = starts / 24
        for hour in 0..<24 {
            // Each of the hour's keys: started, its token reported, then 9 updates and an end,
            // every step sent before the next (minutes apart, as a delivery's would be).
            let keys = (0..<perHour).map { index in (number: hour * perHour + index, key: "order-\(day)-\(hour * perHour + index)") }
            for step in 0...10 {
                for (number, key) in keys {
                    if step == 0 {
                        let device = "device-\(number % devices)"
                        _ = try await relay.start(
                            app: app, key: key,
                            StartRequest(
                                attributesType: Self.attributesType,
                                attributes: .object([("activityKey", .string(key)), ("orderNumber", .integer(number))]), contentState: content(0),
                                alert: AlertConfiguration(title: "Order", body: "Preparing"), audience: .devices([device])))
                        _ = try await relay.registerActivityToken(
                            key: key,
                            ActivityTokenRegistration(
                                deviceID: device, bundleID: app, attributesType: Self.attributesType, token: try token("activity-\(day)", number, 0)))
                    } else {
                        let began = ContinuousClock.now
                        _ = try await relay.change(app: app, key: key, ChangeRequest(event: step == 10 ? .end : .update, contentState: content(step)))
                        today.singleKeyMilliseconds.append((ContinuousClock.now - began).seconds * 1000)
                    }
                }
                today.pushes += try await sendEverything(store, at: clock.now)
            }
            if hour == 9 {
                // The day's fan-out key and its tokens, reported as its activities start (an
                // activity lives 8 hours: its three fan-outs come within them).
                try await BenchFixture.register(
                    store,
                    activityTokens: try (0..<fanOut).map { index in
                        ActivityTokenRecord(
                            bundleID: app, key: fanOutKey, deviceID: "fan-\(index)", token: try token("fan-\(day)", index, 0).hex,
                            frequentPushesEnabled: false, environment: .sandbox, registeredAt: clock.now)
                    }, attributesType: Self.attributesType)
            }
            if [9, 12, 16].contains(hour) {
                _ = try await relay.change(app: app, key: fanOutKey, ChangeRequest(event: .update, contentState: content(hour)))
            }
            today.pushes += try await sendEverything(store, at: clock.now)
            clock.advance(by: 3600)
            let now = clock.now
            try await relay.tick()
            let began = ContinuousClock.now
            while try await relay.prune(at: now).unfinished {}
            today.retentionSeconds += (ContinuousClock.now - began).seconds
        }
    }

    func content(_ step: Int) -> JSONValue { .object([("status", .string("step \(step)")), ("etaMinutes", .integer(30 - step))]) }

    /// Claims every push due and records it as APNs would answer: 1% to a dead token.
    func sendEverything(_ store: any RelayStore, at now: Date) async throws -> Int {
        var sent = 0
        while true {
            let claimed = try await store.claimDeliveries(dueBy: now, limit: 1000, leaseUntil: now + 60)
            if claimed.isEmpty { return sent }
            try await store.recordOutcomes(
                claimed.map { delivery in
                    (
                        delivery.id,
                        delivery.id % 100 == 0
                            ? DeliveryOutcome.failed(status: 410, reason: "Unregistered", tokenIsDead: true)
                            : .sent(status: 200, apnsID: nil)
                    )
                }, at: now)
            sent += claimed.count
        }
    }
}

/// The simulated days' time, which the service reads as its clock.
final class SoakClock: Sendable {
    private let date = Mutex(Date(timeIntervalSince1970: 1_800_000_000))
    var now: Date { date.withLock { $0 } }
    func advance(by seconds: TimeInterval) { date.withLock { $0 += seconds } }
}

/// This process's resident memory, in MB.
func residentMegabytes() -> Int {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
    return (line?.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0) / 1000
}
