import Foundation
import LiveActivityKit
import LiveRelayStore

@testable import LiveRelay

let t0 = Date(timeIntervalSince1970: 1_800_000_000)
let budget = BudgetPolicy(priority10PerHour: 12, frequentPriority10PerHour: 120)
let budgetGovernor = PriorityGovernor(policy: budget)
let storageWindow: TimeInterval = 8 * 3600

func content(_ status: String) -> JSONValue { .object([("status", .string(status))]) }

/// The app the planners' keys belong to.
let plannedApp = "com.example.delivery"

func pushToStart(
    _ device: String, environment: PushEnvironment = .sandbox, frequent: Bool = false, iOS version: SystemVersion? = nil
) -> PushToStartTokenRecord {
    PushToStartTokenRecord(
        bundleID: plannedApp, deviceID: device, attributesType: "DeliveryAttributes", token: "pts-\(device)", frequentPushesEnabled: frequent,
        environment: environment, updatedAt: t0, systemVersion: version)
}

func liveToken(_ device: String, frequent: Bool = false, environment: PushEnvironment = .sandbox) -> ActivityTokenRecord {
    ActivityTokenRecord(
        bundleID: plannedApp, key: "order-42", deviceID: device, token: "tok-\(device)", frequentPushesEnabled: frequent, environment: environment,
        registeredAt: t0)
}

/// A channel of the key `order-42`.
func channel(_ id: String, in environment: PushEnvironment = .sandbox, storagePolicy: Int = 1) -> ChannelRecord {
    ChannelRecord(channelID: id, bundleID: plannedApp, environment: environment, key: "order-42", storagePolicy: storagePolicy, createdAt: t0)
}

func activity(
    channels: [ChannelRecord] = [], state: ActivityKeyState = .active, content: JSONValue? = content("preparing"),
    lastTimestamp: Int64 = 1_799_999_000
) -> ActivityRecord {
    ActivityRecord(
        bundleID: plannedApp, key: "order-42", attributesType: "DeliveryAttributes", state: state,
        channelIDs: Dictionary(uniqueKeysWithValues: channels.map { ($0.environment, $0.channelID) }), contentState: content,
        startedAt: t0 - 1000, endedAt: state == .ended ? t0 - 10 : nil, endReason: state == .ended ? .ended : nil,
        lastTimestamp: lastTimestamp)
}

func startRequest(priority: PriorityChoice = .fixed(.immediate), expiration: Date? = nil, channel: UpdateChannelChoice? = nil) -> StartRequest {
    StartRequest(
        attributesType: "DeliveryAttributes", attributes: .object([("orderNumber", .integer(42))]), contentState: content("preparing"),
        alert: AlertConfiguration(title: "Order 42", body: "Preparing"), audience: .everyone, channel: channel, priority: priority,
        expiration: expiration)
}

extension StartPlanner {
    static let bothEnvironments = StartPlanner(environments: [.sandbox, .production], governor: budgetGovernor)
    static let sandboxOnly = StartPlanner(environments: [.sandbox], governor: budgetGovernor)

    func plan(
        _ request: StartRequest, tokens: [PushToStartTokenRecord], channelIDs: [PushEnvironment: String] = [:],
        contracts: TypeContracts = TypeContracts()
    ) throws -> (StartPlan, Acceptance) {
        let payloads = try StartPlanner.payloads(request, channelIDs: channelIDs, at: t0)
        return try plan(
            app: plannedApp, key: "order-42", request, payloads: payloads, channelIDs: channelIDs, tokens: tokens, contracts: contracts, at: t0,
            requestID: "req-1")
    }
}

extension ChangePlanner {
    static let standard = ChangePlanner(governor: budgetGovernor, channelStorageWindow: storageWindow, contracts: AppContracts())

    func plan(_ request: ChangeRequest, _ snapshot: ChangeSnapshot) throws -> (ChangePlan, Acceptance) {
        try plan(key: "order-42", request, snapshot: snapshot, at: t0, requestID: "req-2")
    }
}

/// The `aps` dictionary of an encoded payload.
func aps(_ bytes: [UInt8]) throws -> JSONValue {
    try LiveActivityPayload(parsing: bytes).aps ?? .null
}
