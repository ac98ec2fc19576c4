import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayStore
import LiveRelayTesting
import Testing

/// Numbers and dates are checked against their range before anything converts them: a date
/// beyond `Int64` seconds once took the whole server down, and a scheduled one kept it down.
@Suite(.timeLimit(.minutes(2)))
struct RangeCheckTests {
    static let outOfRange: [(route: String, body: String, field: String)] = [
        ("start", #""staleDate": 1e19"#, "staleDate"),
        ("start", #""staleDate": 1e400"#, "staleDate"),
        ("start", #""staleDate": -1e19"#, "staleDate"),
        ("start", #""expiration": 1e19"#, "expiration"),
        ("start", #""at": 1e19"#, "at"),
        ("start", #""at": "-0001-01-01T00:00:00Z""#, "at"),
        ("update", #""staleDate": 1e19"#, "staleDate"),
        ("update", #""expiration": 1e400"#, "expiration"),
        ("update", #""at": 1e19"#, "at"),
        ("end", #""dismissalDate": 1e19"#, "dismissalDate"),
        ("end", #""dismissalDate": -1e400"#, "dismissalDate"),
        ("end", #""at": 253402300800"#, "at"),
    ]

    /// One server for every case: each runs against what the cases before it left.
    @Test func aDateOutOfRangeIsRefusedNamingTheFieldAndTheServerKeepsGoing() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            #expect(try await relay.post("/v1/activities/k/start", startBody(key: "k")).status == 201)
            for (route, extra, field) in Self.outOfRange {
                let base = route == "start" ? startBody(key: "k2").serialized : content("later", 5).serializedAsContentStateBody
                var text = String(decoding: base, as: UTF8.self)
                text.removeLast()
                let answer = try await relay.post("/v1/activities/\(route == "start" ? "k2" : "k")/\(route)", json(text + ", " + extra + "}"))
                #expect(answer.status == 400, "\(route) \(extra)")
                #expect(answer.json["error"]?["field"] == .string(field), "\(route) \(extra)")
                #expect(answer.json["error"]?["code"] == .string("invalid_value"), "\(route) \(extra)")
                #expect(answer.json["error"]?["message"]?.stringValue?.contains("9999-12-31T23:59:59Z") == true, "\(route) \(extra)")
                // Nothing was scheduled or written, and the server still answers.
                #expect(try await relay.get("/v1/schedules").json["schedules"] == .array([]))
                #expect(try await relay.get("/v1/activities/k").json["contentState"] == content("preparing", 30))
                #expect(try await relay.get("/v1/activities/k2").status == 404)
                #expect(try await relay.get("/v1/health", scope: nil).status == 200)
            }
        }
    }

    /// A schedule whose request can no longer run (a date out of range, as a database changed by
    /// hand or by a release that checked less might hold; a form this release does not keep) fails
    /// with the reason when due, instead of taking the server down; the next schedule still runs.
    @Test func aStoredScheduleThatCanNoLongerRunFailsWithItsReasonAndTheNextStillRuns() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("k", on: ["iphone-1"])
            let now = relay.relay.currentDate
            let late = ChangeRequest(event: .update, contentState: content("late", 1), staleDate: Date(timeIntervalSinceReferenceDate: 1_000_000))
            let outOfRange = try ScheduledRequest.change(late).stored().serializedString.replacingOccurrences(of: "1000000", with: "1e19")
            #expect(outOfRange.contains("1e19"))
            for (id, request) in [
                ("sch_bad", outOfRange),
                ("sch_other_form", #"{"contentState": {"status": "late", "etaMinutes": 1}}"#),
                ("sch_good", try ScheduledRequest.change(ChangeRequest(event: .update, contentState: content("soon", 2))).stored().serializedString),
            ] {
                let schedule = ScheduleRecord(
                    id: id, bundleID: harnessApp, key: "k", action: .update, request: json(request), dueAt: now + 5, createdAt: now)
                try await relay.store.insertSchedule(schedule, context: WriteContext())
            }
            try await relay.advance(by: 10)
            let bad = try #require(try await relay.store.schedule(id: "sch_bad"))
            #expect(bad.state == .failed)
            #expect(bad.result.map { "\($0)".contains("staleDate") } == true, "\(String(describing: bad.result))")
            let other = try #require(try await relay.store.schedule(id: "sch_other_form"))
            #expect(other.state == .failed && other.result.map { "\($0)".contains("not in the form") } == true)
            #expect(try await relay.store.schedule(id: "sch_good")?.state == .done)
            #expect(try await relay.get("/v1/activities/k").json["contentState"] == content("soon", 2))
        }
    }

    @Test(arguments: [
        (#"{"at": "9999-12-31T23:59:59Z"}"#, 202), (#"{"at": 253402300799}"#, 202),
    ])
    func theLastSupportedDateIsAcceptedAndAnsweredAsADateTime(extra: String, status: Int) async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("k", on: ["iphone-1"])
            var text = String(decoding: content("later", 5).serializedAsContentStateBody, as: UTF8.self)
            text.removeLast()
            let answer = try await relay.post("/v1/activities/k/update", json(text + ", " + extra.dropFirst()))
            #expect(answer.status == status)
            #expect(answer.json["dueAt"] == .string("9999-12-31T23:59:59Z"))
        }
    }
}

extension JSONValue {
    /// `{"contentState": self}`.
    fileprivate var serializedAsContentStateBody: [UInt8] { JSONValue.object([("contentState", self)]).serialized }
}
