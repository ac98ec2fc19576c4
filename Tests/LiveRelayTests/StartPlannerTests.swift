import Foundation
import LiveActivityKit
import LiveRelayStore
import Testing

@testable import LiveRelay

@Suite struct StartPlannerTests {
    @Test func onlyTokensOfTheServersEnvironmentGetAPush() throws {
        let tokens = [pushToStart("a"), pushToStart("b", environment: "production"), pushToStart("c")]
        let (plan, acceptance) = try StartPlanner.sandbox.plan(startRequest(), tokens: tokens)
        #expect(plan.deliveries.map(\.target) == [.pushToStartToken(deviceID: "a", token: "pts-a"), .pushToStartToken(deviceID: "c", token: "pts-c")])
        #expect(acceptance == Acceptance(key: "order-42", action: "start", requestID: "req-1", timestamp: 1_800_000_000, deliveries: 2, state: .active))
        #expect(plan.response == keptAnswer(acceptance))
    }

    /// A push-to-start always alerts, so `auto` never spends the budget on it.
    @Test(arguments: [
        (PriorityChoice.fixed(10), 10, "requested"), (.fixed(5), 5, "requested"), (.auto, 10, "alert"),
    ])
    func priority(choice: PriorityChoice, priority: Int, reason: String) throws {
        let (plan, _) = try StartPlanner.sandbox.plan(startRequest(priority: choice), tokens: [pushToStart("a", frequent: true)])
        #expect(plan.deliveries.map(\.push.priority) == [priority])
        #expect(plan.deliveries.map(\.push.priorityReason) == [reason])
    }

    @Test func theKeyStartsWithTheRequestsContentAndEveryPushCarriesTheTimestampAndExpiration() throws {
        let (plan, _) = try StartPlanner.sandbox.plan(startRequest(expiration: t0 + 600), tokens: [pushToStart("a")])
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
        let (plan, acceptance) = try StartPlanner.sandbox.plan(startRequest(), tokens: [pushToStart("a")], channelID: "dHJhY2stMQ==")
        #expect(try aps(plan.payloads[0])["input-push-channel"] == .string("dHJhY2stMQ=="))
        #expect(plan.activity.channelID == "dHJhY2stMQ==")
        #expect(acceptance.channelID == "dHJhY2stMQ==")
    }

    @Test func aPayloadBeyondAPNsLimitIsRefusedNamingItsField() throws {
        var request = startRequest()
        request.contentState = .object([("status", .string(String(repeating: "x", count: 5000)))])
        #expect {
            _ = try StartPlanner.payload(request, channelID: nil, at: t0)
        } throws: { error in
            (error as? RelayError)?.kind == .tooLarge
        }
    }
}
