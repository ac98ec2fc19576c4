import Foundation
import LiveActivityKit
import SimulatedDevices
import Testing

/// The surfaces beyond the iPhone's own screen, each from the iOS that brought it (spec §14.1):
/// a landscape Dynamic Island (27), CarPlay (26), a paired Mac's menu bar (18), StandBy at 200%.
@Suite struct SurfacesTests {
    func device(_ version: SystemVersion, _ model: DeviceModel = .iPhoneWithDynamicIsland, around surroundings: Surroundings) throws -> (
        DeviceFixture, delivery: String, match: String
    ) {
        var f = DeviceFixture(model: model, systemVersion: version)
        f.device.surroundings = surroundings
        f.events += f.device.install(SimulatedApp(bundleID: PresentationTests.sports, attributeTypes: [PresentationTests.sportsType]), at: f.t0)
        let delivery = try PresentationTests().start(&f, order: 1, relevance: 50, at: 0)
        let match = try PresentationTests().startMatch(&f, at: 1)
        return (f, delivery, match)
    }

    @Test func aLandscapeDynamicIslandShowsActivitiesFromIOS27AtLimitedWidth() throws {
        for (version, shows) in [(SystemVersion(26), false), (SystemVersion(27), true)] {
            var (f, delivery, _) = try device(version, around: Surroundings(isLandscape: true))
            f.events += f.device.setLocked(false, at: f.t0 + 2)
            let shown = f.device.presentation(at: f.t0 + 2)
            #expect(shown.isLandscape)
            if shows {
                guard case .minimal(let attached, _)? = shown.dynamicIsland else {
                    Issue.record("iOS 27 shows the minimal presentations in landscape: \(String(describing: shown.dynamicIsland))")
                    continue
                }
                #expect(attached.activityID == delivery && shown.isDynamicIslandLimitedInWidth)
            } else {
                #expect(shown.dynamicIsland == .empty && !shown.isDynamicIslandLimitedInWidth, "before iOS 27 no activity in landscape")
            }
        }
        // Portrait: the full width, whatever the version.
        var (portrait, _, _) = try device(SystemVersion(27), around: Surroundings())
        portrait.events += portrait.device.setLocked(false, at: portrait.t0 + 2)
        #expect(!portrait.device.presentation(at: portrait.t0 + 2).isDynamicIslandLimitedInWidth)
    }

    @Test func carPlayShowsTheMostRelevantOngoingActivityFromIOS26() throws {
        let (old, _, _) = try device(SystemVersion(18), around: Surroundings(isInCarPlay: true))
        #expect(old.device.presentation(at: old.t0 + 2).carPlay == nil)
        var (f, delivery, match) = try device(SystemVersion(26), around: Surroundings(isInCarPlay: true))
        #expect(f.device.presentation(at: f.t0 + 2).carPlay?.activity?.activityID == delivery)
        f.events += f.device.end(activityID: delivery, content: nil, dismissalPolicy: .default, at: f.t0 + 3)
        #expect(f.device.presentation(at: f.t0 + 3).carPlay?.activity?.activityID == match, "an ended activity leaves the car")
        let (outside, _, _) = try device(SystemVersion(26), around: Surroundings())
        #expect(outside.device.presentation(at: outside.t0 + 2).carPlay == nil)
    }

    @Test func aPairedMacShowsTheOngoingActivitiesInItsMenuBarFromIOS18() throws {
        let (old, _, _) = try device(SystemVersion(17, 6), around: Surroundings(hasPairedMac: true))
        #expect(old.device.presentation(at: old.t0 + 2).macMenuBar == nil)
        let (f, delivery, match) = try device(SystemVersion(18), around: Surroundings(hasPairedMac: true))
        let bar = try #require(f.device.presentation(at: f.t0 + 2).macMenuBar)
        #expect(bar.activities.map(\.activityID) == [delivery, match] && bar.opened?.activityID == delivery)
    }

    @Test func standByShowsTheLockScreenViewAtTwiceItsSizeOnIPhonesOnly() throws {
        let (f, delivery, match) = try device(SystemVersion(27), around: Surroundings())
        let standBy = try #require(f.device.presentation(at: f.t0 + 2).standBy)
        #expect(standBy.main?.activityID == delivery && standBy.other?.activityID == match && standBy.scale == 2)
        let (pad, _, _) = try device(SystemVersion(27), .iPad, around: Surroundings(isInCarPlay: true, hasPairedMac: true))
        let shown = pad.device.presentation(at: pad.t0 + 2)
        #expect(shown.standBy == nil && shown.carPlay == nil && shown.macMenuBar == nil)
    }

    /// The person's surroundings change with a button, and a device kept without them is as it was.
    @Test func thePersonChangesTheSurroundings() throws {
        let fleet = DeviceFleet()
        try fleet.addDevice(id: "phone")
        try fleet.perform(.setLandscape(true), on: "phone")
        try fleet.perform(.setCarPlay(true), on: "phone")
        try fleet.perform(.setPairedMac(true), on: "phone")
        #expect(try fleet.device("phone").surroundings == Surroundings(isLandscape: true, isInCarPlay: true, hasPairedMac: true))
        var kept = try JSONValue(parsing: Array(try JSONEncoder().encode(try fleet.device("phone"))))
        kept.remove("keptSurroundings")
        #expect(try JSONDecoder().decode(SimulatedDevice.self, from: Data(kept.serialized)).surroundings == Surroundings())
    }
}
