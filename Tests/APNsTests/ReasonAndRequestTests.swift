import Foundation
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import Testing

@testable import APNs

@Suite struct ReasonTableTests {
    /// Apple's tables (spec §5.2 and §5.3): reason, status, and the advice Apple's guidance gives.
    static let apple: [(String, Int, APNsRetryAdvice)] = [
        ("BadCollapseId", 400, .fixRequest), ("BadDeviceToken", 400, .dropToken), ("BadExpirationDate", 400, .fixRequest),
        ("BadMessageId", 400, .fixRequest), ("BadPriority", 400, .fixRequest), ("BadTopic", 400, .fixRequest),
        ("DeviceTokenNotForTopic", 400, .dropToken), ("DuplicateHeaders", 400, .fixRequest), ("IdleTimeout", 400, .retryWithBackoff),
        ("InvalidPushType", 400, .fixRequest), ("MissingDeviceToken", 400, .fixRequest), ("MissingTopic", 400, .fixRequest),
        ("PayloadEmpty", 400, .fixRequest), ("TopicDisallowed", 400, .fixRequest), ("BadCertificate", 403, .fixRequest),
        ("BadCertificateEnvironment", 403, .fixRequest), ("ExpiredProviderToken", 403, .refreshTokenAndRetry),
        ("Forbidden", 403, .fixRequest), ("InvalidProviderToken", 403, .fixRequest), ("MissingProviderToken", 403, .fixRequest),
        ("UnrelatedKeyIdInToken", 403, .fixRequest), ("BadEnvironmentKeyIdInToken", 403, .fixRequest),
        ("BadEnvironmentKeyInToken", 403, .fixRequest), ("BadPath", 404, .fixRequest), ("MethodNotAllowed", 405, .fixRequest),
        ("ExpiredToken", 410, .dropToken), ("Unregistered", 410, .dropToken), ("PayloadTooLarge", 413, .fixRequest),
        ("TooManyProviderTokenUpdates", 429, .retryAfterDelay), ("TooManyRequests", 429, .retryAfterDelay),
        ("InternalServerError", 500, .retryWithBackoff), ("ServiceUnavailable", 503, .retryWithBackoff),
        ("Service Unavailable", 503, .retryWithBackoff), ("Shutdown", 503, .retryWithBackoff),
        ("FeatureNotEnabled", 400, .fixRequest), ("MissingChannelId", 400, .fixRequest), ("BadChannelId", 400, .fixRequest),
        ("ChannelNotRegistered", 400, .dropToken), ("BadRequestParams", 400, .fixRequest), ("BadRequestPayload", 400, .fixRequest),
        ("MissingPushType", 400, .fixRequest), ("CannotCreateChannelConfig", 400, .fixRequest), ("TopicMismatch", 403, .fixRequest),
    ]

    @Test func everyDocumentedReasonIsKnownWithItsStatusAndAdvice() {
        for (reason, status, advice) in Self.apple {
            let entry = APNsReason(reason).known
            #expect(entry?.status == status, "\(reason)")
            #expect(APNsReason(reason).advice(status: status) == advice, "\(reason)")
            #expect(entry?.meaning.isEmpty == false && entry?.whatToDo.isEmpty == false, "\(reason)")
        }
        #expect(Set(APNsReason.all.map(\.reason.rawValue)) == Set(Self.apple.map(\.0)))
    }

    @Test func reasonsHaveNamesAndCompareByTheirString() {
        #expect(APNsReason.unregistered == APNsReason("Unregistered"))
        #expect(APNsReason.unregistered.known?.status == 410)
        #expect(APNsReason.expiredProviderToken.known?.advice == .refreshTokenAndRetry)
        #expect(APNsReason.serviceUnavailableWithSpace.rawValue == "Service Unavailable")
        #expect(APNsReason.cannotCreateChannelConfig.isKnown)
    }

    @Test func neverRetryWhatAppleSaysNeverToRetry() {
        for reason in ["BadDeviceToken", "DeviceTokenNotForTopic", "Forbidden", "ExpiredToken", "Unregistered", "PayloadTooLarge"] {
            let advice = APNsReason(reason).advice(status: 400)
            #expect(advice == .dropToken || advice == .fixRequest, "\(reason)")
        }
    }

    @Test func anUnknownReasonIsKeptAndClassifiedByStatus() {
        #expect(!APNsReason("BrandNewReason").isKnown)
        #expect(APNsReason("BrandNewReason").advice(status: 500) == .retryWithBackoff)
        #expect(APNsReason("BrandNewReason").advice(status: 429) == .retryAfterDelay)
        #expect(APNsReason("BrandNewReason").advice(status: 410) == .dropToken)
        #expect(APNsReason("BrandNewReason").advice(status: 400) == .fixRequest)
    }

    @Test func errorAnswersAreParsedWithThe410Timestamp() {
        let body = ByteBuffer(string: #"{"reason":"Unregistered","timestamp":1795000000123}"#)
        let error = APNsError(APNsRawResponse(status: 410, headers: [("apns-id", "abc")], body: body))
        #expect(error.reason == APNsReason("Unregistered"))
        #expect(error.timestamp == Date(timeIntervalSince1970: 1_795_000_000.123))
        #expect(error.apnsID == "abc")
        #expect(error.advice == .dropToken)
        // The body APNs sends for an error reads back as the same error.
        let again = APNsError(APNsRawResponse(status: 410, headers: [("apns-id", "abc")], body: ByteBuffer(bytes: error.body)))
        #expect(again == error)
        // Not the documented JSON: still an error, classified by status.
        let odd = APNsError(APNsRawResponse(status: 502, headers: [], body: ByteBuffer(string: "<html>")))
        #expect(odd.reason == APNsReason("HTTP502"))
        #expect(odd.advice == .retryWithBackoff)
    }
}

@Suite struct RequestBuildingTests {
    let payload = try! LiveActivityPayload.update(
        content: ActivityContent(state: ["score": 2], staleDate: nil), timestamp: Date(timeIntervalSince1970: 1_795_000_000))

    @Test func devicePushHeaders() throws {
        let request = try APNsRequest.liveActivity(
            payload, to: liveActivityToken(), topic: BundleID("com.example.app"),
            options: PushOptions(
                priority: .powerConsiderate, expiration: .at(Date(timeIntervalSince1970: 1_795_003_600)),
                collapseID: CollapseID("score"), apnsID: APNsMessageID("123e4567-e89b-12d3-a456-426614174000")))
        let fields = request.headerFields(authority: "api.sandbox.push.apple.com", authorization: "JWT")
        #expect(
            fields.map { "\($0.name): \($0.value)" } == [
                ":method: POST", ":scheme: https", ":authority: api.sandbox.push.apple.com",
                ":path: /3/device/\(liveActivityToken().hex)", "authorization: bearer JWT",
                "apns-push-type: liveactivity", "apns-topic: com.example.app.push-type.liveactivity", "apns-priority: 5",
                "apns-expiration: 1795003600", "apns-collapse-id: score", "apns-id: 123e4567-e89b-12d3-a456-426614174000",
                "content-type: application/json",
            ])
        #expect(request.body == payload.json.serialized)
        // Values that change per request stay out of the HPACK table.
        #expect(fields.filter { !$0.indexable }.map(\.name) == [":path", "apns-expiration", "apns-collapse-id", "apns-id"])
    }

    @Test func priority1IsRefusedForDevicePushes() {
        let error = #expect(throws: LiveActivityValidationError.self) {
            try APNsRequest.liveActivity(payload, to: liveActivityToken(), topic: BundleID("com.example.app"), options: PushOptions(priority: .low))
        }
        #expect(error?.field == "apns-priority")
    }

    @Test func broadcastHeadersCarryChannelExpirationAndPriority() throws {
        let request = try APNsRequest.broadcast(
            payload, channelID: "dHN0LXNyY2gtY2hubA==", bundleID: BundleID("com.example.app"),
            options: BroadcastOptions(priority: .low, expiration: .immediately))
        #expect(request.path == "/4/broadcasts/apps/com.example.app")
        #expect(request.header("apns-channel-id") == "dHN0LXNyY2gtY2hubA==")
        #expect(request.header("apns-push-type") == "liveactivity")
        #expect(request.header("apns-expiration") == "0")
        #expect(request.header("apns-priority") == "1")
        #expect(request.header("apns-topic") == nil)
    }

    @Test func channelManagementRequests() throws {
        let bundle = try BundleID("com.example.app")
        let create = APNsRequest.createChannel(bundleID: bundle, storagePolicy: .mostRecentMessageStored)
        #expect(create.service == .channelManagement)
        #expect(create.method == .post && create.path == "/1/apps/com.example.app/channels")
        #expect(create.body == Array(#"{"message-storage-policy":1,"push-type":"LiveActivity"}"#.utf8))
        let read = try APNsRequest.readChannel("dHN0", bundleID: bundle)
        #expect(read.method == .get && read.header("apns-channel-id") == "dHN0" && read.body == nil)
        let delete = try APNsRequest.deleteChannel("dHN0", bundleID: bundle)
        #expect(delete.method == .delete && delete.path == "/1/apps/com.example.app/channels")
        #expect(APNsRequest.listChannels(bundleID: bundle).path == "/1/apps/com.example.app/all-channels")
        #expect(throws: LiveActivityValidationError.self) { try APNsRequest.readChannel("not base64!", bundleID: bundle) }
    }

    @Test func environmentsUseApplesHostsAndPorts() {
        #expect(APNsHosts.production.push.authority == "api.push.apple.com")
        #expect(APNsHosts.sandbox(port: 2197).push.authority == "api.sandbox.push.apple.com:2197")
        #expect(APNsHosts.production.channelManagement.authority == "api-manage-broadcast.push.apple.com:2196")
        #expect(APNsHosts.sandbox.channelManagement.authority == "api-manage-broadcast.sandbox.push.apple.com:2195")
    }
}
