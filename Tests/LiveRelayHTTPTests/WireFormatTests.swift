import Foundation
import LiveActivityKit
import LiveRelayHTTP
import LiveRelayStore
import Testing

@testable import LiveRelay

/// A scheduled request waits in the store as its own JSON and is read back when due: it must
/// come back exactly as it was accepted.
@Suite struct WireFormatTests {
    static let wire = RelayWire()

    static let requests: [ScheduledRequest] = [
        .start(
            StartRequest(
                attributesType: "DeliveryAttributes", attributes: json(#"{"orderNumber": 42, "ratio": 1.10}"#),
                contentState: json(#"{"status": "preparing", "etaMinutes": 30}"#),
                alert: AlertConfiguration(title: .localized(key: "ORDER_%@", arguments: ["42"]), body: "Preparing", sound: nil),
                staleDate: Date(timeIntervalSince1970: 1_800_000_000.25), relevanceScore: 0.5, audience: .users(["u1", "u2"]),
                channel: .create(storagePolicy: 0), priority: .auto, expiration: Date(timeIntervalSince1970: 1_800_000_600),
                at: Date(timeIntervalSince1970: 1_800_000_000.5))),
        .start(
            StartRequest(
                attributesType: "DeliveryAttributes", attributes: json("{}"), contentState: json("{}"),
                alert: AlertConfiguration(title: "T", body: "B", sound: .named("ding.caf")), audience: .devices(["d1"]),
                channel: .existing("dHJhY2stMQ=="), priority: .fixed(.powerConsiderate))),
        .start(
            StartRequest(
                attributesType: "DeliveryAttributes", attributes: json("{}"), contentState: json("{}"),
                alert: AlertConfiguration(title: "T", body: "B"),
                audience: .everyone)),
        .change(ChangeRequest(event: .update, contentState: json(#"{"etaMinutes": 1e2}"#), priority: .fixed(.immediate))),
        .change(
            ChangeRequest(
                event: .end, contentState: nil, alert: AlertConfiguration(title: "Delivered", body: "Enjoy"),
                staleDate: Date(timeIntervalSince1970: 1),
                relevanceScore: 100, dismissalDate: Date(timeIntervalSince1970: 1_800_003_600), priority: .auto,
                at: Date(timeIntervalSince1970: 253_402_300_799))),
    ]

    @Test(arguments: requests) func aRequestSurvivesItsWaitInTheStore(_ request: ScheduledRequest) throws {
        let stored = try request.stored()
        #expect(ScheduledRequest(stored: try JSONValue(parsing: stored.serialized)) == request)
        #expect(ScheduledRequest(stored: json(#"{"contentState": {"status": "soon"}}"#)) == nil, "the API's form is not this one")
    }

    @Test func anAcceptedRequestIsAnsweredAsTheAPIDocumentSays() {
        let start = Acceptance(key: "k", action: .start, requestID: "r", timestamp: 7, deliveries: 2, state: .active, channelIDs: [.sandbox: "c"])
        let answer = Self.wire.answer(.accepted(start))
        #expect(answer.status == 201)
        #expect(
            answer.body.serializedString
                == #"{"key":"k","action":"start","requestID":"r","timestamp":7,"deliveries":2,"state":"active","channelID":"c","channels":{"sandbox":"c"}}"#
        )
        // A key with a channel in each environment has no single channelID.
        let both = Acceptance(
            key: "k", action: .start, requestID: "r", timestamp: 7, deliveries: 2, state: .active, channelIDs: [.production: "p", .sandbox: "s"])
        #expect(
            Self.wire.answer(.accepted(both)).body.serializedString
                == #"{"key":"k","action":"start","requestID":"r","timestamp":7,"deliveries":2,"state":"active","channels":{"sandbox":"s","production":"p"}}"#
        )
        let end = Acceptance(key: "k", action: .end, requestID: "r", timestamp: 8, deliveries: 0, state: .ended)
        #expect(Self.wire.answer(.accepted(end)).status == 200)
    }
}
