import Crypto
import Foundation
import LiveActivityKit
import Synchronization

/// A provider-token signing key as APNs knows it: who owns it, where it is valid, what it may
/// push to.
public struct EmulatorKey: Sendable {
    public enum Scope: Sendable, Hashable, Codable {
        /// Every topic of the team.
        case team
        /// Only these bundle ids.
        case topics(Set<String>)
    }

    public var keyID: String
    public var teamID: String
    public var publicKey: P256.Signing.PublicKey
    /// The environments the key works in (old keys work in both).
    public var environments: Set<PushEnvironment>
    public var scope: Scope

    public init(
        keyID: String, teamID: String, publicKey: P256.Signing.PublicKey,
        environments: Set<PushEnvironment> = Set(PushEnvironment.allCases), scope: Scope = .team
    ) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKey = publicKey
        self.environments = environments
        self.scope = scope
    }

    /// The public half of a `.p8` file.
    public init(
        p8PEM: String, keyID: String, teamID: String,
        environments: Set<PushEnvironment> = Set(PushEnvironment.allCases), scope: Scope = .team
    ) throws {
        self.init(
            keyID: keyID, teamID: teamID, publicKey: try P256.Signing.PrivateKey(pemRepresentation: p8PEM).publicKey,
            environments: environments, scope: scope)
    }

    func allows(bundleID: String) -> Bool {
        switch scope {
        case .team: true
        case .topics(let bundles): bundles.contains(bundleID)
        }
    }
}

/// A device token APNs routes: an activity's update token, a push-to-start token, an app's
/// widget token or a control's token.
public struct EmulatorToken: Sendable, Hashable, Codable {
    public enum State: Sendable, Hashable, Codable {
        case active
        /// The activity is gone: `410 Unregistered` with this time.
        case unregistered(since: Date)
        /// `410 ExpiredToken`.
        case expired
    }

    public var hex: String
    public var bundleID: String
    public var environment: PushEnvironment
    public var state: State
    /// The push type the token serves: a push of another type is `DeviceTokenNotForTopic`.
    public var pushType: APNsPushType

    public init(hex: String, bundleID: String, environment: PushEnvironment, state: State = .active, pushType: APNsPushType = .liveActivity) {
        self.hex = hex.lowercased()
        self.bundleID = bundleID
        self.environment = environment
        self.state = state
        self.pushType = pushType
    }

    private enum CodingKeys: String, CodingKey { case hex, bundleID, environment, state, pushType }

    /// A state file from before widget tokens holds activity tokens only.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            hex: try container.decode(String.self, forKey: .hex), bundleID: try container.decode(String.self, forKey: .bundleID),
            environment: try container.decode(PushEnvironment.self, forKey: .environment),
            state: try container.decode(State.self, forKey: .state),
            pushType: try container.decodeIfPresent(APNsPushType.self, forKey: .pushType) ?? .liveActivity)
    }
}

/// A broadcast channel.
public struct EmulatorChannel: Sendable, Hashable, Codable {
    public var id: String
    public var bundleID: String
    public var environment: PushEnvironment
    public var storagePolicy: Int
}

/// What the emulator knows: keys, tokens, channels. Shared by every connection.
public final class EmulatorRegistry: Sendable {
    /// Apple's limit per app and environment.
    public static let channelLimit = 10_000

    private struct State {
        var keys: [String: EmulatorKey] = [:]
        var tokens: [String: EmulatorToken] = [:]
        var channels: [String: EmulatorChannel] = [:]
        var issuedChannelIDs: Set<String> = []
        var broadcastEnabled: Set<String>? = nil
        /// Moves on with every change.
        var revision = 0
    }

    private let state = Mutex(State())

    public init() {}

    /// Every change goes through here, so that `revision` moves on with each.
    private func change<T>(_ body: (inout State) -> T) -> T {
        state.withLock { state in
            state.revision += 1
            return body(&state)
        }
    }

    public func register(_ key: EmulatorKey) {
        change { $0.keys[key.keyID] = key }
    }

    public func register(_ token: EmulatorToken) {
        change { $0.tokens[token.hex] = token }
    }

    /// Marks a token's activity gone, so APNs answers `410 Unregistered` with `since`.
    public func unregister(token hex: String, since: Date) {
        setState(of: hex, to: .unregistered(since: since))
    }

    /// Changes a known token's state; `false` if the token is unknown.
    @discardableResult
    public func setState(of hex: String, to tokenState: EmulatorToken.State) -> Bool {
        change { state in
            guard state.tokens[hex.lowercased()] != nil else { return false }
            state.tokens[hex.lowercased()]?.state = tokenState
            return true
        }
    }

    /// Which apps have the broadcast capability; `nil` (the default) means every app.
    public func setBroadcastEnabled(for bundleIDs: Set<String>?) {
        change { $0.broadcastEnabled = bundleIDs }
    }

    func key(_ keyID: String) -> EmulatorKey? { state.withLock { $0.keys[keyID] } }
    public func token(_ hex: String) -> EmulatorToken? { state.withLock { $0.tokens[hex.lowercased()] } }

    /// The registered token, looked up as it is (a `DeviceToken` is lowercase already).
    func token(_ token: DeviceToken) -> EmulatorToken? { state.withLock { $0.tokens[token.hex] } }

    /// Every registered key, by key id.
    public var keys: [EmulatorKey] { state.withLock { $0.keys.values.sorted { $0.keyID < $1.keyID } } }

    /// The apps with the broadcast capability; `nil` means every app.
    public var broadcastEnabledApps: Set<String>? { state.withLock { $0.broadcastEnabled } }

    func broadcastEnabled(_ bundleID: String) -> Bool {
        state.withLock { $0.broadcastEnabled?.contains(bundleID) ?? true }
    }

    public func channel(_ id: String) -> EmulatorChannel? { state.withLock { $0.channels[id] } }

    func channels(of bundleID: String, in environment: PushEnvironment) -> [String] {
        allChannels(of: bundleID).filter { $0.environment == environment }.map(\.id)
    }

    /// Every channel, or one app's, ordered by id.
    public func allChannels(of bundleID: String? = nil) -> [EmulatorChannel] {
        state.withLock { state in
            state.channels.values.filter { bundleID == nil || $0.bundleID == bundleID }.sorted { $0.id < $1.id }
        }
    }

    /// A new channel with a random base64 id never issued before, or `nil` at the 10,000 limit.
    func createChannel(bundleID: String, environment: PushEnvironment, storagePolicy: Int) -> EmulatorChannel? {
        change { state in
            let count = state.channels.values.count { $0.bundleID == bundleID && $0.environment == environment }
            guard count < Self.channelLimit else { return nil }
            var id: String
            repeat {
                id = Data((0..<16).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
            } while state.issuedChannelIDs.contains(id)
            state.issuedChannelIDs.insert(id)
            let channel = EmulatorChannel(id: id, bundleID: bundleID, environment: environment, storagePolicy: storagePolicy)
            state.channels[id] = channel
            return channel
        }
    }

    func deleteChannel(_ id: String) -> Bool {
        change { $0.channels.removeValue(forKey: id) != nil }
    }

    // MARK: Kept across restarts

    /// What APNs knows, kept with the devices so that a restart routes and refuses as before.
    public struct Snapshot: Sendable, Codable {
        var keys: [EmulatorKey]
        var tokens: [EmulatorToken]
        var channels: [EmulatorChannel]
        var issuedChannelIDs: Set<String>
        var broadcastEnabled: Set<String>?
    }

    public var revision: Int { state.withLock { $0.revision } }

    public var snapshot: Snapshot {
        state.withLock { state in
            Snapshot(
                keys: state.keys.values.sorted { $0.keyID < $1.keyID }, tokens: state.tokens.values.sorted { $0.hex < $1.hex },
                channels: state.channels.values.sorted { $0.id < $1.id }, issuedChannelIDs: state.issuedChannelIDs,
                broadcastEnabled: state.broadcastEnabled)
        }
    }

    /// Adds what `snapshot` holds; what is registered already (a key registered again at start) wins.
    public func restore(_ snapshot: Snapshot) {
        change { state in
            for key in snapshot.keys where state.keys[key.keyID] == nil { state.keys[key.keyID] = key }
            for token in snapshot.tokens where state.tokens[token.hex] == nil { state.tokens[token.hex] = token }
            for channel in snapshot.channels where state.channels[channel.id] == nil { state.channels[channel.id] = channel }
            state.issuedChannelIDs.formUnion(snapshot.issuedChannelIDs)
            if state.broadcastEnabled == nil { state.broadcastEnabled = snapshot.broadcastEnabled }
        }
    }
}

/// A key is kept with its public half only, as APNs keeps it.
extension EmulatorKey: Codable {
    private enum CodingKeys: String, CodingKey { case keyID, teamID, publicKey, environments, scope }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let raw = try container.decode(Data.self, forKey: .publicKey)
        let publicKey: P256.Signing.PublicKey
        do {
            publicKey = try P256.Signing.PublicKey(rawRepresentation: raw)
        } catch {
            throw DecodingError.dataCorruptedError(forKey: .publicKey, in: container, debugDescription: "not a P-256 public key: \(error)")
        }
        self.init(
            keyID: try container.decode(String.self, forKey: .keyID), teamID: try container.decode(String.self, forKey: .teamID),
            publicKey: publicKey, environments: try container.decode(Set<PushEnvironment>.self, forKey: .environments),
            scope: try container.decode(Scope.self, forKey: .scope))
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(keyID, forKey: .keyID)
        try container.encode(teamID, forKey: .teamID)
        try container.encode(publicKey.rawRepresentation, forKey: .publicKey)
        try container.encode(environments, forKey: .environments)
        try container.encode(scope, forKey: .scope)
    }
}
