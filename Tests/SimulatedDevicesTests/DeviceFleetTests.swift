import Foundation
import LiveActivityKit
import SimulatedDevices
import Testing

/// The fleet: channel storage for offline devices, by policy and age (spec §9).
@Suite struct DeviceFleetTests {
    let channel = "c3RvcmVkY2hhbm5lbA=="

    /// A fleet on a fixed wall clock, with one device whose activity is subscribed to `channel`.
    func fleet() throws -> (DeviceFleet, String) {
        let t0 = Date(timeIntervalSince1970: 1_795_000_000)
        let fleet = DeviceFleet(clock: VirtualClock(wallClock: { t0 }))
        try fleet.addDevice(id: "iphone")
        let activityID = try fleet.withDevice("iphone") { device, now in
            _ = device.install(SimulatedApp(bundleID: DeviceFixture.bundle, attributeTypes: [DeviceFixture.type]), at: now)
            let (id, events) = try device.request(
                bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: .object([("orderNumber", .number("1"))]),
                content: ActivityContentState(state: .object([("step", .string("preparing")), ("eta", .number("9"))])),
                pushType: .channel(channel), at: now)
            return (id, events)
        }
        try fleet.withDevice("iphone") { device, now in ((), device.setOnline(false, at: now)) }
        return (fleet, activityID)
    }

    func broadcast(_ fleet: DeviceFleet, step: String, policy: Int, expiration: Date? = nil) throws {
        let timestamp = Int(fleet.clock.now.timeIntervalSince1970)
        let payload = try JSONValue(parsing: #"{"aps":{"event":"update","timestamp":\#(timestamp),"content-state":{"step":"\#(step)","eta":1}}}"#)
        fleet.broadcast(channelID: channel, payload: payload, priority: 10, storagePolicy: policy, expiration: expiration)
    }

    func step(_ fleet: DeviceFleet, _ activityID: String) throws -> JSONValue? {
        try fleet.device("iphone").activity(activityID)?.content.state["step"]
    }

    @Test func aStoredMessageReachesADeviceThatComesBack() throws {
        let (fleet, activityID) = try fleet()
        fleet.clock.advance(by: 1)
        try broadcast(fleet, step: "delivering", policy: 1, expiration: fleet.clock.now + 4 * 3600)
        fleet.clock.advance(by: 4 * 3600 - 1)
        try fleet.withDevice("iphone") { device, now in ((), device.setOnline(true, at: now)) }
        #expect(try step(fleet, activityID) == .string("delivering"))
    }

    /// (The 8-hour cap cannot be seen this way: a subscribed activity does not outlive 8 hours either.)
    @Test func noMessageStoredPastItsExpirationOrOnPolicy0() throws {
        for (policy, expiration, wait) in [(1, 60.0, 61), (0, nil, 1)] as [(Int, TimeInterval?, TimeInterval)] {
            let (fleet, activityID) = try fleet()
            fleet.clock.advance(by: 1)
            try broadcast(fleet, step: "delivering", policy: policy, expiration: expiration.map { fleet.clock.now + $0 })
            fleet.clock.advance(by: wait)
            try fleet.withDevice("iphone") { device, now in ((), device.setOnline(true, at: now)) }
            let shown = try step(fleet, activityID)
            #expect(shown == .string("preparing"), "policy \(policy), expiration \(String(describing: expiration))")
        }
    }
}

@Suite struct DeviceTimeOrderTests {
    @Test func anActivityPastItsLimitNoLongerCountsWhenTheAppRequestsAnother() throws {
        var f = DeviceFixture(settings: DeviceRuntimeSettings(maximumActivitiesPerApp: 1))
        _ = try f.request()
        // Without advancing first: the request itself applies the 8-hour limit.
        _ = try f.device.request(
            bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: f.attributes,
            content: f.content("preparing"), at: f.t0 + 8 * 3600)
        #expect(f.device.activities.filter(\.lifecycle.isOngoing).count == 1)
    }

    @Test func anEndPushShowsItsAlert() throws {
        var f = DeviceFixture()
        let id = try f.request()
        f.advance(to: 1)
        let token = try #require(f.updateToken(id))
        f.receive(f.push(to: token, #"{"event":"end","timestamp":1795000010,"alert":{"title":"Delivered","body":"Enjoy"}}"#, at: 10))
        #expect(f.device.activity(id)?.lastAlert?.title == "Delivered")
        #expect(f.device.activity(id)?.state == .ended)
    }
}

/// A fleet kept and put back (what `serve` does with its built-in emulator's devices across
/// restarts): the devices go on as if nothing had stopped.
@Suite struct FleetSnapshotTests {
    let t0 = Date(timeIntervalSince1970: 1_795_000_000)
    let channel = "c3RvcmVkY2hhbm5lbA=="

    /// Through its JSON, as the state file holds it.
    func keptAndRestored(_ fleet: DeviceFleet) throws -> DeviceFleet {
        let data = try JSONEncoder().encode(fleet.snapshot)
        let restored = DeviceFleet(clock: VirtualClock(wallClock: { [t0] in t0 }))
        try restored.restore(try JSONDecoder().decode(FleetSnapshot.self, from: data))
        return restored
    }

    func content(_ step: String, eta: String) -> JSONValue { .object([("step", .string(step)), ("eta", .number(eta))]) }

    @Test func aRestoredFleetGoesOnAsTheOriginalWould() throws {
        let fleet = DeviceFleet(clock: VirtualClock(wallClock: { [t0] in t0 }))
        try fleet.addDevice(id: "iphone")
        try fleet.addDevice(id: "offline-ipad", model: .iPad)
        let (tokenActivity, channelActivity) = try fleet.withDevice("iphone") { device, now in
            var events = device.install(SimulatedApp(bundleID: DeviceFixture.bundle, attributeTypes: [DeviceFixture.type]), at: now)
            let (first, more) = try device.request(
                bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: .object([("orderNumber", .number("1"))]),
                content: ActivityContentState(state: content("preparing", eta: "1e1")), pushType: .token, at: now)
            let (second, yetMore) = try device.request(
                bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: .object([("orderNumber", .number("2"))]),
                content: ActivityContentState(state: content("preparing", eta: "9")), pushType: .channel(channel), at: now)
            events += more + yetMore
            return ((first, second), events)
        }
        try fleet.withDevice("offline-ipad") { device, now in
            var events = device.install(SimulatedApp(bundleID: DeviceFixture.bundle, attributeTypes: [DeviceFixture.type]), at: now)
            let (_, more) = try device.request(
                bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: .object([("orderNumber", .number("3"))]),
                content: ActivityContentState(state: content("preparing", eta: "5")), pushType: .channel(channel), at: now)
            events += more + device.setOnline(false, at: now)
            return ((), events)
        }
        fleet.clock.advance(by: 2)
        fleet.advanceAll()
        let token = try #require(try fleet.device("iphone").activity(tokenActivity)?.pushToken)
        // A priority-5 update waits for its opportunistic delay; a stored channel message waits for the iPad.
        let timestamp = Int(fleet.clock.now.timeIntervalSince1970)
        fleet.deliver(to: token) {
            DevicePush(
                token: token,
                payload: try! JSONValue(
                    parsing: #"{"aps":{"event":"update","timestamp":\#(timestamp),"content-state":{"step":"delivering","eta":3}}}"#),
                priority: 5, receivedAt: fleet.clock.now)
        }
        fleet.broadcast(
            channelID: channel,
            payload: try JSONValue(parsing: #"{"aps":{"event":"update","timestamp":\#(timestamp),"content-state":{"step":"delivering","eta":4}}}"#),
            priority: 10, storagePolicy: 1, expiration: nil)

        // One copy is looked at, the other left alone (reading a device applies time to it).
        let (inspected, restored) = (try keptAndRestored(fleet), try keptAndRestored(fleet))
        #expect(inspected.clock.now == fleet.clock.now)
        #expect(inspected.deviceIDs == ["iphone", "offline-ipad"])
        for id in inspected.deviceIDs {
            let (before, after) = (try fleet.device(id), try inspected.device(id))
            #expect(after.activities == before.activities && after.apps == before.apps && after.log == before.log && after.model == before.model)
            #expect(after.isOnline == before.isOnline)
        }
        // Numbers keep their literal text.
        #expect(try inspected.device("iphone").activity(tokenActivity)?.content.state["eta"] == .number("1e1"))

        // Both go on alike: the held update is applied when its delay is over, the 8-hour limit
        // ends the activities, the iPad takes the stored message when it comes back, and a
        // rotation issues the same next token (the token generator went on where it was).
        for each in [fleet, restored] {
            let before = each.events.lastSequence
            each.clock.advance(by: DeviceRuntimeSettings().opportunisticDelay)
            each.advanceAll()
            // Time reached the device by itself (nothing read it): its deadline was kept.
            #expect(each.events.events(after: before).contains { $0.activityID == tokenActivity })
            #expect(try each.device("iphone").activity(tokenActivity)?.content.state["step"] == .string("delivering"))
            try each.withDevice("offline-ipad") { device, now in ((), device.setOnline(true, at: now)) }
            #expect(try each.device("offline-ipad").activities.first?.content.state["eta"] == .number("4"))
            try each.withDevice("iphone") { device, now in ((), device.rotateUpdateToken(activityID: tokenActivity, at: now)) }
            each.clock.advance(by: ActivityLifetime.maximumActive)
            each.advanceAll()
            #expect(try each.device("iphone").activity(channelActivity)?.state == .ended)
            #expect(try each.device("iphone").activity(channelActivity)?.endCause == .eightHourLimit)
        }
        let rotated = try #require(try restored.device("iphone").activity(tokenActivity)?.pushToken)
        let rotatedInOriginal = try fleet.device("iphone").activity(tokenActivity)?.pushToken
        #expect(rotated != token && rotated == rotatedInOriginal)
        // The restored fleet knows which device holds each token.
        #expect(restored.deliver(to: rotated) { DevicePush(token: rotated, payload: .object([]), receivedAt: restored.clock.now) })
    }

    @Test func aSnapshotOfAnotherVersionIsRefusedByName() throws {
        var snapshot = DeviceFleet().snapshot
        snapshot.version = FleetSnapshot.currentVersion + 1
        #expect(throws: SnapshotError.self) { try DeviceFleet().restore(snapshot) }
    }
}
