#!/usr/bin/env python3
"""A webhook receiver for LiveRelay's tests: every delivery is verified with the Standard Webhooks
specification's own Python library (PyPI: standardwebhooks), as a backend would verify it.

Usage: webhook_receiver.py SECRET PORT LOG [DELAY]
Listens on 127.0.0.1:PORT (0: any free port), prints the port, and appends one JSON line per
request to LOG: {"verified": true, "id": ..., "event": {...}} answered 204, or
{"verified": false, "id": ..., "error": ...} answered 401; DELAY seconds after the line is
written (a slow receiver: the sender can be stopped while it waits). With REDIRECT in the
environment, every post is logged and answered 307 to that address instead.
"""
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks import Webhook

secret, port, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
delay = float(sys.argv[4]) if len(sys.argv) > 4 else 0
redirect = os.environ.get("REDIRECT")
webhook = Webhook(secret)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        headers = {name.lower(): value for name, value in self.headers.items()}
        try:
            event = webhook.verify(body, headers)
            line, status = {"verified": True, "id": headers.get("webhook-id"), "event": event}, 204
        except Exception as error:  # the library's WebhookVerificationError, or a malformed header
            line, status = {"verified": False, "id": headers.get("webhook-id"), "error": str(error)}, 401
        with open(log_path, "a") as log:
            log.write(json.dumps(line) + "\n")
        time.sleep(delay)
        self.send_response(307 if redirect else status)
        if redirect:
            self.send_header("location", redirect)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
