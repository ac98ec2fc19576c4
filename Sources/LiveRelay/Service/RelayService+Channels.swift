import APNs
import Crypto
import Foundation
import LiveActivityKit
import LiveRelayStore
import Logging
import Synchronization

/// Broadcast channels.
extension RelayService {
    /// The client that sends for `app` in `environment`, or why there is none.
    func apnsClient(for app: AppRecord, in environment: PushEnvironment, field: String? = nil) throws(RelayError) -> APNsClient {
        do {
            if let client = try apns?.client(for: app, in: environment, open: openSigningKey) { return client }
        } catch {
            throw RelayError(.upstream, .apnsUnavailable, message: "\(app.bundleID)'s key cannot sign: \(error)", field: field)
        }
        throw RelayError(.upstream, .apnsUnavailable, message: "no APNs connection to \(environment.rawValue)", field: field)
    }

    func createChannel(for app: AppRecord, key: String, in environment: PushEnvironment, storagePolicy: Int) async throws -> String {
        guard let policy = MessageStoragePolicy(rawValue: storagePolicy) else {
            throw RelayError.invalid("channel.storagePolicy", "must be 0 or 1")
        }
        let apns = try apnsClient(for: app, in: environment, field: "channel")
        do {
            let id = try await apns.createChannel(bundleID: try BundleID(app.bundleID), storagePolicy: policy)
            try await store.saveChannel(
                ChannelRecord(
                    channelID: id, bundleID: app.bundleID, environment: environment, key: key, storagePolicy: storagePolicy, createdAt: now()))
            return id
        } catch let error as APNsError {
            throw RelayError(.upstream, .apnsRefused, message: "APNs refused to create the channel: \(error)", field: "channel")
        }
    }

    package func channels() async throws -> [ChannelRecord] {
        try await store.channels()
    }

    /// Deletes a live channel at APNs and marks it deleted.
    package func deleteChannel(_ id: String) async throws {
        guard let channel = try await store.channel(id: id), channel.deletedAt == nil else {
            throw RelayError.notFound("id", "no live channel \(id)")
        }
        let apns = try apnsClient(for: try await app(channel.bundleID), in: channel.environment)
        do {
            try await apns.deleteChannel(id, bundleID: try BundleID(channel.bundleID))
        } catch let error as APNsError where error.status == 404 || error.reason == .badChannelId || error.reason == .channelNotRegistered {
            // Already gone at APNs.
        } catch let error as APNsError {
            throw RelayError(.upstream, .apnsRefused, message: "APNs refused to delete the channel: \(error)")
        }
        try await store.markChannelDeleted(id: id, at: now())
        noteChange()
    }
}
