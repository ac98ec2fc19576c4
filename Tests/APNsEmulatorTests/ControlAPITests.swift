import APNs
import AsyncHTTPClient
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import LiveActivityKit
import LiveRelayTesting
import NIOCore
import NIOHTTP1
import Testing

@testable import APNsEmulator

/// The control API through its real router, driving a real emulator that our client pushes to.
@Suite struct ControlAPITests {
    let bundle = "com.example.delivery"
    let token = String(repeating: "5e", count: 80)

    /// A running emulator, its control API under test, and a client whose key is not yet registered.
    func withControlAPI(
        _ body: @escaping @Sendable (any TestClientProtocol, APNsEmulator, APNsClient, TestSigningKey) async throws -> Void
    ) async throws {
        let key = TestSigningKey(keyID: "CONTROLKEY", teamID: "TEAMCTRL12")
        try await withEmulatorAndClient(key: key, registerKey: false) { emulator, apns in
            try await Application(router: EmulatorControlAPI(emulator: emulator).router()).test(.router) { client in
                try await body(client, emulator, apns, key)
            }
        }
    }

    func send(_ client: any TestClientProtocol, _ method: HTTPRequest.Method, _ uri: String, _ json: String? = nil) async throws -> (
        status: Int, body: JSONValue?
    ) {
        try await client.sendJSON(method, uri, json)
    }

    func push(_ apns: APNsClient, to token: String? = nil) async throws {
        let payload = try LiveActivityPayload.update(content: ActivityContent(state: ["eta": 12], staleDate: nil), timestamp: Date())
        try await apns.send(payload, to: DeviceToken(token ?? self.token), topic: BundleID(bundle))
    }

    func registerKeyAndToken(_ client: any TestClientProtocol, _ key: TestSigningKey) async throws {
        let pem = key.privateKey.pemRepresentation.replacingOccurrences(of: "\n", with: "\\n")
        let registered = try await send(client, .post, "/keys", #"{"keyID":"CONTROLKEY","teamID":"TEAMCTRL12","publicKey":"\#(pem)"}"#)
        #expect(registered.status == 201)
        #expect(registered.body?["environments"] == .array([.string("production"), .string("sandbox")]))
        let token = try await send(client, .post, "/tokens", #"{"token":"\#(token.uppercased())","bundleID":"\#(bundle)"}"#)
        #expect(token.status == 201)
        #expect(token.body?["token"] == .string(self.token), "stored in lowercase hex")
        #expect(token.body?["state"] == .string("active"))
        #expect(token.body?["pushType"] == .string("liveactivity"))
        let widgets = try await send(client, .post, "/tokens", #"{"token":"5a5a","bundleID":"\#(bundle)","pushType":"widgets"}"#)
        #expect(widgets.status == 201 && widgets.body?["pushType"] == .string("widgets"))
    }

    /// The port asks for no key, so what only a web page would send is refused: a write that is
    /// not JSON (a cross-site form or `text/plain` fetch needs no preflight), another site's origin,
    /// and a name other than loopback's (DNS rebinding would let a page read the journal).
    @Test func requestsOnlyAWebPageWouldSendAreRefused() async throws {
        try await withControlAPI { client, emulator, _, _ in
            let fault = #"{"action":"respond","reason":"InternalServerError"}"#
            for type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
                let refused = try await client.sendJSON(.post, "/faults", fault, headers: [.contentType: type])
                #expect(refused.status == 415, "\(type)")
                #expect(refused.body?["error"]?["field"] == .string("content-type"))
            }
            #expect(emulator.faults.installed.isEmpty, "no fault was injected")
            for origin in ["https://evil.example", "null", "http://127.0.0.1.evil.example"] {
                let refused = try await client.sendJSON(.post, "/faults", fault, headers: [.origin: origin])
                #expect(refused.status == 403 && refused.body?["error"]?["field"] == .string("origin"), "\(origin)")
            }
            #expect(emulator.faults.installed.isEmpty)
            let sameSite = try await client.sendJSON(.post, "/faults", fault, headers: [.origin: "http://127.0.0.1:4321"])
            #expect(sameSite.status == 201)
            // A bodiless write is no form; the page's own forms carry its token instead.
            #expect(try await client.sendJSON(.delete, "/faults").status == 204)
            let form = try await client.sendJSON(
                .post, "/person", "device=x&action=lock", headers: [.contentType: "application/x-www-form-urlencoded"])
            #expect(form.status == 403 && form.body?["error"]?["field"] == .string("form"))
        }
    }

    /// Over the wire, as a browser sends it: a page served from another name that resolves to
    /// 127.0.0.1 (DNS rebinding) is refused; loopback names are served.
    @Test func onlyLoopbackHostNamesAreServed() async throws {
        try await withEmulatorAndClient(key: TestSigningKey(keyID: "CONTROLKEY", teamID: "TEAMCTRL12"), registerKey: false) { emulator, _ in
            try await Application(router: EmulatorControlAPI(emulator: emulator).router()).test(.live) { client in
                let port = try #require(client.port)
                func status(host: String) async throws -> (Int, JSONValue?) {
                    var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)/journal")
                    request.headers.replaceOrAdd(name: "Host", value: host)
                    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
                    let body = try await response.body.collect(upTo: 1 << 20)
                    return (Int(response.status.code), try? JSONValue(parsing: body.readableBytesView))
                }
                for host in ["evil.example", "evil.example:\(port)", "127.0.0.1.nip.io", "128.0.0.1"] {
                    let (code, body) = try await status(host: host)
                    #expect(code == 403 && body?["error"]?["field"] == .string("host"), "\(host)")
                }
                for host in ["127.0.0.1:\(port)", "localhost", "LOCALHOST:\(port)", "[::1]:\(port)", "127.0.0.2"] {
                    #expect(try await status(host: host).0 == 200, "\(host)")
                }
            }
        }
    }

    @Test func keysAndTokensRegisteredThroughTheAPIAreHonouredOnTheWire() async throws {
        try await withControlAPI { client, emulator, apns, key in
            let refused = await #expect(throws: APNsError.self) { try await push(apns) }
            #expect(refused?.reason == .badDeviceToken, "nothing registered yet")
            try await registerKeyAndToken(client, key)
            try await push(apns)

            let journal = try await send(client, .get, "/journal?outcome=Success")
            let entries = journal.body?["requests"]?.arrayElements ?? []
            #expect(entries.count == 1)
            #expect(entries.first?["status"] == .number("200"))
            #expect(entries.first?["path"] == .string("/3/device/\(token)"))
            #expect(journal.body?["last"] == entries.first?["sequence"])
            let counts = try await send(client, .get, "/journal/counts")
            #expect(counts.body?["counts"] == .object([("BadDeviceToken", .number("1")), ("Success", .number("1"))]).sortedKeys)
            let after = try await send(client, .get, "/journal?after=2")
            #expect(after.body?["requests"] == .array([]))
            let status = try await send(client, .get, "/emulator")
            #expect(status.body?["environments"]?["sandbox"]?["pushPort"] == .number(String(emulator.ports(.sandbox).push)))
            #expect(
                status.body?["environments"]?["production"]?["channelManagementPort"]
                    == .number(String(emulator.ports(.production).channelManagement)))
            #expect(entries.first?["environment"] == .string("sandbox"))
        }
    }

    @Test func anUnregisteredTokenIsAnswered410WithItsTime() async throws {
        try await withControlAPI { client, _, apns, key in
            try await registerKeyAndToken(client, key)
            let gone = try await send(client, .post, "/tokens/\(token)/unregister", #"{"at":"2026-11-21T10:00:00Z"}"#)
            #expect(gone.body?["state"] == .string("unregistered"))
            let refused = await #expect(throws: APNsError.self) { try await push(apns) }
            #expect(refused?.status == 410 && refused?.reason == .unregistered)
            #expect(refused?.timestamp == ISO8601DateFormatter().date(from: "2026-11-21T10:00:00Z"))

            _ = try await send(client, .post, "/tokens/\(token)/expire")
            let expired = await #expect(throws: APNsError.self) { try await push(apns) }
            #expect(expired?.reason == .expiredToken)
            let unknown = try await send(client, .get, "/tokens/\(String(repeating: "00", count: 80))")
            #expect(unknown.status == 404 && unknown.body?["error"]?["field"] == .string("token"))
        }
    }

    @Test func aFreezeScriptedThroughTheAPIHoldsTheConnectionsAnswersThatLong() async throws {
        try await withControlAPI { client, _, apns, key in
            try await registerKeyAndToken(client, key)
            try await push(apns)
            let created = try await send(client, .post, "/faults", #"{"action":"freeze","delayMilliseconds":400}"#)
            #expect(created.status == 201)
            #expect(created.body?["action"] == .string("freeze") && created.body?["delayMilliseconds"] == .number("400"))
            let start = ContinuousClock.now
            try await push(apns)
            #expect(ContinuousClock.now - start >= .milliseconds(400), "answered once the connection thawed")
        }
    }

    @Test func faultsScriptedThroughTheAPIReachTheClient() async throws {
        try await withControlAPI { client, _, apns, key in
            try await registerKeyAndToken(client, key)
            let created = try await send(
                client, .post, "/faults", #"{"action":"respond","reason":"InternalServerError","token":"\#(token)","count":2}"#)
            #expect(created.status == 201)
            #expect(created.body?["status"] == .number("500"))
            for _ in 0..<2 {
                let failed = await #expect(throws: APNsError.self) { try await push(apns) }
                #expect(failed?.status == 500 && failed?.reason == .internalServerError)
            }
            try await push(apns)
            #expect(try await send(client, .get, "/faults").body?["faults"] == .array([]), "spent after two")

            let forever = try await send(client, .post, "/faults", #"{"action":"respond","reason":"TooManyRequests","untilRemoved":true}"#)
            let id = try #require(forever.body?["id"]?.doubleValue.map { Int($0) })
            let throttled = await #expect(throws: APNsError.self) { try await push(apns) }
            #expect(throttled?.status == 429)
            #expect(try await send(client, .get, "/faults").body?["faults"]?[0]?["applied"] == .number("1"))
            #expect(try await send(client, .delete, "/faults/\(id)").status == 204)
            try await push(apns)
            #expect(try await send(client, .delete, "/faults/\(id)").status == 404)
        }
    }

    @Test func theBroadcastCapabilityCanBeWithdrawn() async throws {
        try await withControlAPI { client, _, apns, key in
            try await registerKeyAndToken(client, key)
            let set = try await send(client, .put, "/broadcast-capability", #"{"bundleIDs":["com.example.other"]}"#)
            #expect(set.body?["bundleIDs"] == .array([.string("com.example.other")]))
            let refused = await #expect(throws: APNsError.self) {
                try await apns.createChannel(bundleID: BundleID(bundle), storagePolicy: .noMessageStored)
            }
            #expect(refused?.reason == .featureNotEnabled)
            #expect(try await send(client, .put, "/broadcast-capability", #"{"bundleIDs":null}"#).body?["bundleIDs"] == .null)
            let channel = try await apns.createChannel(bundleID: BundleID(bundle), storagePolicy: .mostRecentMessageStored)
            let listed = try await send(client, .get, "/channels?bundleID=\(bundle)")
            #expect(listed.body?["channels"]?[0]?["channelID"] == .string(channel))
            #expect(listed.body?["channels"]?[0]?["messageStoragePolicy"] == .number("1"))
        }
    }

    struct BadRequest: Sendable, CustomTestStringConvertible {
        let method: HTTPRequest.Method
        let uri: String
        let body: String?
        let status: Int
        let code: String
        let field: String?
        var testDescription: String { "\(method) \(uri) \(body ?? "")" }
    }

    static let badRequests: [BadRequest] = [
        .init(method: .post, uri: "/tokens", body: #"{"token":"abcd","bundleId":"com.x"}"#, status: 400, code: "unknown_key", field: "bundleId"),
        .init(method: .post, uri: "/tokens", body: #"{"bundleID":"com.x"}"#, status: 400, code: "missing", field: "token"),
        .init(method: .post, uri: "/tokens", body: #"{"token":5,"bundleID":"com.x"}"#, status: 400, code: "wrong_type", field: "token"),
        .init(method: .post, uri: "/tokens", body: #"{"token":"abc","bundleID":"com.x"}"#, status: 400, code: "invalid_value", field: "token"),
        .init(
            method: .post, uri: "/tokens", body: #"{"token":"abcd","bundleID":"com.x.push-type.liveactivity"}"#, status: 400, code: "invalid_value",
            field: "bundleID"),
        .init(
            method: .post, uri: "/tokens", body: #"{"token":"abcd","bundleID":"com.x","environment":"staging"}"#, status: 400, code: "invalid_value",
            field: "environment"),
        .init(
            method: .post, uri: "/tokens", body: #"{"token":"abcd","bundleID":"com.x","pushType":"alert"}"#, status: 400, code: "invalid_value",
            field: "pushType"),
        .init(
            method: .post, uri: "/tokens", body: #"{"token":"abcd","bundleID":"com.x.push-type.widgets","pushType":"widgets"}"#, status: 400,
            code: "invalid_value", field: "bundleID"),
        .init(method: .post, uri: "/tokens", body: #"{"token":"#, status: 400, code: "invalid_json", field: nil),
        .init(method: .post, uri: "/tokens", body: "[]", status: 400, code: "wrong_type", field: nil),
        .init(
            method: .post, uri: "/keys", body: #"{"keyID":"K","teamID":"T","publicKey":"not a key"}"#, status: 400, code: "invalid_value",
            field: "publicKey"),
        .init(method: .post, uri: "/faults", body: #"{"action":"explode"}"#, status: 400, code: "invalid_value", field: "action"),
        .init(method: .post, uri: "/faults", body: #"{"action":"respond"}"#, status: 400, code: "missing", field: "reason"),
        .init(
            method: .post, uri: "/faults", body: #"{"action":"respond","reason":"Brand new"}"#, status: 400, code: "invalid_value", field: "status"),
        .init(method: .post, uri: "/faults", body: #"{"action":"delay"}"#, status: 400, code: "invalid_value", field: "delayMilliseconds"),
        .init(
            method: .post, uri: "/faults", body: #"{"action":"freeze","delayMilliseconds":0}"#, status: 400, code: "invalid_value",
            field: "delayMilliseconds"),
        .init(method: .post, uri: "/faults", body: #"{"action":"reset","count":0}"#, status: 400, code: "invalid_value", field: "count"),
        .init(
            method: .post, uri: "/faults", body: #"{"action":"reset","token":"ab","bundleID":"com.x"}"#, status: 400, code: "invalid_value",
            field: "bundleID"),
        .init(method: .get, uri: "/journal?limit=-1", body: nil, status: 400, code: "invalid_value", field: "limit"),
        .init(method: .get, uri: "/nowhere", body: nil, status: 404, code: "not_found", field: nil),
    ]

    @Test(arguments: badRequests)
    func badInputGetsOneErrorShapeNamingTheField(_ bad: BadRequest) async throws {
        try await withControlAPI { client, emulator, _, _ in
            let answer = try await send(client, bad.method, bad.uri, bad.body)
            #expect(answer.status == bad.status)
            #expect(answer.body?["error"]?["code"] == .string(bad.code))
            #expect(answer.body?["error"]?["field"] == bad.field.map(JSONValue.string))
            #expect(answer.body?["error"]?["message"]?.stringValue?.isEmpty == false)
            #expect(emulator.registry.keys.isEmpty && emulator.faults.installed.isEmpty, "nothing half-registered")
        }
    }
}
