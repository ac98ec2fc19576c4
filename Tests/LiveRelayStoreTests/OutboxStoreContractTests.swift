import Foundation
import GRDB
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import Synchronization
import Testing

/// `OutboxStore`'s contract, on every engine: claims, leases and outcomes, and several writers
/// on the same data (two instances; in SQLite, two connections to one file).
@Suite struct OutboxStoreContractTests {
    // MARK: The outbox

    @Test(arguments: StoreKind.allCases) func aClaimIsLeasedAndDueAgainWhenTheLeaseRunsOut(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2", "iphone-3"])
            try await store.change("match", body: "u1", at: t0)
            #expect(try await store.claimDeliveries(dueBy: t0 - 1, limit: 10, leaseUntil: t0 + 59).isEmpty)
            let first = try await store.claimDeliveries(dueBy: t0, limit: 2, leaseUntil: t0 + 60)
            #expect(first.map(\.target.name) == ["iphone-1", "iphone-2"])
            #expect(first.allSatisfy { $0.status == .sending && $0.payload == Array("u1".utf8) })
            let second = try await store.claimDeliveries(dueBy: t0 + 1, limit: 10, leaseUntil: t0 + 61)
            #expect(second.map(\.target.name) == ["iphone-3"])
            #expect(try await store.claimDeliveries(dueBy: t0 + 59, limit: 10, leaseUntil: t0 + 119).isEmpty)
            #expect(try await store.nextDueDate() == t0 + 60)
            // Whoever held them died: after the lease they are claimed again.
            let again = try await store.claimDeliveries(dueBy: t0 + 60, limit: 10, leaseUntil: t0 + 120)
            #expect(again.map(\.target.name) == ["iphone-1", "iphone-2"])
        }
    }

    // MARK: Several writers on the same data (two instances; in SQLite, two connections to one file)

    /// Claims taken at once by two stores never share a push, and together take every push.
    @Test(arguments: StoreKind.allCases) func twoWritersClaimDisjointPushes(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            try await subject.reopened { two async throws in
                let devices = (1...60).map { "iphone-\($0)" }
                try await one.registerActivity("match", on: devices)
                try await one.change("match", body: "u1", at: t0, countingBudget: false)
                let claims = try await withThrowingTaskGroup(of: [Int64].self) { group in
                    for (index, store) in [one, two, one, two, one, two].enumerated() {
                        group.addTask { try await store.claimDeliveries(dueBy: t0 + Double(index) / 10, limit: 7, leaseUntil: t0 + 60).map(\.id) }
                    }
                    var all: [[Int64]] = []
                    for try await claim in group { all.append(claim) }
                    return all
                }
                let claimed = claims.flatMap { $0 }
                #expect(claimed.count == 42)
                #expect(Set(claimed).count == claimed.count, "a push was claimed twice")
                let rest = try await two.claimDeliveries(dueBy: t0 + 1, limit: 100, leaseUntil: t0 + 60)
                #expect(Set(claimed).union(rest.map(\.id)).count == devices.count)
            }
        }
    }

    /// A lease is one holder's at a time: renewed by it, taken by another only once it ran out.
    @Test(arguments: StoreKind.allCases) func aLeaseHasOneHolderAtATime(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            try await subject.reopened { two async throws in
                #expect(try await one.takeLease("ticker", holder: "a", until: t0 + 10, at: t0))
                #expect(try await !two.takeLease("ticker", holder: "b", until: t0 + 11, at: t0 + 1))
                #expect(try await one.takeLease("ticker", holder: "a", until: t0 + 12, at: t0 + 2))
                #expect(try await !two.takeLease("ticker", holder: "b", until: t0 + 21, at: t0 + 11.9))
                // "a" died: once its lease ran out, "b" takes it, and "a" is then refused.
                #expect(try await two.takeLease("ticker", holder: "b", until: t0 + 22, at: t0 + 12))
                #expect(try await !one.takeLease("ticker", holder: "a", until: t0 + 23, at: t0 + 13))
                // Another lease is apart.
                #expect(try await one.takeLease("other", holder: "a", until: t0 + 23, at: t0 + 13))
            }
        }
    }

    /// A store several instances share tells each of them when another queued pushes; a store
    /// one process writes has no one else to hear from.
    @Test(arguments: StoreKind.allCases) func anInstanceHearsOfPushesAnotherQueued(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            try await subject.reopened { two async throws in
                let heard = Seen(0)
                let listening = Task { try await two.watchOutbox { heard.set(heard.value + 1) } }
                defer { listening.cancel() }
                guard kind.isShared else {
                    try await listening.value
                    return
                }
                try await one.registerActivity("match", on: ["iphone-1", "iphone-2"])
                // The listener is in place once a notification sent now reaches it: keep changing until one does.
                var round = 0
                while heard.value == 0 {
                    round += 1
                    try await one.change("match", body: "u\(round)", at: t0 + Double(round), countingBudget: false)
                    try await Task.sleep(for: .milliseconds(20))
                    #expect(round < 500, "no notification reached the listener")
                    if round >= 500 { return }
                }
                // Each later commit that queues pushes is heard.
                let before = heard.value
                try await one.change("match", body: "queued", at: t0 + 1000, countingBudget: false)
                try await eventually { heard.value > before }
            }
        }
    }

    /// Of two starts of one key at once, one is written and the other refused as taken.
    @Test(arguments: StoreKind.allCases) func twoWritersStartingOneKeyWriteItOnce(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            try await subject.reopened { two async throws in
                try await one.savePushToStartToken(pushToStart("iphone-1"))
                let results = await withTaskGroup(of: Bool.self) { group in
                    for store in [one, two, one, two] {
                        group.addTask {
                            do {
                                try await store.start("order-1", at: t0)
                                return true
                            } catch let error as StoreError {
                                return error.code == .keyExists ? false : true
                            } catch {
                                return true
                            }
                        }
                    }
                    return await group.reduce(into: [Bool]()) { $0.append($1) }
                }
                #expect(results.filter { $0 }.count == 1)
                #expect(try await two.deliveries(DeliveryQuery(key: "order-1")).count == 1)
            }
        }
    }

    /// Changes of one key from two writers are planned one after the other, each from what the
    /// one before wrote: none is lost, and the timestamps only grow.
    /// Planned token by token (counting the budget) or written as the store's own fan-out.
    @Test(arguments: StoreKind.allCases, [true, false])
    func twoWritersChangingOneKeyPlanOneAfterTheOther(kind: StoreKind, countingBudget: Bool) async throws {
        try await kind.withStore { subject in
            let one = subject.store
            try await subject.reopened { two async throws in
                try await one.saveActivityToken(activityToken("match", "iphone-1"), attributesType: deliveryType)
                let seen = try await withThrowingTaskGroup(of: Int64.self) { group in
                    for index in 0..<8 {
                        let store = index.isMultiple(of: 2) ? one : two
                        group.addTask {
                            try await store.change("match", body: "u\(index)", at: t0, countingBudget: countingBudget).activity!.lastTimestamp
                        }
                    }
                    return try await group.reduce(into: [Int64]()) { $0.append($1) }
                }
                // Each change saw the timestamp the one before it wrote: eight different ones.
                #expect(Set(seen).count == 8)
                let last = try await two.activity(app: testApp, key: "match")!.lastTimestamp
                #expect(last == seen.max()! + 1)
                // The newest change supersedes the queued ones: one push is left to send.
                #expect(try await one.statuses(key: "match").values.filter { $0 == .queued }.count == 1)
            }
        }
    }

    @Test(arguments: StoreKind.allCases) func aHandedOverRequestWritesItsPushesClaimedUnlessTheyAreTooMany(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2", "iphone-3"])
            try await store.savePushToStartToken(pushToStart("iphone-1"))
            let handOver = WriteContext(handOver: HandOver(leaseUntil: t0 + 60, limit: 3))
            func isClaimed(_ records: [DeliveryRecord], _ body: String) -> Bool {
                records.allSatisfy { $0.status == .sending && $0.nextAttemptAt == t0 + 60 && $0.payload == Array(body.utf8) }
            }

            let started = try await store.start("order-1", at: t0, context: handOver)
            #expect(started.claimed.map(\.target.name) == ["iphone-1"] && isClaimed(started.claimed, "start order-1"))
            // Written by the store for each live token, or planned token by token: claimed either way.
            let fanOut = Seen<[DeliveryRecord]>([])
            let planned = Seen<[DeliveryRecord]>([])
            try await store.change("match", body: "u1", at: t0, context: handOver, countingBudget: false, claimed: fanOut)
            try await store.change("match", body: "u2", at: t0 + 1, context: handOver, claimed: planned)
            #expect(fanOut.value.map(\.target.name) == ["iphone-1", "iphone-2", "iphone-3"] && isClaimed(fanOut.value, "u1"))
            #expect(planned.value.map(\.target.name) == ["iphone-1", "iphone-2", "iphone-3"] && isClaimed(planned.value, "u2"))
            #expect(Set((started.claimed + fanOut.value + planned.value).map(\.id)).count == 7)
            // More pushes than the hand-over takes: all queued, none claimed.
            let tooMany = Seen<[DeliveryRecord]>([])
            try await store.change(
                "match", body: "u3", at: t0 + 2, context: WriteContext(handOver: HandOver(leaseUntil: t0 + 60, limit: 2)), claimed: tooMany)
            #expect(tooMany.value.isEmpty)
            // The claimed ones are in flight (a newer update does not supersede them): the dispatcher
            // claims only the queued ones, and the others only once their lease runs out.
            #expect(try await store.statuses(key: "match").filter { $0.value == .sending }.count == 6)
            #expect(
                try await store.claimDeliveries(dueBy: t0 + 59, limit: 10, leaseUntil: t0 + 119).map(\.payload)
                    == Array(repeating: Array("u3".utf8), count: 3))
            #expect(try await store.claimDeliveries(dueBy: t0 + 60, limit: 10, leaseUntil: t0 + 120).count == 7)
        }
    }

    /// A request's trace context goes with its payload: claimed later, handed over at once, written
    /// by the store as a fan-out or planned token by token; none without a tracer.
    @Test(arguments: StoreKind.allCases) func aRequestsTraceContextComesBackWithEachOfItsPushes(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2"])
            try await store.savePushToStartToken(pushToStart("iphone-1"))
            let trace = { (span: String) in "00-4bf92f3577b34da6a3ce929d0e0e4736-\(span)-01" }
            try await store.start("order-1", at: t0, context: WriteContext(traceParent: trace("00f067aa0ba902b7")))
            try await store.change("match", body: "u1", at: t0, context: WriteContext(traceParent: trace("00f067aa0ba902b8")), countingBudget: false)
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            let byBody = Dictionary(grouping: claimed) { String(decoding: $0.payload, as: UTF8.self) }.mapValues { Set($0.map(\.traceParent)) }
            #expect(byBody == ["start order-1": [trace("00f067aa0ba902b7")], "u1": [trace("00f067aa0ba902b8")]], "\(byBody)")
            try await store.change("match", body: "u2", at: t0 + 1, context: WriteContext(), countingBudget: true)
            let untraced = try await store.claimDeliveries(dueBy: t0 + 1, limit: 10, leaseUntil: t0 + 60)
            #expect(untraced.count == 2 && untraced.allSatisfy { $0.traceParent == nil })
            let handedOver = Seen<[DeliveryRecord]>([])
            try await store.change(
                "match", body: "u3", at: t0 + 2,
                context: WriteContext(handOver: HandOver(leaseUntil: t0 + 60, limit: 5), traceParent: trace("00f067aa0ba902b9")),
                claimed: handedOver)
            #expect(handedOver.value.count == 2 && handedOver.value.allSatisfy { $0.traceParent == trace("00f067aa0ba902b9") })
        }
    }

    /// Alone on its store, a starting server makes every push in flight due at once; beside other
    /// instances, their claims stand until the lease runs out.
    @Test(arguments: StoreKind.allCases) func releasingClaimsAtAStartDependsOnWhetherTheStoreIsShared(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("order-1", "iphone-1"), attributesType: deliveryType)
            try await store.change("order-1", body: "u1", at: t0)
            _ = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            try await store.releaseClaims(at: t0 + 5)
            let due = kind.isShared ? t0 + 60 : t0 + 5
            #expect(try await store.statuses(key: "order-1") == ["u1→iphone-1": kind.isShared ? .sending : .queued])
            #expect(try await store.nextDueDate() == due)
            #expect(try await store.claimDeliveries(dueBy: due - 1, limit: 10, leaseUntil: t0 + 65).isEmpty)
            #expect(try await store.claimDeliveries(dueBy: due, limit: 10, leaseUntil: t0 + 65).count == 1)
        }
    }

    /// A dispatcher gives back claimed pushes it fell too far behind to send: they are due at once,
    /// but one another instance claimed since (once the lease ran out) stays that instance's.
    @Test(arguments: StoreKind.allCases) func abandonedClaimsAreDueAgainButForThoseClaimedSince(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("order-1", on: ["iphone-1", "iphone-2"])
            try await store.change("order-1", body: "u1", at: t0)
            let first = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60.123)
            #expect(first.count == 2)
            // Its lease ran out; another instance claims one of the two.
            let other = try #require(try await store.claimDeliveries(dueBy: t0 + 61, limit: 1, leaseUntil: t0 + 121).first)
            let leasedUntil = try #require(first.first?.nextAttemptAt)
            try await store.abandonClaims(first.map(\.id), leasedUntil: leasedUntil, at: t0 + 62)
            let statuses = try await store.deliveries(DeliveryQuery(key: "order-1", limit: 10))
            #expect(statuses.first { $0.id == other.id }?.status == .sending)
            #expect(Set(statuses.filter { $0.status == .queued }.map(\.id)) == Set(first.map(\.id)).subtracting([other.id]))
            #expect(try await store.nextDueDate() == t0 + 62)
            #expect(try await store.claimDeliveries(dueBy: t0 + 62, limit: 10, leaseUntil: t0 + 122).count == 1)
        }
    }

    /// A second start would start a second activity on the device, and only the newer one's token
    /// would be kept: the first would stay on the Lock Screen, never updated or ended. So a
    /// push-to-start is not sent (again) once its device has reported an activity for the key:
    /// not after a restart that lost its answer, not as a retry, not while queued.
    @Test(arguments: StoreKind.allCases) func aStartIsNotSentAgainOnceItsDeviceReportedAnActivityForTheKey(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for device in ["iphone-1", "iphone-2", "iphone-3"] { try await store.savePushToStartToken(pushToStart(device)) }
            try await store.start("order-1")
            #expect(try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60).count == 3)

            // In flight when the process dies; iphone-1's start arrived and its app reported the activity.
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            #expect(try await store.statuses(key: "order-1")["start order-1→iphone-1"] == .sending)  // its outcome may still come
            try await store.releaseClaims(at: t0 + 5)
            if kind.isShared {
                // Beside other instances the claims stand until their lease runs out.
                #expect(try await store.statuses(key: "order-1").values.allSatisfy { $0 == .sending })
            } else {
                #expect(
                    try await store.statuses(key: "order-1") == [
                        "start order-1→iphone-1": .skipped, "start order-1→iphone-2": .queued, "start order-1→iphone-3": .queued,
                    ])
            }
            // Claimed again (after the lease, or once released), iphone-1's start is not sent: it arrived.
            let again = try await store.claimDeliveries(dueBy: t0 + 60, limit: 10, leaseUntil: t0 + 120)
            #expect(again.map(\.target.name).sorted() == ["iphone-2", "iphone-3"])
            #expect(try await store.statuses(key: "order-1")["start order-1→iphone-1"] == .skipped)
            let skipped = try #require(try await store.deliveries(DeliveryQuery(key: "order-1", status: .skipped)).first)
            #expect(skipped.apnsReason?.contains("the device has reported an activity for the key") == true)

            // A retry of a start whose device reports meanwhile is not sent either; nor a queued one.
            try await store.saveActivityToken(activityToken("order-1", "iphone-2", at: t0 + 61), attributesType: deliveryType)
            let iphone2 = try #require(again.first { $0.target.name == "iphone-2" })
            let iphone3 = try #require(again.first { $0.target.name == "iphone-3" })
            try await store.recordOutcomes(
                [
                    (iphone2.id, .retry(at: t0 + 70, status: nil, reason: "no answer")),
                    (iphone3.id, .retry(at: t0 + 70, status: nil, reason: "no answer")),
                ],
                at: t0 + 62)
            #expect(try await store.statuses(key: "order-1")["start order-1→iphone-2"] == .skipped)
            #expect(try await store.statuses(key: "order-1")["start order-1→iphone-3"] == .queued)
            try await store.saveActivityToken(activityToken("order-1", "iphone-3", at: t0 + 63), attributesType: deliveryType)
            #expect(try await store.statuses(key: "order-1")["start order-1→iphone-3"] == .skipped)
            #expect(try await store.claimDeliveries(dueBy: t0 + 70, limit: 10, leaseUntil: t0 + 130).isEmpty)
        }
    }

    /// A start claimed again once its lease ran out, whose device has reported the activity
    /// meanwhile, is withdrawn by the claim: it is not handed to the dispatcher.
    @Test(arguments: StoreKind.allCases) func aStartClaimedAgainAfterItsLeaseIsWithdrawnIfItArrived(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            for device in ["iphone-1", "iphone-2"] { try await store.savePushToStartToken(pushToStart(device)) }
            try await store.start("order-1")
            #expect(try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60).count == 2)
            try await store.saveActivityToken(activityToken("order-1", "iphone-1", at: t0 + 1), attributesType: deliveryType)
            // Its sender died: no answer, no restart of this store.
            let again = try await store.claimDeliveries(dueBy: t0 + 60, limit: 10, leaseUntil: t0 + 120)
            #expect(again.map(\.target.name) == ["iphone-2"])
            #expect(try await store.statuses(key: "order-1") == ["start order-1→iphone-1": .skipped, "start order-1→iphone-2": .sending])
        }
    }

    /// What the server shows of the outbox (`/metrics`, the dashboard's overview, which a browser
    /// reads again at every change) is read from indexes, not from the history: every status but
    /// `sent` counted as a read of every row counts it, and a page of each status the same rows.
    @Test(arguments: StoreKind.allCases) func everyStatusButSentIsCountedAndPagedAsTheWholeHistorySays(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2", "iphone-3", "iphone-4"])
            try await store.change("match", body: "u1", at: t0)
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 3, leaseUntil: t0 + 60)
            let ids = Dictionary(uniqueKeysWithValues: claimed.map { ($0.target.name, $0.id) })
            // iphone-4's first update, still queued, is passed over by the second.
            try await store.change("match", body: "u2", at: t0 + 1)
            // iphone-2's token dies: its second update is skipped.
            try await store.recordOutcomes(
                [
                    (ids["iphone-1"]!, .sent(status: 200, apnsID: "apns-1")),
                    (ids["iphone-2"]!, .failed(status: 410, reason: "Unregistered", tokenIsDead: true)),
                ], at: t0 + 2)
            let everyRow = try await store.deliveryCounts()
            #expect(everyRow == [.queued: 3, .sending: 1, .sent: 1, .failed: 1, .superseded: 1, .skipped: 1])
            #expect(try await store.waitingAndUnsentCounts() == everyRow.filter { $0.key != .sent })
            #expect(Set(DeliveryStatus.countedByIndex) == Set(DeliveryStatus.allCases).subtracting([.sent]))
            let all = try await store.deliveries(DeliveryQuery(limit: 100))
            for status in DeliveryStatus.allCases {
                let page = try await store.deliveries(DeliveryQuery(status: status, limit: 100))
                #expect(page.map(\.id) == all.filter { $0.status == status }.map(\.id), "\(status)")
            }
        }
    }

    @Test(arguments: StoreKind.allCases) func outcomesAreRecordedOnTheDeliveryAndTheToken(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2", "iphone-3"])
            try await store.change("match", body: "u1", at: t0)
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            let ids = Dictionary(uniqueKeysWithValues: claimed.map { ($0.target.name, $0.id) })
            try await store.recordOutcomes(
                [
                    (ids["iphone-1"]!, .sent(status: 200, apnsID: "apns-1")),
                    (ids["iphone-2"]!, .retry(at: t0 + 2, status: 503, reason: "ServiceUnavailable")),
                    (ids["iphone-3"]!, .failed(status: 400, reason: "PayloadTooLarge", tokenIsDead: false)),
                ], at: t0 + 1)
            let byDevice = Dictionary(uniqueKeysWithValues: try await store.deliveries(DeliveryQuery(key: "match")).map { ($0.target.name, $0) })
            #expect(byDevice["iphone-1"]?.status == .sent)
            #expect(byDevice["iphone-1"]?.apnsID == "apns-1")
            #expect(byDevice["iphone-1"]?.attempts == 1)
            #expect(byDevice["iphone-2"]?.status == .queued)
            #expect(byDevice["iphone-2"]?.nextAttemptAt == t0 + 2)
            #expect(byDevice["iphone-2"]?.apnsReason == "ServiceUnavailable")
            #expect(byDevice["iphone-3"]?.status == .failed)
            #expect(byDevice["iphone-3"]?.finishedAt == t0 + 1)
            let tokens = Dictionary(uniqueKeysWithValues: try await store.activityTokens(app: testApp, key: "match").map { ($0.deviceID, $0) })
            #expect(tokens["iphone-1"]?.lastStatus == 200)
            #expect(tokens["iphone-2"]?.lastReason == "ServiceUnavailable")
            #expect(tokens["iphone-3"]?.state == .live)  // a bad payload says nothing about the token
            #expect(try await store.deliveryCounts() == [.sent: 1, .queued: 1, .failed: 1])

            // An outcome for a delivery no longer claimed (a late answer after a restart) changes nothing.
            try await store.recordOutcomes([(ids["iphone-1"]!, .failed(status: 500, reason: "InternalServerError", tokenIsDead: false))], at: t0 + 3)
            #expect(try await store.deliveries(DeliveryQuery(key: "match", status: .sent)).map(\.target.name) == ["iphone-1"])

            // The last result is the newest attempted delivery's: a queued one has none yet, and a
            // rotated token starts without one.
            try await store.change("match", body: "u2", at: t0 + 4)
            try await store.saveActivityToken(activityToken("match", "iphone-3", token: "rotated", at: t0 + 4), attributesType: deliveryType)
            let claimedAgain = try await store.claimDeliveries(dueBy: t0 + 4, limit: 10, leaseUntil: t0 + 64)
            let second = try #require(claimedAgain.first { $0.target.name == "iphone-1" })
            try await store.recordOutcomes([(second.id, .retry(at: t0 + 9, status: 429, reason: "TooManyRequests"))], at: t0 + 5)
            let later = Dictionary(uniqueKeysWithValues: try await store.activityTokens(app: testApp, key: "match").map { ($0.deviceID, $0) })
            #expect(later["iphone-1"]?.lastStatus == 429)
            #expect(later["iphone-1"]?.lastReason == "TooManyRequests")
            #expect(later["iphone-1"]?.lastDeliveryAt == t0 + 5)
            #expect(later["iphone-2"]?.lastStatus == 503)  // its u2 was claimed, not answered
            #expect(later["iphone-3"]?.lastStatus == nil)
            #expect(later["iphone-3"]?.lastDeliveryAt == nil)
        }
    }

    @Test(arguments: StoreKind.allCases) func aDeadTokenStopsAndItsQueuedPushesAreSkipped(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.registerActivity("match", on: ["iphone-1", "iphone-2"])
            try await store.change("match", body: "u1", at: t0)
            let claimed = try await store.claimDeliveries(dueBy: t0, limit: 10, leaseUntil: t0 + 60)
            try await store.change("match", body: "u2", at: t0 + 1)
            let toFirst = try #require(claimed.first { $0.target.name == "iphone-1" })
            try await store.recordOutcomes([(toFirst.id, .failed(status: 410, reason: "Unregistered", tokenIsDead: true))], at: t0 + 2)
            let statuses = try await store.statuses(key: "match")
            #expect(statuses["u1→iphone-1"] == .failed)
            #expect(statuses["u2→iphone-1"] == .skipped)
            #expect(statuses["u2→iphone-2"] == .queued)
            let tokens = try await store.activityTokens(app: testApp, key: "match")
            #expect(tokens.map(\.state) == [.dead, .live])
            #expect(tokens.first?.stateReason == "Unregistered")
            // The next change leaves the dead token out.
            #expect(try await store.change("match", body: "u3", at: t0 + 3).liveTokens.map(\.deviceID) == ["iphone-2"])
        }
    }

    @Test(arguments: StoreKind.allCases) func deliveriesAreListedNewestFirstByKeyStatusAndPage(kind: StoreKind) async throws {
        try await kind.withStore { subject in
            let store = subject.store
            try await store.saveActivityToken(activityToken("a", "iphone-1"), attributesType: deliveryType)
            try await store.saveActivityToken(activityToken("b", "iphone-1"), attributesType: deliveryType)
            for step in 1...3 {
                try await store.change("a", body: "a\(step)", at: t0 + Double(step))
                try await store.change("b", body: "b\(step)", at: t0 + Double(step))
            }
            let all = try await store.deliveries(DeliveryQuery(limit: 100))
            #expect(all.map { String(decoding: $0.payload, as: UTF8.self) } == ["b3", "a3", "b2", "a2", "b1", "a1"])
            let page = try await store.deliveries(DeliveryQuery(key: "a", limit: 2))
            #expect(page.map { String(decoding: $0.payload, as: UTF8.self) } == ["a3", "a2"])
            let next = try await store.deliveries(DeliveryQuery(key: "a", before: page.last!.id, limit: 2))
            #expect(next.map { String(decoding: $0.payload, as: UTF8.self) } == ["a1"])
            #expect(try await store.deliveries(DeliveryQuery(status: .superseded)).count == 4)
        }
    }
}
