"""TEST DOUBLE: an OpenAI-compatible endpoint that quotes the caller's credentials back, as real
servers' error bodies do ("Incorrect API key provided: sk-..."). Started on loopback by the tests."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

SECRET = "sk-test-SECRET123"


class EchoingServer(BaseHTTPRequestHandler):
    """``mode``: the HTTP status to answer ("401", "403", "500"), or "200" with a reply that repeats the header."""

    mode = "401"

    def do_POST(self):  # noqa: N802
        self.rfile.read(int(self.headers["Content-Length"]))
        key = self.headers.get("Authorization", "").removeprefix("Bearer ")
        if type(self).mode == "200":  # a reply that repeats the header it got, as JSON the schema refuses
            status, body = 200, {"choices": [{"message": {"content": f"Authorization: Bearer {key} ... {key}"}}], "usage": {}}
        else:
            status = int(type(self).mode)
            body = {"error": {"message": f"Incorrect API key provided: {key}. Header was 'Authorization: Bearer {key}'"}}
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass
