import Foundation
import LiveActivityKit
import Testing

@testable import LiveRelayStore

/// The outbox's rules without a database: every (status, event) pair of the lifecycle, and what
/// each trigger decides. The contract suite checks that each engine carries the decisions out.
@Suite struct DeliveryLifecycleTests {
    /// The whole lifecycle, written out: each status's row lists where each event takes it.
    static let expected: [DeliveryStatus: [DeliveryEvent: DeliveryStatus]] = [
        .queued: [.claim: .sending, .supersede: .superseded, .skip: .skipped],
        .sending: [.claim: .sending, .sent: .sent, .retry: .queued, .fail: .failed, .release: .queued, .withdraw: .skipped],
        .sent: [:],
        .failed: [:],
        .superseded: [:],
        .skipped: [:],
    ]

    @Test(arguments: DeliveryStatus.allCases, DeliveryEvent.allCases)
    func everyStatusAndEvent(status: DeliveryStatus, event: DeliveryEvent) {
        #expect(status.after(event) == Self.expected[status]?[event])
    }

    @Test func finalStatusesAreTheFourOutcomes() {
        #expect(Set(DeliveryStatus.allCases.filter(\.isFinal)) == [.sent, .failed, .superseded, .skipped])
    }

    @Test func eachEventHasOneDestination() {
        for event in DeliveryEvent.allCases {
            let destinations = Set(event.sources.compactMap { $0.after(event) })
            #expect(destinations == [event.destination], "\(event)")
        }
    }

    /// A push in flight keeps its claim until its answer: nothing but an answer, a release or a
    /// new claim after its lease touches it.
    @Test func aPushInFlightIsNeverSupersededOrSkipped() {
        #expect(DeliveryEvent.supersede.sources == [.queued])
        #expect(DeliveryEvent.skip.sources == [.queued])
        // Only its claimer withdraws it, before it is sent.
        #expect(DeliveryEvent.withdraw.sources == [.sending])
        for answer in [DeliveryEvent.sent, .retry, .fail] { #expect(answer.sources == [.sending]) }
    }

    @Test func outcomesAreRecordedByTheirEvents() {
        #expect(DeliveryOutcome.sent(status: 200, apnsID: nil).event == .sent)
        #expect(DeliveryOutcome.retry(at: t0, status: 429, reason: "TooManyRequests").event == .retry)
        #expect(DeliveryOutcome.failed(status: 410, reason: "Unregistered", tokenIsDead: true).event == .fail)
    }

    /// The budget counts what reached or may still reach a device.
    @Test func theBudgetCountsWhatIsOrMayBeSent() {
        #expect(Set(DeliveryStatus.allCases.filter(\.countsTowardBudget)) == [.queued, .sending, .sent])
    }

    /// Every status can be reached from `queued`, and every path ends in a final one.
    @Test func everyStatusIsReachableAndEveryPathEnds() {
        var reached: Set<DeliveryStatus> = [.queued]
        var frontier: [DeliveryStatus] = [.queued]
        while let status = frontier.popLast() {
            for event in DeliveryEvent.allCases {
                if let next = status.after(event), reached.insert(next).inserted { frontier.append(next) }
            }
        }
        #expect(reached == Set(DeliveryStatus.allCases))
        for status in DeliveryStatus.allCases where !status.isFinal {
            #expect(DeliveryEvent.allCases.contains { status.after($0)?.isFinal == true }, "\(status) has a way out")
        }
    }
}

@Suite struct OutboxRulesTests {
    let now = t0

    func delivery(_ target: DeliveryTarget, key: String = "k") -> AnsweredDelivery {
        AnsweredDelivery(bundleID: testApp, key: key, target: target)
    }

    func newDelivery(_ key: String, _ event: DeliveryAction, _ target: DeliveryTarget, app: String = testApp) -> NewDelivery {
        NewDelivery(
            bundleID: app, key: key, event: event, target: target, environment: .sandbox, payloadIndex: 0, priority: .immediate,
            priorityReason: "requested", expiration: nil, timestamp: 1, requestID: "r")
    }

    @Test func pushesAreHandedOverOnlyWhenTheyFit() {
        let handOver = HandOver(leaseUntil: t0 + 30, limit: 4)
        #expect(OutboxRules.entry(count: 4, handOver: handOver, at: now) == (.sending, t0 + 30))
        #expect(OutboxRules.entry(count: 5, handOver: handOver, at: now) == (.queued, now))
        #expect(OutboxRules.entry(count: 1, handOver: nil, at: now) == (.queued, now))
    }

    @Test func aChangeSupersedesItsKeysQueuedUpdatesAndItsChannelsBroadcasts() {
        let decisions = OutboxRules.decisions(
            after: .accepted(
                deliveries: [
                    newDelivery("k", .update, .activityToken(deviceID: "a", token: "ta")),
                    newDelivery("k", .update, .activityToken(deviceID: "b", token: "tb")),
                    newDelivery("k", .update, .channel("ch-1")),
                    newDelivery("k", .update, .channel("ch-1")),
                ],
                fanOut: nil),
            at: now)
        #expect(
            decisions == [
                .move(
                    DeliveryMove(
                        .supersede, DeliverySelection(bundleID: testApp, key: "k", targets: [.activity], events: ["update", "end"]), at: now)),
                .move(DeliveryMove(.supersede, DeliverySelection(channelID: "ch-1"), at: now)),
            ])
    }

    @Test func aFanOutSupersedesItsKeysQueuedUpdates() {
        let push = NewPush(
            bundleID: "com.example.other", key: "match", event: .end, payloadIndex: 0, priority: .powerConsiderate, priorityReason: "requested",
            expiration: nil, timestamp: 1, requestID: "r")
        #expect(
            OutboxRules.decisions(after: .accepted(deliveries: [], fanOut: push), at: now) == [
                .move(
                    DeliveryMove(
                        .supersede, DeliverySelection(bundleID: "com.example.other", key: "match", targets: [.activity], events: ["update", "end"]),
                        at: now))
            ])
    }

    /// Two starts of one key may both be queued (a start and its retry are one row): a start
    /// supersedes nothing.
    @Test func aStartSupersedesNothing() {
        let start = newDelivery("k", .start, .pushToStartToken(deviceID: "a", token: "p"))
        #expect(OutboxRules.decisions(after: .accepted(deliveries: [start], fanOut: nil), at: now).isEmpty)
    }

    @Test func aDeadUpdateTokenDiesAndItsQueuedPushesAreSkipped() {
        let answered = delivery(.activityToken(deviceID: "a", token: "ta"))
        let decisions = OutboxRules.decisions(
            after: .answered(answered, .failed(status: 410, reason: "Unregistered", tokenIsDead: true)), at: now)
        #expect(
            decisions == [
                .killToken(DeadToken(bundleID: testApp, key: "k", kind: .activity, deviceID: "a", token: "ta", reason: "Unregistered")),
                .move(
                    DeliveryMove(
                        .skip, DeliverySelection(bundleID: testApp, key: "k", deviceID: "a", token: "ta", targets: [.activity]), at: now,
                        reason: "token dead: Unregistered")),
                .record(
                    NewEvent(
                        .tokenInvalidated, bundleID: testApp, key: "k", environment: .sandbox, deviceID: "a",
                        data: [("token", .string("update")), ("reason", .string("Unregistered")), ("status", .integer(410))])),
            ])
    }

    @Test func aDeadPushToStartTokenDies() {
        let answered = delivery(.pushToStartToken(deviceID: "a", token: "p"))
        let decisions = OutboxRules.decisions(
            after: .answered(answered, .failed(status: 400, reason: "BadDeviceToken", tokenIsDead: true)), at: now)
        #expect(
            decisions.first
                == .killToken(DeadToken(bundleID: testApp, key: "k", kind: .pushToStart, deviceID: "a", token: "p", reason: "BadDeviceToken")))
        #expect(decisions.count == 3)
        guard case .record(let event) = decisions.last else {
            Issue.record("no event: \(decisions)")
            return
        }
        #expect(event.type == .tokenInvalidated && event.data["token"] == .string("push-to-start"))
    }

    /// A dead letter that says nothing of its token, or a channel's refusal, is only the backend's
    /// to hear of (`push.failed`); a push sent, or to be tried again, changes nothing else.
    @Test func otherAnswersDecideNothingMoreThanAnEvent() {
        let token = AnsweredDelivery(
            id: 7, bundleID: testApp, key: "k", event: .end, target: .activityToken(deviceID: "a", token: "ta"), environment: .production,
            attempts: 3)
        #expect(
            OutboxRules.decisions(after: .answered(token, .failed(status: 400, reason: "BadPriority", tokenIsDead: false)), at: now) == [
                .record(
                    NewEvent(
                        .pushFailed, bundleID: testApp, key: "k", environment: .production, deviceID: "a",
                        data: [
                            ("deliveryID", .integer(7)), ("action", .string("end")), ("target", .string("activity")), ("channelID", .null),
                            ("status", .integer(400)), ("reason", .string("BadPriority")), ("attempts", .integer(3)),
                        ]))
            ])
        #expect(OutboxRules.decisions(after: .answered(token, .sent(status: 200, apnsID: "x")), at: now).isEmpty)
        #expect(OutboxRules.decisions(after: .answered(token, .retry(at: now + 1, status: 429, reason: "TooManyRequests")), at: now).isEmpty)
        let channel = delivery(.channel("ch"))
        let refused = OutboxRules.decisions(after: .answered(channel, .failed(status: 410, reason: "Unregistered", tokenIsDead: true)), at: now)
        guard case .record(let event) = refused.first, refused.count == 1 else {
            Issue.record("\(refused)")
            return
        }
        #expect(event.type == .pushFailed && event.deviceID == nil && event.data["channelID"] == .string("ch"))
    }

    static let startArrived = "not sent (again): the device has reported an activity for the key, and another start would start a second one"

    /// A start retried for lack of an answer may have arrived: the device's report says so.
    @Test func aRetriedStartIsSkippedOnceItsActivityIsReported() {
        let answered = delivery(.pushToStartToken(deviceID: "a", token: "p"))
        let skip = DeliveryMove(
            .skip, DeliverySelection(bundleID: testApp, key: "k", deviceID: "a", targets: [.pushToStart], onlyStartsThatArrived: true), at: now,
            reason: Self.startArrived)
        #expect(OutboxRules.decisions(after: .answered(answered, .retry(at: now + 1, status: nil, reason: "no answer")), at: now) == [.move(skip)])
        // A rotation: the device had it already.
        let rotated = ReportedActivity(bundleID: testApp, key: "k", deviceID: "a", activityID: "act", environment: .sandbox, isNew: false)
        #expect(OutboxRules.decisions(after: .activityReported(rotated), at: now) == [.move(skip)])
    }

    /// A start claimed again after its lease ran out is withdrawn if its activity was reported.
    @Test func aClaimedStartWhoseActivityWasReportedIsWithdrawn() {
        #expect(
            OutboxRules.decisions(after: .claimed(starts: [4, 9]), at: now) == [
                .move(
                    DeliveryMove(
                        .withdraw, DeliverySelection(ids: [4, 9], targets: [.pushToStart], onlyStartsThatArrived: true), at: now,
                        reason: Self.startArrived))
            ])
        #expect(OutboxRules.decisions(after: .claimed(starts: []), at: now).isEmpty)
    }

    /// Over on the device: no more updates to it, the backend hears who ended it, and, if it was
    /// the last device that had it, that every device has.
    @Test func anActivityOverOnTheDeviceGetsNoMoreUpdatesAndIsAnEvent() {
        let ended = NewEvent(
            .activityEnded, bundleID: testApp, key: "k", deviceID: "a", data: [("state", .string("dismissed")), ("cause", .string("dismissed"))])
        let skip = OutboxDecision.move(
            DeliveryMove(
                .skip, DeliverySelection(bundleID: testApp, key: "k", deviceID: "a", targets: [.activity]), at: now,
                reason: "activity dismissed on the device"))
        let endedThere = OutboxTrigger.activityEndedOnDevice(app: testApp, key: "k", deviceID: "a", state: .dismissed, cause: "person", wasLive: true)
        #expect(
            OutboxRules.decisions(after: endedThere, at: now) == [
                skip, .record(ended),
                .recordIfEndedOnEveryDevice(NewEvent(.activityEnded, bundleID: testApp, key: "k", data: [("allDevices", .bool(true))])),
            ])
        // Dismissed after it ended there: said, but every device's end was said already.
        let again = OutboxTrigger.activityEndedOnDevice(app: testApp, key: "k", deviceID: "a", state: .dismissed, cause: "person", wasLive: false)
        #expect(OutboxRules.decisions(after: again, at: now) == [skip, .record(ended)])
    }

    @Test func anExpiredActivityGetsNothingMoreAndTheBackendHearsTheSystemEndedIt() {
        #expect(
            OutboxRules.decisions(after: .activityExpired(app: testApp, key: "k"), at: now) == [
                .move(
                    DeliveryMove(
                        .skip, DeliverySelection(bundleID: testApp, key: "k", targets: DeliveryTargetKind.allCases), at: now,
                        reason: "activity expired")),
                .record(NewEvent(.activityEnded, bundleID: testApp, key: "k", data: [("cause", .string("system")), ("reason", .string("expired"))])),
            ])
        #expect(
            OutboxRules.decisions(after: .keyEnded(app: testApp, key: "k"), at: now)
                == [.record(NewEvent(.activityEnded, bundleID: testApp, key: "k", data: [("cause", .string("backend"))]))])
    }

    /// A device's first report of the activity is its start; a rotation is not.
    @Test func aDevicesFirstReportIsTheActivitysStart() {
        let first = ReportedActivity(
            bundleID: testApp, key: "k", deviceID: "a", activityID: "act", environment: .production, channelID: "ch-1", isNew: true)
        let decisions = OutboxRules.decisions(after: .activityReported(first), at: now)
        #expect(
            decisions.last
                == .record(
                    NewEvent(
                        .activityStarted, bundleID: testApp, key: "k", environment: .production, deviceID: "a",
                        data: [("via", .string("channel")), ("activityID", .string("act")), ("channelID", .string("ch-1"))])))
        #expect(decisions.count == 2)
    }

    @Test func aRestartAloneReleasesEveryClaimAndSkipsStartsThatArrived() {
        let arrived = OutboxDecision.move(
            DeliveryMove(.skip, DeliverySelection(targets: [.pushToStart], onlyStartsThatArrived: true), at: now, reason: Self.startArrived))
        #expect(OutboxRules.decisions(after: .restarted(alone: true), at: now) == [.move(DeliveryMove(.release, .all, at: now)), arrived])
        // Beside other instances, their claims stand: a dead one's run out with their lease.
        #expect(OutboxRules.decisions(after: .restarted(alone: false), at: now) == [arrived])
    }

    /// Pushes a dispatcher gives back unsent are due at once, but for those claimed by another
    /// instance since: that claim ends later (a millisecond covers a date's rounding).
    @Test func abandonedClaimsAreReleasedUnlessClaimedAgainSince() {
        #expect(
            OutboxRules.decisions(after: .abandoned(ids: [3, 8], leasedUntil: now + 60), at: now) == [
                .move(DeliveryMove(.release, DeliverySelection(ids: [3, 8], dueBy: now + 60.001), at: now))
            ])
        #expect(OutboxRules.decisions(after: .abandoned(ids: [], leasedUntil: now + 60), at: now).isEmpty)
    }
}

/// The decisions as statements: what a move may change is what the lifecycle allows.
@Suite struct OutboxStatementsTests {
    @Test(arguments: DeliveryEvent.allCases)
    func aMoveChangesOnlyTheStatusesItsEventAppliesTo(event: DeliveryEvent) {
        let statement = OutboxStatements.move(DeliveryMove(event, DeliverySelection(bundleID: "app", key: "k"), at: t0, reason: "why"))
        let sources = event.sources.map { "'\($0.rawValue)'" }
        let condition = sources.count == 1 ? "status = \(sources[0])" : "status IN (\(sources.joined(separator: ", ")))"
        #expect(statement.text.contains("WHERE \(condition) AND bundle_id = ? AND key = ?"), "\(statement.text)")
        #expect(statement.text.hasPrefix("UPDATE deliveries SET status = '\(event.destination.rawValue)'"))
        #expect(statement.text.contains(event.destination.isFinal ? "finished_at = ?" : "next_attempt_at = ?"))
        #expect(statement.arguments == [.seconds(t0), .text("why"), .text("app"), .text("k")])
    }

    /// Its statuses are bound, as for every lookup by id (`PostgresPlanTests` says why).
    @Test func anAnswerIsRecordedOnlyWhileClaimed() {
        let statement = OutboxStatements.answer(id: 7, .retry(at: t0 + 5, status: nil, reason: "no answer"), at: t0)
        #expect(statement.text.contains("WHERE id = ? AND status IN (?) RETURNING"))
        #expect(statement.text.hasPrefix("UPDATE deliveries SET status = 'queued', attempts = attempts + 1"))
        #expect(statement.arguments == [.seconds(t0), .integer(nil), .text("no answer"), .seconds(t0 + 5), .integer(7), .text("sending")])
    }

    /// A move of deliveries picked by id binds the statuses it moves from; picked by key, it writes
    /// them, so that the partial indexes on queued rows serve it.
    @Test func aMoveByIDBindsItsStatuses() {
        let statement = OutboxStatements.move(DeliveryMove(.release, DeliverySelection(ids: [3, 8], dueBy: t0), at: t0))
        #expect(statement.text.hasSuffix("WHERE status IN (?) AND id IN (?, ?) AND next_attempt_at <= ?"), "\(statement.text)")
        #expect(statement.arguments == [.seconds(t0), .text("sending"), .integer(3), .integer(8), .seconds(t0)])
    }

    @Test func postgresGetsNumberedParameters() {
        let statement = SQLStatement(text: "UPDATE t SET a = ? WHERE b = ? AND c IN ('x')", arguments: [.integer(1), .integer(2)])
        #expect(statement.numbered == "UPDATE t SET a = $1 WHERE b = $2 AND c IN ('x')")
    }

    /// Every statement has as many `?` as arguments: a reason or key with a `?` of its own is an
    /// argument, never part of the text.
    @Test func everyValueIsAnArgument() {
        let tricky = "why? because"
        let statements = [
            OutboxStatements.move(
                DeliveryMove(.skip, DeliverySelection(bundleID: "a?", key: "k?", deviceID: "d", token: "t", channelID: "c"), at: t0, reason: tricky)),
            OutboxStatements.move(DeliveryMove(.release, DeliverySelection(ids: [1, 2], dueBy: t0), at: t0)),
            OutboxStatements.answer(id: 1, .failed(status: 400, reason: tricky, tokenIsDead: false), at: t0),
            OutboxStatements.answer(id: 1, .sent(status: 200, apnsID: "?"), at: t0),
            OutboxStatements.kill(DeadToken(bundleID: "a", key: "k", kind: .activity, deviceID: "d", token: "t", reason: tricky)),
            OutboxStatements.kill(DeadToken(bundleID: "a", key: "k", kind: .pushToStart, deviceID: "d", token: "t", reason: tricky)),
        ]
        for statement in statements {
            #expect(statement.text.filter { $0 == "?" }.count == statement.arguments.count, "\(statement.text)")
            #expect(!statement.text.contains(tricky))
        }
    }
}
