import ArgumentParser
import Foundation
import LiveActivityKit
import SimulatedDevices

extension Bench {
    /// The device layer at scale: memory per device and pushes applied per second.
    struct Devices: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Measure simulated devices: memory with one active activity each, and pushes applied per second.",
            discussion: """
                Creates the devices (one app, one activity with an update token each) and
                reports the resident memory they added. Then sends rounds of update pushes, one
                per device per round, as the emulator hands them over (payload bytes parsed,
                then delivered through the fleet), and reports pushes applied per second next
                to a reference measured in the same run: parsing the same payloads alone.
                """)

        @Option(help: "Simulated devices.") var devices: Int = 100_000
        @Option(help: "Rounds of one update per device.") var rounds: Int = 2

        func run() async throws {
            let t0 = Date(timeIntervalSince1970: 1_795_000_000)
            let clock = VirtualClock(wallClock: { t0 })
            let type = ActivityAttributesType(
                name: "MatchAttributes",
                attributes: SwiftStruct("MatchAttributes", [.init("matchID", .string), .init("home", .string), .init("away", .string)]),
                contentState: SwiftStruct(
                    "ContentState", [.init("home", .int), .init("away", .int), .init("minute", .int), .init("lastEvent", .optional(.string))]))
            // One build of the app, installed everywhere (its attribute types are shared, as code is).
            let app = SimulatedApp(bundleID: "com.example.scores", attributeTypes: [type])
            let residentBefore = residentMegabytes()
            let fleet = DeviceFleet(clock: clock)
            let setUp = ContinuousClock.now
            for index in 0..<devices {
                let id = "device-\(index)"
                try fleet.addDevice(id: id)
                try fleet.install(app, on: id)
                try fleet.withDevice(id) { device, now in
                    try device.request(
                        bundleID: "com.example.scores", attributesType: "MatchAttributes",
                        attributes: .object([("matchID", .string("m-\(index % 100)")), ("home", .string("Lions")), ("away", .string("Tigers"))]),
                        content: ActivityContentState(state: .object([("home", .integer(0)), ("away", .integer(0)), ("minute", .integer(0))])),
                        pushType: .token, at: now)
                }
            }
            clock.advance(by: 1)
            fleet.advanceAll()
            let residentAfter = residentMegabytes()
            var tokens: [String] = []
            tokens.reserveCapacity(devices)
            for index in 0..<devices {
                guard let token = try fleet.device("device-\(index)").activities.first?.pushToken else {
                    throw ValidationError("device-\(index) has no update token")
                }
                tokens.append(token)
            }
            print("devices:          \(devices) with one active activity and an update token each (set up in \(seconds(since: setUp)) s)")
            print(
                "resident memory:  \(residentAfter) MB in all, \(residentAfter - residentBefore) MB added by the devices (target ≤ 300 MB for 100,000)"
            )

            var applied = 0
            var reference = 0.0
            var measured = 0.0
            for round in 1...rounds {
                let timestamp = Int(t0.timeIntervalSince1970) + round
                let payloads: [[UInt8]] = (0..<devices).map { index in
                    Array(
                        #"{"aps":{"event":"update","timestamp":\#(timestamp),"content-state":{"home":\#(round),"away":\#(index % 3),"minute":\#(round * 10),"lastEvent":"Goal"}}}"#
                            .utf8)
                }
                // Reference: parsing alone.
                let parseStart = ContinuousClock.now
                var parsed = 0
                for payload in payloads where (try? JSONValue(parsing: payload)) != nil { parsed += 1 }
                let parseSeconds = seconds(since: parseStart)
                // Measured: what the emulator does for a push to a device's token.
                let before = fleet.events.lastSequence
                let start = ContinuousClock.now
                for (token, payload) in zip(tokens, payloads) {
                    fleet.deliver(to: token) {
                        DevicePush(token: token, payload: (try? JSONValue(parsing: payload)) ?? .null, priority: 10, receivedAt: t0)
                    }
                }
                let elapsed = seconds(since: start)
                let updates = fleet.events.events(after: before).count { if case .contentUpdated = $0.event { true } else { false } }
                // The ring keeps the newest events only; count from the devices when it overflowed.
                let appliedThisRound =
                    updates == devices
                    ? updates
                    : try (0..<devices).count { index in
                        try fleet.device("device-\(index)").activities.first?.content.state["home"] == .integer(round)
                    }
                guard parsed == devices, appliedThisRound == devices else {
                    throw ValidationError("round \(round): \(appliedThisRound) of \(devices) pushes applied")
                }
                applied += appliedThisRound
                reference += Double(devices) / parseSeconds
                measured += Double(devices) / elapsed
                print(
                    "round \(round):          \(Int(Double(devices) / elapsed)) pushes/s applied; parsing alone \(Int(Double(devices) / parseSeconds))/s"
                )
            }
            let meanApplied = measured / Double(rounds)
            let meanReference = reference / Double(rounds)
            print("applied:          \(Int(meanApplied)) pushes/s (mean of \(rounds) rounds, \(applied) pushes; target ≥ 10,000)")
            print("vs parsing alone: \(String(format: "%.0f", 100 * meanApplied / meanReference)) % of the parse-only rate in the same run")
        }

        private func seconds(since start: ContinuousClock.Instant) -> Double {
            let duration = ContinuousClock.now - start
            return Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        }

        /// Resident set size now, from /proc (Linux).
        private func residentMegabytes() -> Int {
            guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8),
                let pages = statm.split(separator: " ").dropFirst().first.flatMap({ Int($0) })
            else { return 0 }
            return pages * Int(sysconf(Int32(_SC_PAGESIZE))) / 1_000_000
        }
    }
}
