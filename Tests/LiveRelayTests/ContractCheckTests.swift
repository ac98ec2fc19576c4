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
        contracts: AppContracts(readable: ["DeliveryAttributes": TypeContracts(byVersion: ["": contract])]))

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

/// A fleet on several app versions: each device is held to its own version's contract.
@Suite struct VersionedContractTests {
    static let one = ActivityContract(
        attributesType: "DeliveryAttributes", attributes: SwiftStruct("DeliveryAttributes", []),
        contentState: SwiftStruct("ContentState", [.init("status", .string), .init("eta", .int)]))
    static let two = ActivityContract(
        attributesType: "DeliveryAttributes", attributes: SwiftStruct("DeliveryAttributes", []),
        contentState: SwiftStruct("ContentState", [.init("status", .string), .init("eta", .optional(.int))]))
    static let contracts = TypeContracts(byVersion: ["1.0": one, "2.0": two], latest: "2.0")
    static let planner = ChangePlanner(
        governor: budgetGovernor, channelStorageWindow: storageWindow, contracts: AppContracts(readable: ["DeliveryAttributes": contracts]))

    static func token(_ device: String, _ version: String?) -> ActivityTokenRecord {
        var token = liveToken(device)
        token.appVersion = version
        return token
    }

    static func check(_ state: JSONValue, audience: [String?: Int]?, _ choice: VersionsChoice = .all) throws(RelayError) -> VersionCheck {
        try contracts.check(audience: audience, versions: choice) { contract throws(RelayError) in try ContractCheck.contentState(state, contract) }
    }

    @Test func aDeviceIsHeldToItsVersionsContractElseTheOneForAnyVersionElseTheLatest() {
        #expect(Self.contracts.contract(forDevicesOn: "1.0") == Self.one)
        #expect(Self.contracts.contract(forDevicesOn: nil) == Self.two, "a device that never said its version: the latest")
        #expect(Self.contracts.contract(forDevicesOn: "0.9") == nil, "a version without a contract is not guessed at")
        var withAny = Self.contracts
        withAny.byVersion[""] = Self.one
        #expect(withAny.contract(forDevicesOn: nil) == Self.one)
        #expect(withAny.contract(forDevicesOn: "0.9") == Self.one)
    }

    @Test func whatOneVersionCannotDecodeIsWarnedOfAndOnlyWhatNoneDecodesIsRefused() throws {
        let noETA = JSONValue.object([("status", .string("late"))])
        let warned = try Self.check(noETA, audience: ["1.0": 3, "2.0": 1])
        #expect(warned.refused == ["1.0"])
        #expect(
            warned.warnings == [#"app version 1.0 (3 devices) cannot decode it: contentState.eta: no value for the key "eta"; their devices drop it"#]
        )
        // Unknown audience: every version registered, without counts, the one for any version named so.
        #expect(try Self.check(noETA, audience: nil).warnings.first?.hasPrefix("app version 1.0 cannot decode it") == true)
        var withAny = Self.contracts
        withAny.byVersion[""] = Self.one
        let unknown = try withAny.check(audience: nil, versions: .all) { contract throws(RelayError) in
            try ContractCheck.contentState(noETA, contract)
        }
        #expect(unknown.warnings.first?.hasPrefix("the contract for any app version cannot decode it") == true, "\(unknown.warnings)")
        // Only version 1's devices: refused with its reason alone.
        #expect(throws: RelayError(.unprocessable, .doesNotDecode, message: #"no value for the key "eta""#, field: "contentState.eta")) {
            try Self.check(noETA, audience: ["1.0": 2])
        }
        let number = JSONValue.object([("status", .integer(5)), ("eta", .integer(1))])
        #expect {
            try Self.check(number, audience: ["1.0": 1, "2.0": 1, nil: 1])
        } throws: { error in
            (error as? RelayError)?.message.hasSuffix(
                "; no app version decodes it: devices that did not say their app version (1 device), app version 1.0 (1 device), app version 2.0 (1 device)"
            )
                == true
        }
        #expect(try Self.check(noETA, audience: ["2.0": 5]).warnings.isEmpty)
    }

    @Test func decodableSendsOnlyToDevicesWhoseVersionDecodesIt() throws {
        let update = ChangeRequest(event: .update, contentState: content("late"), priority: .fixed(.immediate), versions: .decodable)
        #expect(Self.planner.budget(for: update, at: t0) == .listed)
        let snapshot = ChangeSnapshot(
            activity: activity(), liveTokens: [Self.token("a", "1.0"), Self.token("b", "2.0"), Self.token("c", nil)], liveTokenCount: 3)
        let (plan, acceptance) = try Self.planner.plan(update, snapshot)
        #expect(plan.fanOut == nil)
        #expect(plan.deliveries.map(\.target.deviceID) == ["b", "c"])
        #expect(plan.deliveries.allSatisfy { $0.push.priority == .immediate && $0.push.priorityReason == "requested" })
        #expect(acceptance.deliveries == 2)
        var all = update
        all.versions = .all
        #expect(try Self.planner.plan(all, snapshot).0.deliveries.count == 3)
        // One contract, one version: the fan-out, as ever.
        #expect(ChangePlanner.standard.budget(for: all, at: t0) == .notCounted)

        // A channel's broadcast reaches every version: it cannot leave one out.
        let bound = ChangeSnapshot(activity: activity(channels: [channel("chan-1")]), channels: [channel("chan-1")])
        #expect(throws: RelayError.self) { try Self.planner.plan(update, bound) }
        #expect(throws: Never.self) { try Self.planner.plan(all, bound) }
    }

    @Test func aStartGoesToTheDecodingVersionsOfItsAudienceWhenAskedSo() throws {
        var start = startRequest()
        start.contentState = content("late")
        start.versions = .decodable
        var old = pushToStart("old")
        old.appVersion = "1.0"
        var new = pushToStart("new")
        new.appVersion = "2.0"
        let (plan, acceptance) = try StartPlanner.bothEnvironments.plan(start, tokens: [old, new], contracts: Self.contracts)
        #expect(plan.deliveries.map(\.target.deviceID) == ["new"])
        #expect(acceptance.warnings.first?.hasPrefix("app version 1.0 (1 device) cannot decode it") == true)
        #expect(throws: RelayError.self) { try StartPlanner.bothEnvironments.plan(start, tokens: [old], contracts: Self.contracts) }
    }
}
