import Foundation
import LiveActivityKit
import LiveRelayStore
import LiveRelayTesting
import NIOHTTP1
import Testing

/// `serve --otlp-endpoint`: the spans of an update reach an OTLP/HTTP receiver that decodes them
/// with OpenTelemetry's own protobuf definitions, and form one trace from the API request through
/// its store transaction to the dispatch of its push and the APNs exchange.
@Suite(.serialized, .timeLimit(.minutes(3)))
struct TraceExportTests {
    @Test(.enabled(if: OTLPReceiver.isAvailable || TestRequirement.isCI, Comment(rawValue: OTLPReceiver.skipNote)))
    func anUpdatesSpansFormOneTraceFromTheRequestToAPNs() async throws {
        let directory = try TestFiles.folder("serve-traces")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withDeadline(.seconds(120)) {
            let receiver = try await OTLPReceiver.start()
            let server: ServeProcess
            do {
                server = try await ServeProcess.start(
                    ["serve", "--data-dir", directory + "/data", "--http-port", "0", "--otlp-endpoint", receiver.endpoint])
            } catch {
                await receiver.stop()
                throw error
            }
            do {
                let keys = try initialKeys(dataDir: directory + "/data")
                let store = try await SQLiteStore.open(path: directory + "/data/liverelay.sqlite")
                try await eventually { try await store.pushToStartTokens(deviceID: "demo-iphone").count == 1 }
                let (path, body) = try server.printedStart()
                #expect(try await server.call(.POST, path, key: keys.server, body: body).status == 201)
                let key = String(path.split(separator: "/")[2])
                try await eventually {
                    let answer = try await server.call(.GET, "/v1/activities/\(key)", key: keys.server)
                    return answer.json["tokens"]?.arrayElements?.first?["state"] == .string("live")
                }
                let updated = try await server.call(
                    .POST, "/v1/activities/\(key)/update", key: keys.server,
                    body: JSONValue(parsing: #"{"contentState": {"status": "on the way", "etaMinutes": 9}}"#))
                #expect(updated.status == 200, "\(updated.json)")

                // The request's span (Hummingbird's, named by its route), then everything in its trace.
                var trace: [OTLPReceiver.Span] = []
                try await eventually(every: .milliseconds(100)) {
                    let spans = try receiver.spans()
                    guard let request = spans.first(where: { $0.name == "/v1/activities/{key}/update" }) else { return false }
                    trace = spans.filter { $0.trace == request.trace }
                    return trace.contains { $0.name == "APNs POST" }
                }
                let request = try #require(trace.first { $0.name == "/v1/activities/{key}/update" })
                let transaction = try #require(trace.first { $0.name == "store: accept update" })
                let dispatch = try #require(trace.first { $0.name == "dispatch update" })
                let exchange = try #require(trace.first { $0.name == "APNs POST" })
                #expect(request.parent.isEmpty && request.kind == "SPAN_KIND_SERVER" && request.service == "liverelay")
                #expect(transaction.parent == request.id && transaction.attributes["liverelay.key"] == .string(key))
                // Across the hand-over to the dispatcher, and through the store: the same trace.
                #expect(dispatch.parent == request.id && dispatch.attributes["liverelay.key"] == .string(key))
                #expect(dispatch.attributes["liverelay.request_id"] == transaction.attributes["liverelay.request_id"])
                #expect(exchange.parent == dispatch.id && exchange.kind == "SPAN_KIND_CLIENT")
                #expect(exchange.attributes["http.response.status_code"] == .integer(200))
                let apnsID = try #require(exchange.attributes["apns.id"]?.stringValue)
                #expect(dispatch.attributes["apns.id"] == .string(apnsID) && dispatch.attributes["liverelay.outcome"] == .string("sent"))
                let deliveries = try await server.call(.GET, "/v1/deliveries?key=\(key)", key: keys.server).json
                #expect(deliveries["deliveries"]?.arrayElements?.contains { $0["apnsID"] == .string(apnsID) } == true, "\(deliveries)")
            } catch {
                _ = await server.stop()
                await receiver.stop()
                throw error
            }
            #expect(await server.stop() == 0)
            await receiver.stop()
        }
    }

    /// A collector that is down costs warnings in the log, never a slow stop: the spans still to
    /// export are given 3 s (swift-otel's default is 30, and a stop took 15 s with them).
    @Test func aCollectorThatIsDownDoesNotHoldUpAStop() async throws {
        let directory = try TestFiles.folder("serve-traces")
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await withDeadline(.seconds(60)) {
            let nobody = "http://127.0.0.1:\(try freeLoopbackPort())"
            let server = try await ServeProcess.start(
                ["serve", "--data-dir", directory + "/data", "--http-port", "0", "--otlp-endpoint", nobody])
            for _ in 0..<3 { #expect(try await server.call(.GET, "/v1/health", key: nil).status == 200) }
            let stopping = ContinuousClock.now
            #expect(await server.stop() == 0)
            #expect(ContinuousClock.now - stopping < .seconds(8), "\(ContinuousClock.now - stopping)")
        }
    }
}
