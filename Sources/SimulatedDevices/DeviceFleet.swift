import Foundation
import LiveActivityKit
import Synchronization

/// The emulator's time: the wall clock plus however far it has been moved forward, so that
/// hours of a Live Activity's life pass in a test in no time.
public final class VirtualClock: Sendable {
    private let offset = Mutex<TimeInterval>(0)
    private let wallClock: @Sendable () -> Date

    public init(wallClock: @escaping @Sendable () -> Date = { Date() }) {
        self.wallClock = wallClock
    }

    public var now: Date { wallClock() + offset.withLock { $0 } }

    /// How far time has been moved forward.
    public var advanced: TimeInterval { offset.withLock { $0 } }

    /// Moves time forward (never back).
    public func advance(by interval: TimeInterval) {
        offset.withLock { $0 += max(0, interval) }
    }

    public var function: @Sendable () -> Date { { [self] in now } }

    /// Returns once this clock has moved `duration` on, by the wall clock or by `advance`,
    /// whichever comes first (a simulated app's pause between attempts, say); looks every tenth
    /// of a second. Throws `CancellationError` when the task is cancelled.
    public func sleep(for duration: Duration) async throws {
        let (seconds, attoseconds) = duration.components
        let until = now + TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
        while true {
            let left = until.timeIntervalSince(now)
            guard left > 0 else { return }
            try await Task.sleep(for: .milliseconds(Int(min(left, 0.1) * 1_000) + 1))
        }
    }
}

/// Every simulated device, reachable by id and by the tokens they hold; the device side of the
/// emulator. Thread-safe; operations on one device run under one lock, and what they cause is
/// reported through `onEvents` after the lock is released.
public final class DeviceFleet: Sendable {
    private struct State {
        /// Devices in an array, found through `indices`: a dictionary of 100,000 large values
        /// would reserve room for more than twice as many.
        var devices: [SimulatedDevice] = []
        var indices: [String: Int] = [:]
        /// Which device holds each live token.
        var tokenOwners: [String: String] = [:]
        /// The most recent message of each Most-Recent-Message-Stored channel, for devices that
        /// were offline when it was sent.
        var storedBroadcasts: [String: StoredBroadcast] = [:]
        /// When time next changes each device, so that applying time visits only those.
        var deadlines = DeadlineQueue()
        /// Moves on whenever a device or a stored message may have changed.
        var revision = 0
    }

    struct StoredBroadcast {
        var payload: JSONValue
        var priority: Int
        var expiresAt: Date
    }

    /// How long a policy-1 channel keeps its most recent message (spec §9).
    public static let channelStorageLimit: TimeInterval = 8 * 3600

    public let clock: VirtualClock
    public let settings: DeviceRuntimeSettings
    /// Everything that happens on the devices, in order: ActivityKit's sequences are read from it.
    public let events: FleetEventLog
    private let sharedSettings: SharedSettings
    private let state = Mutex(State())
    private let onEvents: @Sendable (_ deviceID: String, _ events: [DeviceEvent]) -> Void

    public init(
        clock: VirtualClock = VirtualClock(), settings: DeviceRuntimeSettings = .init(), eventLogCapacity: Int = 10_000,
        onEvents: @escaping @Sendable (_ deviceID: String, _ events: [DeviceEvent]) -> Void = { _, _ in }
    ) {
        self.clock = clock
        self.settings = settings
        self.sharedSettings = SharedSettings(settings)
        self.events = FleetEventLog(capacity: eventLogCapacity)
        self.onEvents = onEvents
    }

    public enum FleetError: Error, Equatable, CustomStringConvertible {
        case unknownDevice(String)
        case deviceExists(String)

        public var description: String {
            switch self {
            case .unknownDevice(let id): "no device with id \(id)"
            case .deviceExists(let id): "a device with id \(id) exists already"
            }
        }
    }

    /// Adds a device (online, locked, no apps), with the fleet's settings unless given.
    public func addDevice(
        id: String, model: DeviceModel = .iPhoneWithDynamicIsland, hasPairedWatch: Bool = false, systemVersion: SystemVersion = .newDevice,
        settings: DeviceRuntimeSettings? = nil
    ) throws(FleetError) {
        try state.withLock { (state: inout State) throws(FleetError) in
            guard state.indices[id] == nil else { throw .deviceExists(id) }
            state.revision += 1
            state.indices[id] = state.devices.count
            state.devices.append(
                SimulatedDevice(
                    id: id, model: model, hasPairedWatch: hasPairedWatch, systemVersion: systemVersion,
                    settings: settings.map(SharedSettings.init) ?? sharedSettings, seed: nil))
        }
    }

    public var deviceIDs: [String] { state.withLock { $0.indices.keys.sorted() } }
    /// Moves on whenever a device may have changed (any operation on one, even a read, which
    /// applies time): whoever keeps snapshots compares it to know when to make one.
    public var revision: Int { state.withLock { $0.revision } }
    public var count: Int { state.withLock { $0.devices.count } }
    public func contains(_ id: String) -> Bool { state.withLock { $0.indices[id] != nil } }

    /// The devices showing an activity bound to one of `channels` (one that listens to its channel
    /// reports no update token, so the server knows it only this way).
    public func devices(showingActivitiesOn channels: Set<String>) -> [String] {
        guard !channels.isEmpty else { return [] }
        return deviceIDs.filter { id in
            (try? device(id).activities.contains { activity in
                guard case .channel(let channel) = activity.pushType else { return false }
                return channels.contains(channel) && ![.ended, .dismissed].contains(activity.state)
            }) ?? false
        }
    }

    /// A copy of a device as it is now (time applied).
    public func device(_ id: String) throws -> SimulatedDevice {
        try withDevice(id) { device, _ in (device, []) }
    }

    /// Runs one operation on a device at the current time, after bringing it up to date.
    @discardableResult
    public func withDevice<T>(
        _ id: String, _ operation: (inout SimulatedDevice, Date) throws -> (T, [DeviceEvent])
    ) throws -> T {
        let now = clock.now
        let (result, events) = try state.withLock { state in
            // Swapped out so that it is uniquely referenced: mutating its arrays then copies nothing.
            guard let index = state.indices[id] else { throw FleetError.unknownDevice(id) }
            state.revision += 1
            var device = SimulatedDevice(id: "", model: .iPhone, hasPairedWatch: false, systemVersion: .newDevice, settings: sharedSettings, seed: 1)
            swap(&device, &state.devices[index])
            defer { swap(&device, &state.devices[index]) }
            // What time did is recorded before the operation runs (and stays recorded if it
            // throws), so that the operation sees a log that matches the device.
            var events = device.advance(to: now)
            record(events, of: id, in: &state, at: now)
            defer { state.deadlines.schedule(id, at: device.nextDeadline) }
            let wasOnline = device.isOnline
            var (result, more) = try operation(&device, now)
            if !wasOnline, device.isOnline { more += deliverStoredBroadcasts(to: &device, state: state, at: now) }
            record(more, of: id, in: &state, at: now)
            events += more
            return (result, events)
        }
        if !events.isEmpty { onEvents(id, events) }
        return result
    }

    /// A push APNs accepted for `token`, made only if a device holds the token (tokens
    /// registered by hand have no device); `false` if none does.
    @discardableResult
    public func deliver(to token: String, _ push: () -> DevicePush) -> Bool {
        guard let owner = state.withLock({ $0.tokenOwners[token.lowercased()] }) else { return false }
        let push = push()
        _ = try? withDevice(owner) { device, now in ((), device.receive(push, at: now)) }
        return true
    }

    /// A broadcast APNs accepted: every device with an activity on the channel takes it; with
    /// storage policy 1 it is kept (up to 8 h, or its expiration) for devices now offline.
    public func broadcast(channelID: String, payload: JSONValue, priority: Int, storagePolicy: Int, expiration: Date?) {
        let now = clock.now
        if storagePolicy == 1 {
            let expiresAt = min(expiration ?? .distantFuture, now + Self.channelStorageLimit)
            state.withLock { state in
                state.storedBroadcasts[channelID] = StoredBroadcast(payload: payload, priority: priority, expiresAt: expiresAt)
                state.revision += 1
            }
        }
        let subscribers = state.withLock { state in
            state.devices.filter { device in
                device.isOnline && device.activities.contains { $0.pushType == .channel(channelID) && $0.lifecycle.isOngoing }
            }.map(\.id)
        }
        for id in subscribers {
            _ = try? withDevice(id) { device, now in
                ((), device.receiveBroadcast(channelID: channelID, payload: payload, priority: priority, at: now))
            }
        }
    }

    /// Applies time to every device it concerns now (scheduled starts, stale dates, limits,
    /// tokens due, deferred pushes); the others are not visited.
    public func advanceAll() {
        let now = clock.now
        for id in state.withLock({ $0.deadlines.popDue(at: now) }) { _ = try? withDevice(id) { _, _ in ((), []) } }
    }

    /// What the device shows now.
    public func presentation(of id: String) throws -> DevicePresentation {
        try withDevice(id) { device, now in (device.presentation(at: now), []) }
    }

    private func deliverStoredBroadcasts(to device: inout SimulatedDevice, state: State, at now: Date) -> [DeviceEvent] {
        var events: [DeviceEvent] = []
        let channels = Set(
            device.activities.compactMap { activity -> String? in
                guard case .channel(let id) = activity.pushType, activity.lifecycle.isOngoing else { return nil }
                return id
            })
        for channel in channels.sorted() {
            guard let stored = state.storedBroadcasts[channel], stored.expiresAt > now else { continue }
            events += device.receiveBroadcast(channelID: channel, payload: stored.payload, priority: stored.priority, at: now)
        }
        return events
    }

    /// Indexes the tokens and logs the events; under the lock, so that the log's order is the
    /// order things happened in.
    private func record(_ events: [DeviceEvent], of deviceID: String, in state: inout State, at now: Date) {
        guard !events.isEmpty else { return }
        for event in events {
            switch event {
            case .tokenIssued(let token, _, _, _): state.tokenOwners[token] = deviceID
            case .tokenRetired(let token, _, _): state.tokenOwners[token] = nil
            default: break
            }
        }
        self.events.append(events, deviceID: deviceID, at: now)
    }

    // MARK: Kept across restarts

    /// The fleet as it is now (time applied to no device: what time does next is kept as deadlines).
    public var snapshot: FleetSnapshot {
        state.withLock { state in
            FleetSnapshot(
                version: FleetSnapshot.currentVersion, clockOffset: clock.advanced, devices: state.devices,
                storedBroadcasts: state.storedBroadcasts)
        }
    }

    /// Puts back the devices of `snapshot` in a fleet that has none, with the time it had reached;
    /// what time did while nothing ran happens at the next operation or `advanceAll()`.
    public func restore(_ snapshot: FleetSnapshot) throws {
        guard snapshot.version == FleetSnapshot.currentVersion else {
            throw SnapshotError("the devices were kept by another version (\(snapshot.version); this one reads \(FleetSnapshot.currentVersion))")
        }
        try state.withLock { state in
            guard state.devices.isEmpty else { throw SnapshotError("devices can only be restored into an empty fleet") }
            for var device in snapshot.devices {
                device.share(sharedSettings)
                state.indices[device.id] = state.devices.count
                for token in device.heldTokens { state.tokenOwners[token] = device.id }
                state.deadlines.schedule(device.id, at: device.nextDeadline)
                state.devices.append(device)
            }
            state.storedBroadcasts = snapshot.storedBroadcasts
            state.revision += 1
        }
        clock.advance(by: snapshot.clockOffset - clock.advanced)
    }
}
