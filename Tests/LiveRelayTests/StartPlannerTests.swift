import Foundation
import LiveActivityKit
import LiveRelayStore
import Testing

@testable import LiveRelay

@Suite struct StartPlannerTests {
    @Test func eachTokenIsSentInItsOwnEnvironment() throws {
        let tokens = [pushToStart("a"), pushToStart("b", environment: .production), pushToStart("c")]
        let (plan, acceptance) = try StartPlanner.bothEnvironments.plan(startRequest(), tokens: tokens)
        #expect(plan.deliveries.map(\.target) == tokens.map { .pushToStartToken(deviceID: $0.deviceID, token: $0.token) })
        #expect(plan.deliveries.map(\.environment) == [.sandbox, .production, .sandbox])
        #expect(plan.payloads.count == 1, "one payload serves both environments")
        #expect(
            acceptance == Acceptance(key: "order-42", action: .start, requestID: "req-1", timestamp: 1_800_000_000, deliveries: 3, state: .active))
        #expect(plan.acceptance == acceptance)
    }

    @Test func tokensOfAnEnvironmentTheServerDoesNotSendToAreLeftOutAndSaidSo() throws {
        let tokens = [pushToStart("a"), pushToStart("b", environment: .production), pushToStart("c")]
        let (plan, acceptance) = try StartPlanner.sandboxOnly.plan(startRequest(), tokens: tokens)
        #expect(
            plan.deliveries.map(\.target) == [.pushToStartToken(deviceID: "a", token: "pts-a"), .pushToStartToken(deviceID: "c", token: "pts-c")])
        #expect(acceptance.deliveries == 2)
        #expect(
            acceptance.warnings == ["1 device(s) of the audience have their token in APNs production, not reached: this server does not send to it"])
    }

    /// A push-to-start always alerts, so `auto` never spends the budget on it.
    @Test(arguments: [
        (PriorityChoice.fixed(.immediate), 10, "requested"), (.fixed(.powerConsiderate), 5, "requested"), (.auto, 10, "alert"),
    ])
    func priority(choice: PriorityChoice, priority: Int, reason: String) throws {
        let (plan, _) = try StartPlanner.bothEnvironments.plan(startRequest(priority: choice), tokens: [pushToStart("a", frequent: true)])
        #expect(plan.deliveries.map(\.push.priority.rawValue) == [priority])
        #expect(plan.deliveries.map(\.push.priorityReason) == [reason])
    }

    @Test func theKeyStartsWithTheRequestsContentAndEveryPushCarriesTheTimestampAndExpiration() throws {
        let (plan, _) = try StartPlanner.bothEnvironments.plan(startRequest(expiration: t0 + 600), tokens: [pushToStart("a")])
        #expect(plan.activity.contentState == content("preparing"))
        #expect(plan.activity.lastTimestamp == 1_800_000_000)
        #expect(plan.activity.state == .active)
        #expect(plan.deliveries.first?.push.expiration == 1_800_000_600)
        #expect(plan.deliveries.first?.push.timestamp == 1_800_000_000)
        let start = try aps(plan.payloads[0])
        #expect(start["event"] == .string("start"))
        #expect(start["input-push-token"] == .integer(1))
    }

    @Test func aChannelBoundStartNamesItsChannelInThePayloadAndTheAnswer() throws {
        let channels: [PushEnvironment: String] = [.sandbox: "dHJhY2stMQ=="]
        let (plan, acceptance) = try StartPlanner.bothEnvironments.plan(startRequest(), tokens: [pushToStart("a")], channelIDs: channels)
        #expect(try aps(plan.payloads[0])["input-push-channel"] == .string("dHJhY2stMQ=="))
        #expect(plan.activity.channelIDs == channels)
        #expect(acceptance.channelIDs == channels)
    }

    /// An iPhone before iOS 18 cannot join a channel (spec §3.1): a channel-bound start gives it
    /// its own update token instead, and says how many; a start without a channel reaches every iOS.
    @Test func aDeviceThatCannotJoinAChannelIsStartedWithItsOwnToken() throws {
        let tokens = [pushToStart("old", iOS: SystemVersion(17, 6)), pushToStart("new", iOS: SystemVersion(26)), pushToStart("unknown")]
        let (plain, plainAcceptance) = try StartPlanner.bothEnvironments.plan(startRequest(), tokens: tokens)
        #expect(plain.deliveries.count == 3 && plain.payloads.count == 1 && plainAcceptance.warnings.isEmpty)

        let (plan, acceptance) = try StartPlanner.bothEnvironments.plan(startRequest(), tokens: tokens, channelIDs: [.sandbox: "dHJhY2stMQ=="])
        #expect(plan.payloads.count == 2)
        let byDevice = Dictionary(uniqueKeysWithValues: plan.deliveries.map { ($0.target, try! aps(plan.payloads[$0.push.payloadIndex])) })
        #expect(byDevice[.pushToStartToken(deviceID: "old", token: "pts-old")]?["input-push-token"] == .integer(1))
        #expect(byDevice[.pushToStartToken(deviceID: "old", token: "pts-old")]?["input-push-channel"] == nil)
        for device in ["new", "unknown"] {
            #expect(byDevice[.pushToStartToken(deviceID: device, token: "pts-\(device)")]?["input-push-channel"] == .string("dHJhY2stMQ=="))
        }
        #expect(acceptance.deliveries == 3)
        #expect(
            acceptance.warnings == [
                "1 device(s) of the audience run an iOS before 18.0, which cannot join a channel: each was sent a start that gives it its own update token, and gets the key's updates one by one"
            ])
    }

    @Test func aStartSpanningBothEnvironmentsGivesEachTheChannelOfItsOwn() throws {
        let channels: [PushEnvironment: String] = [.sandbox: "c2FuZGJveA==", .production: "cHJvZHVjdGlvbg=="]
        let tokens = [pushToStart("a", environment: .production), pushToStart("b")]
        let (plan, acceptance) = try StartPlanner.bothEnvironments.plan(startRequest(), tokens: tokens, channelIDs: channels)
        #expect(plan.payloads.count == 2)
        for delivery in plan.deliveries {
            let channel = try aps(plan.payloads[delivery.push.payloadIndex])["input-push-channel"]
            #expect(channel == .string(channels[delivery.environment]!), "\(delivery.target)")
        }
        #expect(plan.deliveries.map(\.environment) == [.production, .sandbox])
        #expect(acceptance.channelIDs == channels)
        #expect(acceptance.warnings.isEmpty)
    }

    @Test func aStartOnAnExistingChannelReachesOnlyTheChannelsEnvironment() throws {
        let tokens = [pushToStart("a", environment: .production), pushToStart("b")]
        let (plan, acceptance) = try StartPlanner.bothEnvironments.plan(startRequest(), tokens: tokens, channelIDs: [.sandbox: "c2FuZGJveA=="])
        #expect(plan.deliveries.map(\.target) == [.pushToStartToken(deviceID: "b", token: "pts-b")])
        #expect(
            acceptance.warnings == [
                "1 device(s) of the audience have their token in APNs production, not reached: the key's channel is not in that environment"
            ])
    }

    @Test func aPayloadBeyondAPNsLimitIsRefusedNamingItsField() throws {
        var request = startRequest()
        request.contentState = .object([("status", .string(String(repeating: "x", count: 5000)))])
        #expect {
            _ = try StartPlanner.payloads(request, channelIDs: [:], at: t0)
        } throws: { error in
            (error as? RelayError)?.kind == .tooLarge
        }
    }
}
