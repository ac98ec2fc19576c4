import APNs
import LiveActivityKit
import LiveRelayStore
import Tracing

/// How a push's way through LiveRelay is traced (swift-distributed-tracing, with whatever tracer
/// the process bootstrapped; none costs next to nothing): the API request's span (Hummingbird's
/// `TracingMiddleware`), its store transaction, and for each of its pushes the dispatch and the
/// APNs exchange. The request's trace context is kept with its payload in the store, so that the
/// dispatch continues the request's trace whichever instance sends it, and however much later.
package enum RelayTracing {
    /// Whether a tracer was bootstrapped: without one, no span is made at all (a span that goes
    /// nowhere still binds a task-local, twice a push).
    package static var isOn: Bool { !(InstrumentationSystem.tracer is NoOpTracer) }

    /// The current span's context as W3C `traceparent`, to keep with a request's pushes; nil when
    /// no tracer runs (or no span is current).
    static func currentTraceParent() -> String? {
        guard let context = ServiceContext.current else { return nil }
        var carrier: [String: String] = [:]
        InstrumentationSystem.instrument.inject(context, into: &carrier, using: TraceCarrier())
        return carrier[TraceCarrier.traceParent]
    }

    /// The context a push's spans go in: its request's trace, or a new one.
    static func context(continuing traceParent: String?) -> ServiceContext {
        var context = ServiceContext.topLevel
        if let traceParent {
            InstrumentationSystem.instrument.extract([TraceCarrier.traceParent: traceParent], into: &context, using: TraceCarrier())
        }
        return context
    }

    /// Span attributes, named once: OpenTelemetry's where it has one, `liverelay.*` for ours.
    enum Attribute {
        static let app = "liverelay.app"
        static let key = "liverelay.key"
        static let requestID = "liverelay.request_id"
        static let delivery = "liverelay.delivery_id"
        static let pushes = "liverelay.pushes"
        static let event = "liverelay.event"
        static let environment = "apns.environment"
        static let apnsID = "apns.id"
        static let apnsReason = "apns.reason"
        static let apnsPriority = "apns.priority"
        static let status = "http.response.status_code"
        static let outcome = "liverelay.outcome"
    }
}

/// A trace context as a dictionary of its headers.
private struct TraceCarrier: Injector, Extractor {
    static let traceParent = "traceparent"

    func inject(_ value: String, forKey key: String, into carrier: inout [String: String]) {
        carrier[key] = value
    }

    func extract(key: String, from carrier: [String: String]) -> String? {
        carrier[key]
    }
}

extension RelayTracing {
    /// Runs an accepting write in a span of its own (`name`: what it accepts), named by the
    /// request's app, key and id, and the pushes it queued.
    static func storeTransaction<Outcome: QueuedPushes>(
        _ name: String, app: String, key: String, requestID: String, _ write: () async throws -> Accepted<Outcome>
    ) async throws -> Accepted<Outcome> {
        guard isOn else { return try await write() }
        return try await withSpan("store: \(name)", ofKind: .internal) { span in
            span.attributes[Attribute.app] = app
            span.attributes[Attribute.key] = key
            span.attributes[Attribute.requestID] = requestID
            let accepted = try await write()
            span.attributes[Attribute.pushes] = accepted.outcome.deliveries
            return accepted
        }
    }
}

extension RelayTracing {
    /// Sends one push in a span that continues its request's trace, named by its outcome.
    static func dispatching(
        _ delivery: DeliveryRecord, _ send: () async -> (outcome: DeliveryOutcome, roundTrip: Duration?)
    ) async -> (outcome: DeliveryOutcome, roundTrip: Duration?) {
        guard isOn else { return await send() }
        return await withSpan("dispatch \(delivery.event)", context: context(continuing: delivery.traceParent), ofKind: .internal) { span in
            span.attributes[Attribute.app] = delivery.bundleID
            span.attributes[Attribute.key] = delivery.key
            span.attributes[Attribute.requestID] = delivery.requestID
            span.attributes[Attribute.delivery] = Int(delivery.id)
            span.attributes[Attribute.event] = delivery.event.rawValue
            span.attributes[Attribute.environment] = delivery.environment.rawValue
            let sent = await send()
            switch sent.outcome {
            case .sent(_, let apnsID):
                span.attributes[Attribute.outcome] = "sent"
                span.attributes[Attribute.apnsID] = apnsID
            case .retry(_, _, let reason):
                span.attributes[Attribute.outcome] = "retry"
                span.attributes[Attribute.apnsReason] = reason
            case .failed(_, let reason, let tokenIsDead):
                span.attributes[Attribute.outcome] = tokenIsDead ? "token_dead" : "failed"
                span.attributes[Attribute.apnsReason] = reason
                span.setStatus(SpanStatus(code: .error, message: reason))
            }
            return sent
        }
    }

    /// One exchange with APNs, in a client span under the push's: its status and `apns-id`.
    static func exchanging(_ delivery: DeliveryRecord, _ exchange: () async throws -> APNsRawResponse) async throws -> APNsRawResponse {
        guard isOn else { return try await exchange() }
        return try await withSpan("APNs POST", ofKind: .client) { span in
            span.attributes[Attribute.key] = delivery.key
            span.attributes[Attribute.environment] = delivery.environment.rawValue
            span.attributes[Attribute.apnsPriority] = Int(delivery.priority.rawValue)
            let answer = try await exchange()
            span.attributes[Attribute.status] = answer.status
            span.attributes[Attribute.apnsID] = answer.header("apns-id")
            return answer
        }
    }
}

/// An accepted request's answer, which says how many pushes it queued.
protocol QueuedPushes: Sendable {
    var deliveries: Int { get }
}

extension Acceptance: QueuedPushes {}
extension ReloadAcceptance: QueuedPushes {}
