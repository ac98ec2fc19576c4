import Foundation
import Logging
import OTel
import ServiceLifecycle
import Tracing

/// `serve --otlp-endpoint`: the spans (`RelayTracing`) exported as OTLP over HTTP with swift-otel,
/// in batches a second apart. The standard `OTEL_*` variables tune the rest (sampling, headers).
enum TraceExport {
    /// Bootstraps the process's tracer and returns the service that exports its spans, which
    /// flushes what is left when it stops.
    static func bootstrap(endpoint: String, logger: Logger) throws -> any Service {
        var configuration = OTel.Configuration.default
        configuration.serviceName = "liverelay"
        configuration.diagnosticLogger = .custom(logger)
        configuration.diagnosticLogLevel = .warning
        configuration.logs.enabled = false
        configuration.metrics.enabled = false
        configuration.traces.exporter = .otlp
        configuration.traces.otlpExporter.protocol = .httpProtobuf
        configuration.traces.otlpExporter.endpoint = tracesURL(endpoint)
        configuration.traces.batchSpanProcessor.scheduleDelay = .seconds(1)
        // A collector that is down must not hold up a SIGTERM for swift-otel's default 30 s.
        configuration.traces.batchSpanProcessor.exportTimeout = .seconds(3)
        configuration.traces.otlpExporter.timeout = .seconds(3)
        let (tracer, service) = try OTel.makeTracingBackend(configuration: configuration)
        InstrumentationSystem.bootstrap(tracer)
        return service
    }

    /// The address spans are posted to: a collector's bare address (`http://host:4318`) gets
    /// OTLP/HTTP's `/v1/traces`; one with a path is used as it is.
    static func tracesURL(_ endpoint: String) -> String {
        guard let url = URL(string: endpoint), url.path.isEmpty || url.path == "/" else { return endpoint }
        return (endpoint.hasSuffix("/") ? String(endpoint.dropLast()) : endpoint) + "/v1/traces"
    }

    /// Why `endpoint` is no collector's address, or nil.
    static func problem(_ endpoint: String) -> String? {
        guard let url = URL(string: endpoint), ["http", "https"].contains(url.scheme?.lowercased() ?? ""), url.host?.isEmpty == false else {
            return "must be an http:// or https:// address (an OTLP/HTTP collector, e.g. http://127.0.0.1:4318), got \(endpoint)"
        }
        return nil
    }
}
