import APNs
import APNsEmulator
import Foundation
import LiveActivityKit
import LiveRelay
import LiveRelayHTTP
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import SimulatedDevices
import Testing

@Suite(.timeLimit(.minutes(2)))
struct RelayAPITests {
    @Test func eachRouteTakesOnlyItsScopeAndARevokedKeyIsRefused() async throws {
        try await withRelayHarness { relay in
            #expect(try await relay.get("/v1/deliveries", scope: nil).status == 401)
            #expect(try await relay.get("/v1/deliveries", scope: .client).status == 403)
            #expect(try await relay.get("/v1/deliveries", scope: .client).json["error"]?["code"] == .string("wrong_scope"))
            #expect(try await relay.get("/v1/api-keys", scope: .server).status == 403)
            // The refusal names both scopes, each with its article.
            let wrong = try await relay.post("/v1/push-to-start-tokens", .object([]), scope: .admin).json["error"]?["message"]?.stringValue
            #expect(wrong?.hasPrefix("this route needs a client key; ") == true)
            #expect(wrong?.hasSuffix(" is an admin key") == true)
            #expect(try await relay.post("/v1/push-to-start-tokens", .object([]), scope: .admin).status == 403)
            #expect(try await relay.get("/metrics", scope: .server).status == 403)

            let made = try await relay.post("/v1/api-keys", json(#"{"name": "backend", "scope": "server"}"#), scope: .admin)
            #expect(made.status == 201)
            let secret = try #require(made.json["secret"]?.stringValue)
            let id = try #require(made.json["id"]?.stringValue)
            #expect(try await relay.call(.GET, "/v1/deliveries", secret: secret).status == 200)
            // Only the hash is kept: the list never shows a secret.
            #expect(try await relay.get("/v1/api-keys", scope: .admin).text.contains(secret) == false)
            #expect(try await relay.call(.DELETE, "/v1/api-keys/\(id)", scope: .admin).status == 200)
            #expect(try await relay.call(.GET, "/v1/deliveries", secret: secret).status == 401)
        }
    }

    @Test(arguments: [
        (#"{"attributesType": "T", "attributes": {}, "contentState": {}, "audience": {"everyone": true}}"#, "alert", "missing"),
        (#"{"attributesType": "T", "attributes": {}, "contentState": {}, "alert": {"title": "a", "body": "b"}}"#, "audience", "missing"),
        (
            #"{"attributesType": "T", "attributes": {}, "contentState": {}, "alert": {"title": "a", "body": "b"}, "audience": {"devices": []}}"#,
            "audience.devices", "invalid_value"
        ),
        (
            #"{"attributesType": "T", "attributes": {}, "contentState": [], "alert": {"title": "a", "body": "b"}, "audience": {"everyone": true}}"#,
            "contentState", "wrong_type"
        ),
        (
            #"{"attributesType": "T", "attributes": {}, "contentState": {}, "alert": {"title": "a", "body": "b"}, "audience": {"everyone": true}, "relevanceScore": "high"}"#,
            "relevanceScore", "wrong_type"
        ),
        (
            #"{"attributesType": "T", "attributes": {}, "contentState": {}, "alert": {"title": "a", "body": "b"}, "audience": {"everyone": true}, "priority": 7}"#,
            "priority", "invalid_value"
        ),
        (
            #"{"attributesType": "T", "attributes": {}, "contentState": {}, "alert": {"titel": "a", "body": "b"}, "audience": {"everyone": true}}"#,
            "alert.titel", "unknown_key"
        ),
        (
            #"{"attributesType": "T", "attributes": {}, "contentState": {}, "alert": {"title": "a", "body": "b"}, "audience": {"everyone": true}, "staleDate": "tomorrow"}"#,
            "staleDate", "invalid_value"
        ),
    ])
    func aBadStartNamesTheFieldAndTheRule(body: String, field: String, code: String) async throws {
        try await withRelayHarness { relay in
            let answer = try await relay.post("/v1/activities/k/start", json(body))
            #expect(answer.status == 400)
            #expect(answer.json["error"]?["field"] == .string(field))
            #expect(answer.json["error"]?["code"] == .string(code))
            #expect(try await relay.store.activity(app: harnessApp, key: "k") == nil)
        }
    }

    /// Fixed-shape bodies are `Decodable`: the same error shape, the field named at every level.
    @Test(
        arguments: [
            ("/v1/push-to-start-tokens", #"{"deviceID": "d", "bundleId": "b", "attributesType": "T", "token": "abcd"}"#, "bundleId", "unknown_key"),
            ("/v1/push-to-start-tokens", #"{"deviceID": "d", "bundleID": "b", "attributesType": "T"}"#, "token", "missing"),
            ("/v1/push-to-start-tokens", #"{"deviceID": "d", "bundleID": "b", "attributesType": "T", "token": 5}"#, "token", "wrong_type"),
            ("/v1/push-to-start-tokens", #"{"deviceID": "d", "bundleID": "b", "attributesType": "T", "token": "zz"}"#, "token", "invalid_value"),
            ("/v1/push-to-start-tokens", #"{"deviceID": "", "bundleID": "b", "attributesType": "T", "token": "abcd"}"#, "deviceID", "invalid_value"),
            (
                "/v1/push-to-start-tokens", #"{"deviceID": "d", "bundleID": "b", "attributesType": "T", "token": "abcd", "environment": "staging"}"#,
                "environment", "invalid_value"
            ),
            ("/v1/push-to-start-tokens", "[]", nil, "wrong_type"),
            ("/v1/push-to-start-tokens", "{", nil, "invalid_json"),
            ("/v1/activities/k/ended", #"{"deviceID": "d", "bundleID": "b", "state": "gone"}"#, "state", "invalid_value"),
            ("/v1/activities/k/ended", #"{"deviceID": "d", "bundleID": "b", "state": "ended", "at": "tomorrow"}"#, "at", "invalid_value"),
            ("/v1/activities/k/ended", #"{"deviceID": "d", "bundleID": "b", "state": "ended", "at": 1e300}"#, "at", "invalid_value"),
        ] as [(String, String, String?, String)])
    func aBadRegistrationNamesTheFieldAndTheRule(path: String, body: String, field: String?, code: String) async throws {
        try await withRelayHarness { relay in
            let answer = try await relay.call(.POST, path, raw: body, scope: .client)
            #expect(answer.status == 400)
            #expect(answer.json["error"]?["field"] == field.map(JSONValue.string))
            #expect(answer.json["error"]?["code"] == .string(code))
        }
    }

    /// `Authorization: Bearer <key>`: the scheme in any case, spaces and tabs around the key
    /// allowed (RFC 9110); another scheme, or none, is 401.
    @Test func theBearerSchemeIsReadInAnyCaseAroundBlanks() async throws {
        try await withRelayHarness { relay in
            let secret = try #require(relay.keys[.server])
            for header in ["Bearer \(secret)", "bearer \(secret)", "BEARER  \(secret)\t", "BeArEr \t\(secret) "] {
                let answer = try await relay.call(.GET, "/v1/deliveries", scope: nil, headers: [("authorization", header)])
                #expect(answer.status == 200, "\(header.debugDescription): \(answer.text)")
            }
            for header in ["Basic \(secret)", "Bearer", "Bearer ", "Bearer\(secret)", "\(secret)"] {
                let answer = try await relay.call(.GET, "/v1/deliveries", scope: nil, headers: [("authorization", header)])
                #expect(answer.status == 401, "\(header.debugDescription): \(answer.text)")
            }
        }
    }

    @Test func theLastLiveAdminKeyCannotBeRevoked() async throws {
        try await withRelayHarness { relay in
            let admin = try #require(
                try await relay.get("/v1/api-keys", scope: .admin).json["apiKeys"]?.arrayElements?
                    .first { $0["scope"] == .string("admin") }?["id"]?.stringValue)
            let refused = try await relay.call(.DELETE, "/v1/api-keys/\(admin)", scope: .admin)
            #expect(refused.status == 409)
            #expect(refused.json["error"]?["code"] == .string("last_admin_key"))
            #expect(try await relay.get("/v1/api-keys", scope: .admin).status == 200)
        }
    }

    /// RFC 9110 §15.5.6: a method the path does not answer is 405 with the methods it does; an
    /// unknown path stays 404.
    @Test(arguments: [
        ("TRACE /v1/health", "405", "GET"), ("PUT /v1/activities/k/start", "405", "POST"),
        ("PATCH /v1/api-keys/key_1", "405", "DELETE"), ("TRACE /v1/nothing", "404", nil),
    ])
    func aMethodAKnownPathDoesNotAnswerIs405WithAllow(request: String, status: String, allow: String?) async throws {
        try await withRelayHarness { relay in
            let port = try #require(Int(relay.baseURL.split(separator: ":").last ?? ""))
            let connection = try await RawTCPConnection.connect(port: port)
            try await connection.write("\(request) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            try await relay.eventually { connection.isClosed }
            #expect(connection.received.hasPrefix("HTTP/1.1 \(status)"), "\(connection.received)")
            if let allow {
                #expect(connection.received.lowercased().contains("allow: \(allow.lowercased())"), "\(connection.received)")
                #expect(connection.received.contains(#""code":"method_not_allowed""#))
            }
        }
    }

    @Test func badInputElsewhereIsRefusedWithoutTouchingWhatWasAccepted() async throws {
        try await withRelayHarness(configure: { _, api in api.maximumBodySize = 8192 }) { relay in
            try await relay.addRegisteredDevice("iphone-1")
            #expect(try await relay.post("/v1/activities/k/start", startBody(key: "k")).status == 201)
            let unknown = try await relay.post("/v1/activities/nope/update", .object([("contentState", content("a", 1))]))
            #expect(unknown.status == 404)
            let noContent = try await relay.post("/v1/activities/k/update", .object([]))
            #expect(noContent.json["error"]?["field"] == .string("contentState"))
            let huge = try await relay.post(
                "/v1/activities/k/update", .object([("contentState", .object([("x", .string(String(repeating: "a", count: 9000)))]))]))
            #expect(huge.status == 413)
            // Within ActivityKit's 4 KB of content state, over APNs' 4 KB of payload.
            let tooBigForAPNs = try await relay.post(
                "/v1/activities/k/update", .object([("contentState", content(String(repeating: "a", count: 4040), 1))]))
            #expect(tooBigForAPNs.status == 413)
            #expect(tooBigForAPNs.json["error"]?["code"] == .string("too_large"))
            let taken = try await relay.post("/v1/activities/k/start", startBody(key: "k"))
            #expect(taken.status == 409)
            #expect(taken.json["error"]?["code"] == .string("key_exists"))
            let badToken = try await relay.post(
                "/v1/push-to-start-tokens",
                json(#"{"deviceID": "d", "bundleID": "com.example.liverelay.tests", "attributesType": "T", "token": "xyz"}"#), scope: .client)
            #expect(badToken.json["error"]?["field"] == .string("token"))
            let otherApp = try await relay.post(
                "/v1/push-to-start-tokens", json(#"{"deviceID": "d", "bundleID": "com.other.app", "attributesType": "T", "token": "abcd"}"#),
                scope: .client)
            #expect(otherApp.json["error"]?["field"] == .string("bundleID"))
            // What was accepted is still there, untouched.
            let key = try await relay.get("/v1/activities/k")
            #expect(key.json["contentState"] == content("preparing", 30))
            #expect(try await relay.store.deliveries(DeliveryQuery()).count == 1)
        }
    }

    @Test func anIdempotencyKeyReplaysTheAnswerAndRefusesAnotherRequest() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            let headers = [("Idempotency-Key", "start-k-1")]
            let first = try await relay.post("/v1/activities/k/start", startBody(key: "k"), headers: headers)
            let again = try await relay.post("/v1/activities/k/start", startBody(key: "k"), headers: headers)
            #expect(first.status == 201)
            #expect(again.status == 201)
            #expect(again.text == first.text)
            #expect(again.header("Idempotent-Replayed") == "true")
            #expect(try await relay.store.deliveries(DeliveryQuery()).count == 1)
            let other = try await relay.post("/v1/activities/k2/start", startBody(key: "k2"), headers: headers)
            #expect(other.status == 422)
            #expect(other.json["error"]?["code"] == .string("idempotency_key_reused"))
        }
    }

    /// A scheduled request's answer is kept as the schedule it made, and rendered again alike.
    @Test func anIdempotencyKeyReplaysAScheduledRequestsAnswer() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            let headers = [("Idempotency-Key", "later-k-1")]
            let body = startBody(key: "k", extra: [("at", .integer(unixSeconds(relay.emulator.clock.now + 600)))])
            let first = try await relay.post("/v1/activities/k/start", body, headers: headers)
            let again = try await relay.post("/v1/activities/k/start", body, headers: headers)
            #expect(first.status == 202)
            #expect(again.status == 202)
            #expect(again.text == first.text)
            #expect(again.header("Idempotent-Replayed") == "true")
            #expect(try await relay.store.schedules(app: nil, key: nil).count == 1)
        }
    }

    @Test func aKeyOverItsRateGets429WithRetryAfter() async throws {
        try await withRelayHarness(configure: { _, api in (api.requestsPerSecond, api.burst) = (0.5, 2) }) { relay in
            #expect(try await relay.get("/v1/deliveries").status == 200)
            #expect(try await relay.get("/v1/deliveries").status == 200)
            let limited = try await relay.get("/v1/deliveries")
            #expect(limited.status == 429)
            #expect(limited.header("Retry-After") == "2")
            #expect(limited.json["error"]?["code"] == .string("rate_limited"))
            // Another key has its own bucket.
            #expect(try await relay.get("/v1/api-keys", scope: .admin).status == 200)
            relay.emulator.clock.advance(by: 2)
            #expect(try await relay.get("/v1/deliveries").status == 200)
        }
    }

    @Test func autoPriorityGoesAt10WithinBudgetOrWithAnAlertAndAt5Beyond() async throws {
        try await withRelayHarness(configure: { relay, _ in relay.budget = BudgetPolicy(priority10PerHour: 2, frequentPriority10PerHour: 4) }) {
            relay in
            try await relay.startActivity("k", on: ["iphone-1"])
            for step in 1...3 {
                _ = try await relay.post("/v1/activities/k/update", .object([("contentState", content("step", step))]))
                try await relay.dispatch()  // sent, so none is superseded and each counts
            }
            _ = try await relay.post(
                "/v1/activities/k/update", .object([("contentState", content("alert", 4)), ("alert", json(#"{"title": "t", "body": "b"}"#))]))
            let updates = try await relay.store.deliveries(DeliveryQuery(key: "k")).filter { $0.event == .update }.reversed()
            #expect(updates.map(\.priority.rawValue) == [10, 10, 5, 10])
            #expect(
                updates.map(\.priorityReason) == [
                    "within budget (1 of 2 an hour)", "within budget (2 of 2 an hour)", "over budget (2 an hour)", "alert",
                ])
            // An hour later the budget is back.
            try await relay.advance(by: 3601)
            _ = try await relay.post("/v1/activities/k/update", .object([("contentState", content("later", 5))]))
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "k", limit: 1)).first?.priority.rawValue == 10)
        }
    }

    @Test func aGoneTokenIsMarkedDeadAndARetryableFailureComesBackWithBackoff() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("k", on: ["iphone-1", "iphone-2"])
            let tokens = try await relay.store.activityTokens(app: harnessApp, key: "k")
            let gone = try #require(tokens.first { $0.deviceID == "iphone-1" }?.token)
            relay.emulator.registry.unregister(token: gone, since: relay.emulator.clock.now - 10)
            _ = try await relay.post("/v1/activities/k/update", .object([("contentState", content("a", 1))]))
            try await relay.dispatch()
            let after = try await relay.store.activityTokens(app: harnessApp, key: "k")
            #expect(after.first { $0.deviceID == "iphone-1" }?.state == .dead)
            #expect(after.first { $0.deviceID == "iphone-1" }?.lastStatus == 410)

            // Only the live token gets the next update; APNs is briefly unavailable.
            _ = relay.emulator.faults.add(EmulatorFault(EmulatorFault.respond(.serviceUnavailable)))
            let next = try await relay.post("/v1/activities/k/update", .object([("contentState", content("b", 2))]))
            #expect(next.json["deliveries"] == .integer(1))
            try await relay.dispatch()
            let pending = try #require(try await relay.store.deliveries(DeliveryQuery(key: "k", status: .queued)).first)
            #expect(pending.attempts == 1)
            #expect(pending.apnsReason == "ServiceUnavailable")

            // After the backoff it goes, and the dead token gets nothing more.
            try await relay.dispatch()
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "k", status: .queued)).count == 1)
            try await relay.advance(by: 2)
            try await relay.dispatch()
            #expect(try await relay.store.deliveries(DeliveryQuery(key: "k", status: .queued)).isEmpty)
            #expect(try relay.activity(on: "iphone-2")?.content.state == content("b", 2))
            let failed = try await relay.get("/v1/deliveries?status=failed")
            #expect(failed.json["deliveries"]?[0]?["apnsReason"] == .string("Unregistered"))
        }
    }

    @Test func aScheduledStartRunsWhenDueAndAScheduleCanBeCancelled() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            let at = relay.emulator.clock.now + 600
            let scheduled = try await relay.post("/v1/activities/k/start", startBody(key: "k", extra: [("at", .integer(unixSeconds(at)))]))
            #expect(scheduled.status == 202)
            #expect(scheduled.json["state"] == .string("pending"))
            let other = try await relay.post("/v1/activities/k2/start", startBody(key: "k2", extra: [("at", .integer(unixSeconds(at)))]))
            let otherID = try #require(other.json["scheduleID"]?.stringValue)
            #expect(try await relay.call(.DELETE, "/v1/schedules/\(otherID)").json["state"] == .string("cancelled"))
            #expect(try await relay.call(.DELETE, "/v1/schedules/\(otherID)").status == 409)

            try await relay.advance(by: 300)
            #expect(try await relay.store.activity(app: harnessApp, key: "k") == nil)
            try await relay.advance(by: 301)
            #expect(try await relay.store.activity(app: harnessApp, key: "k")?.state == .active)
            #expect(try await relay.store.activity(app: harnessApp, key: "k2") == nil)
            try await relay.dispatch()
            #expect(try relay.activity(on: "iphone-1")?.state == .active)
            let id = try #require(scheduled.json["scheduleID"]?.stringValue)
            #expect(try await relay.get("/v1/schedules/\(id)").json["state"] == .string("done"))
        }
    }

    /// A device listening to a channel-bound key shows it, as one with an update token does: in
    /// the key's description and in the listing alike (the listing said no device had reported it).
    @Test func aDeviceListeningToTheKeysChannelShowsIt() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            relay.emulator.registry.setBroadcastEnabled(for: nil)
            _ = try await relay.post("/v1/activities/match-7/start", startBody(key: "match-7", extra: [("channel", json(#"{"storagePolicy": 1}"#))]))
            try await relay.dispatch()
            try await eventually { try await relay.store.channelListeners(app: harnessApp, key: "match-7").count == 1 }
            let described = try await relay.get("/v1/activities/match-7").json["devices"]
            let listed = try await relay.get("/v1/activities").json["activities"]?.arrayElements?.first { $0["key"] == .string("match-7") }?[
                "devices"]
            #expect(
                described?["reach"] == .string("live") && described?["live"] == .integer(1) && described == listed,
                "\(String(describing: described)) \(String(describing: listed))")
            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            let page = try await browser.get("/dashboard/activities").text
            #expect(page.contains("match-7") && !page.contains("no device has reported it"))
        }
    }

    /// The key's state is the backend's; beside it, what its devices reported: none yet, shown,
    /// then ended on every device (here the person dismissed it) while the key stays active.
    @Test func aKeyShowsWhatItsDevicesReported() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            _ = try await relay.post("/v1/activities/k/start", startBody(key: "k"))
            func devices() async throws -> (described: JSONValue?, listed: JSONValue?) {
                let listing = try await relay.get("/v1/activities")
                return (try await relay.get("/v1/activities/k").json["devices"], listing.json["activities"]?[0]?["devices"])
            }
            let none = try await devices()
            #expect(none.described?["reach"] == .string("noDevice") && none.described == none.listed, "\(none)")

            try await relay.dispatch()
            try await relay.waitForToken("k", device: "iphone-1")
            let shown = try await devices()
            #expect(shown.described?["reach"] == .string("live") && shown.described?["live"] == .integer(1) && shown.described == shown.listed)

            let activityID = try #require(try relay.activity(on: "iphone-1")?.id)
            try relay.emulator.devices.perform(.dismiss(activityID: activityID), on: "iphone-1")
            // The device reports the activity ended, then dismissed: waited for until both reads
            // have the last report.
            try await eventually {
                let over = try await devices()
                return over.described?["dismissed"] == .integer(1) && over.described == over.listed
            }
            let over = try await devices()
            #expect(over.described?["dismissed"] == .integer(1) && over.described?["live"] == .integer(0) && over.described == over.listed, "\(over)")
            #expect(try await relay.get("/v1/activities/k").json["state"] == .string("active"))

            let browser = DashboardBrowser(relay)
            _ = try await browser.signIn(key: try #require(relay.keys[.admin]))
            #expect(try await browser.get("/dashboard/activities").text.contains("ended on every device: 1 dismissed by the person"))
            #expect(
                try await browser.get("/dashboard/activity?app=\(harnessApp)&key=k").text.contains(
                    "<dt>Devices</dt><dd>ended on every device: 1 dismissed by the person</dd>"))
        }
    }

    /// An app reports, when it starts reporting again (a launch; the demo iPhone after `serve`
    /// restarts), the end of an activity that ended while it was not reporting.
    @Test func anEndThatHappenedWhileTheAppWasNotReportingIsReportedWhenItReportsAgain() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            _ = try await relay.post("/v1/activities/k/start", startBody(key: "k"))
            try await relay.dispatch()
            try await relay.waitForToken("k", device: "iphone-1")
            let target = try #require(relay.emulator.reporter.target(deviceID: "iphone-1", bundleID: harnessApp))
            try relay.emulator.reporter.setTarget(nil, deviceID: "iphone-1", bundleID: harnessApp)
            let activityID = try #require(try relay.activity(on: "iphone-1")?.id)
            try relay.emulator.devices.withDevice("iphone-1") { device, now in
                ((), device.end(activityID: activityID, content: nil, dismissalPolicy: .default, at: now))
            }
            #expect(try await relay.get("/v1/activities/k").json["devices"]?["live"] == .integer(1))
            try relay.emulator.reporter.setTarget(target, deviceID: "iphone-1", bundleID: harnessApp)
            try await eventually { try await relay.get("/v1/activities/k").json["devices"]?["ended"] == .integer(1) }
            #expect(try await relay.get("/v1/activities/k").json["devices"]?["reach"] == .string("endedOnEveryDevice"))
        }
    }

    @Test func anActivityPastEightHoursEndsAndItsUpdatesAreRefused() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            _ = try await relay.post("/v1/activities/k/start", startBody(key: "k"))
            try await relay.advance(by: 8 * 3600 + 1)
            #expect(try await relay.store.activity(app: harnessApp, key: "k")?.endReason == .expired)
            let late = try await relay.post("/v1/activities/k/update", .object([("contentState", content("a", 1))]))
            #expect(late.status == 409)
            #expect(late.json["error"]?["message"]?.stringValue?.contains("expired") == true)
        }
    }

    @Test func aChannelKeyBroadcastsAndItsChannelIsDeletedAfterTheStorageWindow() async throws {
        try await withRelayHarness { relay in
            relay.emulator.registry.setBroadcastEnabled(for: nil)
            try await relay.addRegisteredDevice("iphone-1")
            let started = try await relay.post(
                "/v1/activities/match-7/start", startBody(key: "match-7", extra: [("channel", json(#"{"storagePolicy": 1}"#))]))
            #expect(started.status == 201)
            let channelID = try #require(started.json["channelID"]?.stringValue)
            #expect(relay.emulator.registry.channel(channelID) != nil)
            try await relay.dispatch()
            let update = try await relay.post("/v1/activities/match-7/update", .object([("contentState", content("1-0", 60))]))
            #expect(update.json["deliveries"] == .integer(1))
            try await relay.dispatch()
            #expect(try relay.activity(on: "iphone-1")?.content.state == content("1-0", 60))
            let channels = try await relay.get("/v1/channels", scope: .admin)
            #expect(channels.json["channels"]?[0]?["key"] == .string("match-7"))

            _ = try await relay.post("/v1/activities/match-7/end", .object([("contentState", content("2-1", 0))]))
            try await relay.dispatch()
            try await relay.advance(by: 7 * 3600)
            #expect(relay.emulator.registry.channel(channelID) != nil)
            try await relay.advance(by: 3601)
            #expect(try await relay.store.channel(id: channelID)?.deletedAt != nil)
        }
    }

    @Test func anExpiredTokenIsMarkedDeadLikeAGoneOne() async throws {
        try await withRelayHarness { relay in
            try await relay.startActivity("k", on: ["iphone-1"])
            let token = try #require(try await relay.store.activityTokens(app: harnessApp, key: "k").first?.token)
            #expect(relay.emulator.registry.setState(of: token, to: .expired))
            _ = try await relay.post("/v1/activities/k/update", .object([("contentState", content("a", 1))]))
            try await relay.dispatch()
            let after = try #require(try await relay.store.activityTokens(app: harnessApp, key: "k").first)
            #expect(after.state == .dead)
            #expect(after.lastReason == "ExpiredToken")
            #expect(try await relay.post("/v1/activities/k/update", .object([("contentState", content("b", 2))])).json["deliveries"] == .integer(0))
        }
    }

    @Test func aBroadcastOnANoStorageChannelIsSentWithExpirationZero() async throws {
        try await withRelayHarness { relay in
            relay.emulator.registry.setBroadcastEnabled(for: nil)
            try await relay.addRegisteredDevice("iphone-1")
            let started = try await relay.post(
                "/v1/activities/live/start", startBody(key: "live", extra: [("channel", json(#"{"storagePolicy": 0}"#))]))
            #expect(started.status == 201)
            try await relay.dispatch()
            _ = try await relay.post("/v1/activities/live/update", .object([("contentState", content("1-0", 60))]))
            try await relay.dispatch()
            let broadcast = try #require(relay.emulator.journal.requests.last { $0.path.hasPrefix("/4/broadcasts/") })
            #expect(broadcast.header("apns-expiration") == "0")
            #expect(broadcast.status == 200)
            #expect(try relay.activity(on: "iphone-1")?.content.state == content("1-0", 60))
        }
    }

    @Test func healthMetricsAndTheOpenAPIDocumentAreServed() async throws {
        try await withRelayHarness { relay in
            try await relay.addRegisteredDevice("iphone-1")
            _ = try await relay.post("/v1/activities/k/start", startBody(key: "k"))
            #expect(try await relay.get("/v1/health", scope: nil).json == json(#"{"status": "ok", "outbox": {"queued": 1}}"#))
            try await relay.dispatch()
            #expect(try await relay.get("/v1/health", scope: nil).json == json(#"{"status": "ok", "outbox": {"queued": 0}}"#))
            let metrics = try await relay.get("/metrics", scope: .admin)
            #expect(metrics.text.contains(#"liverelay_pushes_total{event="start",result="sent"} 1"#))
            #expect(PrometheusSamples(metrics.text).value("liverelay_push_to_start_tokens") == 1)
            // Every series says what it is, as Prometheus' text format has it.
            let types = metrics.text.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }
            let helps = metrics.text.split(separator: "\n").filter { $0.hasPrefix("# HELP ") }
            #expect(!types.isEmpty && helps.count == types.count)
            #expect(helps.allSatisfy { $0.split(separator: " ").count > 3 }, "\(helps)")
            let document = try await relay.get("/openapi.json", scope: nil)
            #expect(document.json["openapi"] == .string("3.1.0"))
        }
    }

    /// The OpenAPI document names exactly the fields each registration body takes: a field the server
    /// reads but the document leaves out (as `iOS` could have been) fails here, not in a client.
    @Suite struct OpenAPIRequestBodiesTests {
        static let document: JSONValue = {
            let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .appendingPathComponent("Sources/LiveRelayHTTP/openapi.json").path
            return try! JSONValue(parsing: Array(FileManager.default.contents(atPath: path)!))
        }()

        @Test(arguments: [
            ("PushToStartRegistration", PushToStartBody.fields), ("ActivityTokenRegistration", ActivityTokenBody.fields),
            ("ChannelListenerRegistration", ChannelListenerBody.fields), ("EndedReport", EndedBody.fields),
            ("StartRequest", StartRequest.fields), ("UpdateRequest", ChangeRequest.updateFields), ("EndRequest", ChangeRequest.endFields),
            ("ContractRequest", ContractBody.fields), ("WidgetTokens", WidgetTokensBody.fields), ("ControlTokens", ControlTokensBody.fields),
            ("ReloadRequest", ReloadRequest.fields),
        ])
        func theDocumentNamesEveryFieldTheBodyTakes(schema: String, fields: [String]) throws {
            let properties = try #require(Self.document["components"]?["schemas"]?[schema]?["properties"]?.objectMembers)
            #expect(Set(properties.map(\.key)) == Set(fields))
        }
    }

}
