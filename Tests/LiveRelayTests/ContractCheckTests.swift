import Foundation
import LiveActivityKit
import LiveRelayStore
import Testing

@testable import LiveRelay

/// The planners check requests against the app's contract before anything is written.
@Suite struct ContractCheckTests {
    static let contract = ActivityContract(
        attributesType: "DeliveryAttributes", attributes: SwiftStruct("DeliveryAttributes", [.init("orderNumber", .int)]),
        contentState: SwiftStruct("ContentState", [.init("status", .string), .init("arrives", .optional(.date))]))
    static let checked = ChangePlanner(
        governor: budgetGovernor, channelStorageWindow: storageWindow,
        contracts: AppContracts(readable: ["DeliveryAttributes": contract]))

    @Test func anUpdateTheWidgetWouldNotDecodeIsRefusedWithTheFieldAndTheDecodersReason() {
        let update = ChangeRequest(event: .update, contentState: .object([("status", .integer(3))]))
        #expect(
            throws: RelayError(.unprocessable, .doesNotDecode, message: "expected a string for String, found a number", field: "contentState.status")
        ) {
            try Self.checked.plan(update, ChangeSnapshot(activity: activity(), liveTokenCount: 1))
        }
        // Without a contract for the key's type, nothing is checked.
        #expect(throws: Never.self) { try ChangePlanner.standard.plan(update, ChangeSnapshot(activity: activity(), liveTokenCount: 1)) }
    }

    @Test func anEndWithoutContentIsCheckedWithTheContentItRepeats() {
        let end = ChangeRequest(event: .end, contentState: nil)
        #expect { try Self.checked.plan(end, ChangeSnapshot(activity: activity(content: .object([])), liveTokenCount: 1)) } throws: {
            ($0 as? RelayError)?.field == "contentState.status"
        }
    }

    @Test func aDateInUNIXSecondsDecodesButIsWarnedAbout() throws {
        let update = ChangeRequest(
            event: .update, contentState: .object([("status", .string("ok")), ("arrives", .integer(1_795_255_200))]), priority: .fixed(.immediate))
        let (_, acceptance) = try Self.checked.plan(update, ChangeSnapshot(activity: activity(), liveTokenCount: 1))
        #expect(acceptance.warnings.count == 1)
        #expect(
            acceptance.warnings.first?.hasPrefix("contentState.arrives: ActivityKit's default decoder reads a Date as seconds since 2001") == true)
        #expect(acceptance.warnings.first?.hasSuffix("send 816948000") == true)
    }

    @Test func aChangeThatReachesNoDeviceSaysSo() throws {
        let update = ChangeRequest(event: .update, contentState: content("late"), priority: .fixed(.immediate))
        let (_, acceptance) = try ChangePlanner.standard.plan(update, ChangeSnapshot(activity: activity(), liveTokenCount: 0))
        #expect(acceptance.deliveries == 0)
        #expect(acceptance.warnings == ["the key has no live update token: no device receives this update"])
    }

    @Test func aStartIsCheckedAttributesFirst() throws {
        var start = startRequest()
        start.attributes = .object([("orderNumber", .string("42"))])
        #expect { try StartPlanner.check(start, against: Self.contract) } throws: { ($0 as? RelayError)?.field == "attributes.orderNumber" }
        start.attributes = .object([("orderNumber", .integer(42))])
        #expect(try StartPlanner.check(start, against: Self.contract) == [])
        #expect(try StartPlanner.check(start, against: nil) == [])
    }

    @Test func aStartThatReachesNoDeviceSaysWhyTokensOfTheOtherEnvironmentIncluded() throws {
        let (_, none) = try StartPlanner.bothEnvironments.plan(startRequest(), tokens: [])
        #expect(none.warnings == ["no device in the audience has a live push-to-start token for DeliveryAttributes: the key is active, on no device"])
        let (_, elsewhere) = try StartPlanner.sandboxOnly.plan(startRequest(), tokens: [pushToStart("a", environment: .production)])
        #expect(
            elsewhere.warnings == [
                "1 device(s) of the audience have their token in APNs production, not reached: this server does not send to it",
                "no device in the audience has a live push-to-start token for DeliveryAttributes that can be reached: the key is active, on no device",
            ])
    }
}
