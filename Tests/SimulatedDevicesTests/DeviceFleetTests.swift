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
        _ = try f.device.request(bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: f.attributes,
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
