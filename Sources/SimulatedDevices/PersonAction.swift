import Foundation
import LiveActivityKit

/// What the person holding a simulated iPhone can do to it, as a value: the drawn iPhones' buttons
/// and the control API name the same actions.
public enum PersonAction: Sendable, Hashable {
    case lock
    case unlock
    case goOffline
    case goOnline
    /// Swipes one activity away.
    case dismiss(activityID: String)
    /// Settings › the app › Live Activities; off ends the app's activities.
    case setLiveActivities(bundleID: String, enabled: Bool)
    /// Moves the whole fleet's clock forward (stale dates, dismissals, the 8-hour limit).
    case advanceClock(seconds: TimeInterval)
    /// Installs an iOS update (to `to`, or the next release) that, as iOS 27.0 did (spec §14.2),
    /// silently kills every app's push-to-start tokens: APNs still answers 200 to a start, and
    /// nothing appears, until the app is issued a new token (Live Activities switched off and on).
    case updateOS(to: SystemVersion? = nil)
    /// Turns the iPhone to landscape or back to portrait.
    case setLandscape(Bool)
    /// Gets into a car with CarPlay, or out of it.
    case setCarPlay(Bool)
    /// Pairs a Mac on macOS 26 with the iPhone, or unpairs it.
    case setPairedMac(Bool)

    /// The longest step of the clock one action takes: a day, past every limit of spec §8.
    public static let longestClockStep: TimeInterval = 24 * 3600
}

extension DeviceFleet {
    /// Carries out what the person did on device `id`.
    public func perform(_ action: PersonAction, on id: String) throws {
        switch action {
        case .advanceClock(let seconds):
            guard contains(id) else { throw FleetError.unknownDevice(id) }
            clock.advance(by: min(max(0, seconds), PersonAction.longestClockStep))
            advanceAll()
        case .lock, .unlock, .goOffline, .goOnline, .dismiss, .setLiveActivities, .updateOS, .setLandscape, .setCarPlay, .setPairedMac:
            try withDevice(id) { device, now in ((), device.perform(action, at: now)) }
        }
    }
}

extension SimulatedDevice {
    /// Only what the person sees changes: no event.
    private mutating func change(_ edit: (inout Surroundings) -> Void) -> [DeviceEvent] {
        edit(&surroundings)
        return []
    }

    /// The device's part of a person's action (the clock is the fleet's).
    mutating func perform(_ action: PersonAction, at now: Date) -> [DeviceEvent] {
        switch action {
        case .lock: setLocked(true, at: now)
        case .unlock: setLocked(false, at: now)
        case .goOffline: setOnline(false, at: now)
        case .goOnline: setOnline(true, at: now)
        case .dismiss(let activityID): dismissByPerson(activityID: activityID, at: now)
        case .setLiveActivities(let bundleID, let enabled): setSettings(of: bundleID, liveActivitiesEnabled: enabled, at: now)
        case .updateOS(let version): updateOS(to: version, at: now)
        case .setLandscape(let landscape): change { $0.isLandscape = landscape }
        case .setCarPlay(let connected): change { $0.isInCarPlay = connected }
        case .setPairedMac(let paired): change { $0.hasPairedMac = paired }
        case .advanceClock: []
        }
    }
}
