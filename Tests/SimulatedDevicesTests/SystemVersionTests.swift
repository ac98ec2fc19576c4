import Foundation
import LiveActivityKit
import SimulatedDevices
import Testing

/// What a simulated iPhone's ActivityKit offers depends on its iOS (spec §3.1, §14.1).
@Suite struct SystemVersionTests {
    static let channelStart =
        #"{"event":"start","timestamp":1795000000,"attributes-type":"DeliveryAttributes","attributes":{"orderNumber":7},"content-state":{"step":"preparing","eta":30},"alert":{"title":"Order 7","body":"Preparing"},"input-push-channel":"dHdvLWNoYW5uZWw="}"#
    static let plainStart = channelStart.replacingOccurrences(of: #","input-push-channel":"dHdvLWNoYW5uZWw=""#, with: "")

    @Test(arguments: [
        ("17.2", true), ("17.6", true), ("18", true), ("26.1", true), ("17.1", false), ("16", false), ("18.", false), ("x", false), ("17.6.1", true),
        ("18.+1", false), ("18.0.0.1", false),
    ])
    func versionsAreReadFromIOS17_2On(_ text: String, _ valid: Bool) {
        #expect((SystemVersion(text) != nil) == valid)
    }

    /// iOS 17.x had push-to-start but no channels: a start that names a channel starts nothing.
    @Test func aStartThatNamesAChannelStartsNothingBeforeIOS18() throws {
        var f = DeviceFixture(systemVersion: SystemVersion(17, 6))
        f.receive(f.push(to: f.pushToStartToken, Self.channelStart, at: 5))
        #expect(f.device.activities.isEmpty)
        #expect(f.lastLog.contains("input-push-channel needs iOS 18.0 and this iPhone runs iOS 17.6: nothing starts"), "\(f.lastLog)")
        var g = DeviceFixture(systemVersion: SystemVersion(18))
        g.receive(g.push(to: g.pushToStartToken, Self.channelStart, at: 5))
        #expect(g.device.activities.first?.pushType == .channel("dHdvLWNoYW5uZWw="))
    }

    /// Before iOS 18 `input-push-token` is not read: a push-started activity gets its update token
    /// anyway. From iOS 18 it gets one only when the start asks for it.
    @Test func aPushStartedActivityHasAnUpdateTokenBeforeIOS18WithoutAsking() throws {
        var f = DeviceFixture(systemVersion: .oldest)
        f.receive(f.push(to: f.pushToStartToken, Self.plainStart, at: 5))
        f.advance(to: 6)
        let activity = try #require(f.device.activities.first)
        #expect(activity.pushType == .token && activity.pushToken != nil)
        var g = DeviceFixture(systemVersion: SystemVersion(18))
        g.receive(g.push(to: g.pushToStartToken, Self.plainStart, at: 5))
        g.advance(to: 6)
        #expect(g.device.activities.first?.pushType == ActivityPushType.none && g.device.activities.first?.pushToken == nil)
    }

    @Test func theAppCannotRequestAChannelActivityBeforeIOS18() throws {
        var f = DeviceFixture(systemVersion: SystemVersion(17, 2))
        f.device.setForeground(DeviceFixture.bundle, true)
        let refusal = #expect(throws: ActivityAuthorizationError.self) { try f.request(pushType: .channel("dHdvLWNoYW5uZWw=")) }
        #expect(refusal?.code == "unsupported")
        #expect(refusal?.message == "broadcast channels need iOS 18.0; this device runs iOS 17.2")
        #expect(try f.request(pushType: .token).isEmpty == false)
    }

    /// Scheduled starts came with iOS 26: pending until their date.
    @Test func onlyIOS26AndLaterScheduleAStart() throws {
        for (version, schedules) in [(SystemVersion(18), false), (SystemVersion(26), true)] {
            var f = DeviceFixture(systemVersion: version)
            f.device.setForeground(DeviceFixture.bundle, true)
            let alert = ShownAlert(title: "Soon", body: "In an hour", sound: nil, at: f.t0)
            let scheduled = Result {
                try f.device.request(
                    bundleID: DeviceFixture.bundle, attributesType: "DeliveryAttributes", attributes: f.attributes, content: f.content("preparing"),
                    alert: alert, start: f.t0 + 3600, at: f.t0)
            }
            switch scheduled {
            case .success(let started): #expect(schedules && f.device.activity(started.activityID)?.state == .pending)
            case .failure(let error): #expect(!schedules && (error as? ActivityAuthorizationError)?.code == "unsupported")
            }
        }
    }

    /// "Update iOS" moves to the next release (17.x, 18, 26, 27, then minor versions), never back,
    /// and kills the push-to-start tokens on the way (spec §14.2).
    @Test func anUpdateInstallsTheNextReleaseAndKillsPushToStartTokens() throws {
        #expect(SystemVersion(17, 6).next == SystemVersion(18) && SystemVersion(18, 1).next == SystemVersion(26))
        #expect(SystemVersion(27).next == SystemVersion(27, 1))
        let fleet = DeviceFleet()
        try fleet.addDevice(id: "old", systemVersion: SystemVersion(17, 2))
        try fleet.perform(.updateOS(), on: "old")
        #expect(try fleet.device("old").systemVersion == SystemVersion(18))
        try fleet.perform(.updateOS(to: SystemVersion(27)), on: "old")
        #expect(try fleet.device("old").systemVersion == SystemVersion(27))
        try fleet.perform(.updateOS(to: SystemVersion(26)), on: "old")
        #expect(try fleet.device("old").systemVersion == SystemVersion(27))
        #expect(try fleet.device("old").log.last?.message == "iOS 26.0 is not newer than iOS 27.0: nothing to install")

        let token = try fleet.withDevice("old") { device, now in
            let events = device.install(SimulatedApp(bundleID: DeviceFixture.bundle, attributeTypes: [DeviceFixture.type]), at: now)
            return (device.apps[DeviceFixture.bundle]!.pushToStartTokens["DeliveryAttributes"]!, events)
        }
        try fleet.perform(.updateOS(), on: "old")
        #expect(try fleet.device("old").systemVersion == SystemVersion(27, 1))
        #expect(try fleet.device("old").wasKilledByUpdate(pushToStartToken: token))
    }

    /// A device kept by an earlier release has no version: it ran as iOS 26 and still does.
    @Test func aDeviceKeptWithoutAVersionRunsIOS26() throws {
        let device = SimulatedDevice(id: "kept", systemVersion: SystemVersion(18))
        var kept = try JSONValue(parsing: Array(try JSONEncoder().encode(device)))
        #expect(kept["installedVersion"] == .string("18.0"))
        kept.remove("installedVersion")
        #expect(try JSONDecoder().decode(SimulatedDevice.self, from: Data(kept.serialized)).systemVersion == SystemVersion(26))
    }
}
