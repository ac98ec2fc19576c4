#!/usr/bin/env python3
"""An OTLP/HTTP trace receiver for LiveRelay's tests: every export is decoded with OpenTelemetry's
own protobuf definitions (PyPI: opentelemetry-proto), as a collector would decode it.

Usage: otlp_receiver.py LOG
Listens on 127.0.0.1 (any free port), prints the port, and answers POST /v1/traces: a body that
decodes as an ExportTraceServiceRequest is answered 200 and each of its spans appended to LOG as
one JSON line {"trace": hex, "span": hex, "parent": hex or "", "name": ..., "kind": ...,
"service": ..., "attributes": {...}}; anything else is answered 400 and logged as {"error": ...}.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
from opentelemetry.proto.trace.v1.trace_pb2 import Span

log_path = sys.argv[1]


def value(any_value):
    kind = any_value.WhichOneof("value")
    return getattr(any_value, kind) if kind else None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        lines, status = [], 200
        try:
            if self.path != "/v1/traces" or self.headers.get("content-type") != "application/x-protobuf":
                raise ValueError(f"{self.path} as {self.headers.get('content-type')}")
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource in request.resource_spans:
                service = {a.key: value(a.value) for a in resource.resource.attributes}.get("service.name")
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        lines.append({
                            "trace": span.trace_id.hex(), "span": span.span_id.hex(), "parent": span.parent_span_id.hex(),
                            "name": span.name, "kind": Span.SpanKind.Name(span.kind), "service": service,
                            "attributes": {a.key: value(a.value) for a in span.attributes},
                        })
        except Exception as error:
            lines, status = [{"error": str(error)}], 400
        with open(log_path, "a") as log:
            for line in lines:
                log.write(json.dumps(line) + "\n")
        answer = ExportTraceServiceResponse().SerializeToString() if status == 200 else b""
        self.send_response(status)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
