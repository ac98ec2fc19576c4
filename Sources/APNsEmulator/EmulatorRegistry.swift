import Crypto
import Foundation
import LiveActivityKit
import Synchronization

/// A provider-token signing key as APNs knows it: who owns it, where it is valid, what it may
/// push to.
public struct EmulatorKey: Sendable {
    public enum Scope: Sendable, Hashable {
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

    public init(keyID: String, teamID: String, publicKey: P256.Signing.PublicKey,
                environments: Set<PushEnvironment> = Set(PushEnvironment.allCases), scope: Scope = .team) {
        self.keyID = keyID
        self.teamID = teamID
        self.publicKey = publicKey
        self.environments = environments
        self.scope = scope
    }

    /// The public half of a `.p8` file.
    public init(p8PEM: String, keyID: String, teamID: String,
                environments: Set<PushEnvironment> = Set(PushEnvironment.allCases), scope: Scope = .team) throws {
        self.init(keyID: keyID, teamID: teamID, publicKey: try P256.Signing.PrivateKey(pemRepresentation: p8PEM).publicKey,
                  environments: environments, scope: scope)
    }

    func allows(bundleID: String) -> Bool {
        switch scope {
        case .team: true
        case .topics(let bundles): bundles.contains(bundleID)
        }
    }
}

/// A device token APNs routes: an activity's update token or a push-to-start token.
public struct EmulatorToken: Sendable, Hashable {
    public enum State: Sendable, Hashable {
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

    public init(hex: String, bundleID: String, environment: PushEnvironment, state: State = .active) {
        self.hex = hex.lowercased()
        self.bundleID = bundleID
        self.environment = environment
        self.state = state
    }
}

/// A broadcast channel.
public struct EmulatorChannel: Sendable, Hashable {
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
    }

    private let state = Mutex(State())

    public init() {}

    public func register(_ key: EmulatorKey) {
        state.withLock { $0.keys[key.keyID] = key }
    }

    public func register(_ token: EmulatorToken) {
        state.withLock { $0.tokens[token.hex] = token }
    }

    /// Marks a token's activity gone, so APNs answers `410 Unregistered` with `since`.
    public func unregister(token hex: String, since: Date) {
        setState(of: hex, to: .unregistered(since: since))
    }

    /// Changes a known token's state; `false` if the token is unknown.
    @discardableResult
    public func setState(of hex: String, to tokenState: EmulatorToken.State) -> Bool {
        state.withLock { state in
            guard state.tokens[hex.lowercased()] != nil else { return false }
            state.tokens[hex.lowercased()]?.state = tokenState
            return true
        }
    }

    /// Which apps have the broadcast capability; `nil` (the default) means every app.
    public func setBroadcastEnabled(for bundleIDs: Set<String>?) {
        state.withLock { $0.broadcastEnabled = bundleIDs }
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
        state.withLock { state in
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
        state.withLock { $0.channels.removeValue(forKey: id) != nil }
    }
}
