"""An HTTP proxy on 127.0.0.1 that damages uploads on their way to a server.

It flips one byte in the body of the PUTs that ``flip`` matches (the damage a
bad NIC or a broken middlebox does), then, by ``mode``:

- ``forward``: sends the damaged body on to a server that validates upload
  checksums (SeaweedFS here, as AWS S3, R2 and MinIO do), which refuses it
  (``400 BadDigest``); the gate counts the refusals of the bodies it damaged;
- ``echo``: forwards it and returns the checksum of the body it received, like
  a service that computes its own checksum and does not compare. That needs an
  upstream that stores a body whose checksum header is wrong: moto (5.2.5 here,
  ``tests/store/test_upload_checksums.py::test_moto_does_not_check_upload_checksums``).

It records every upload that carried no checksum at all.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import re
import threading
import urllib.parse
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

try:
    import google_crc32c
except ImportError:  # then the client sends CRC32 (zlib), which needs nothing
    google_crc32c = None

_HOP_HEADERS = {"connection", "keep-alive", "transfer-encoding", "content-length"}


def _checksum(algorithm: str, body: bytes) -> str:
    """Computed here, independently of the client's code."""
    if algorithm == "crc32c":
        assert google_crc32c is not None, "a CRC32C arrived, but google-crc32c is missing"
        value = google_crc32c.value(body)
    else:
        value = zlib.crc32(body)
    return base64.b64encode(int(value).to_bytes(4, "big")).decode()


class Gate:
    """Shared state of one proxy: what to damage and what it saw."""

    def __init__(self, upstream: str, flip: str, times: int, mode: str) -> None:
        self.upstream = urllib.parse.urlsplit(upstream)
        self.flip, self.times, self.mode = re.compile(flip), times, mode
        self.lock = threading.Lock()
        self.flipped = self.refused = 0
        self.unchecked: list[str] = []  # uploads without any checksum header
        self.url = ""

    def damage(self, method: str, target: str, body: bytearray) -> bool:
        with self.lock:
            if method != "PUT" or not body or self.flipped >= self.times:
                return False
            if not self.flip.search(urllib.parse.unquote(target)):
                return False
            self.flipped += 1
        body[len(body) // 2] ^= 0x10
        return True


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    gate: Gate

    def log_message(self, *_: object) -> None:  # quiet
        pass

    def _relay(self) -> None:
        gate = self.gate
        if "chunked" in self.headers.get("Transfer-Encoding", ""):
            self._answer(501, {}, b"chunked uploads are not handled by this proxy")
            return
        body = bytearray(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        damaged = gate.damage(self.command, self.path, body)
        sent = {
            alg: self.headers[f"x-amz-checksum-{alg}"]
            for alg in ("crc32c", "crc32")
            if self.headers.get(f"x-amz-checksum-{alg}")
        }
        if self.command == "PUT" and body and not sent:
            with gate.lock:
                gate.unchecked.append(self.path)
        status, headers, data = self._forward(bytes(body))
        if damaged and status == 400 and b"BadDigest" in data:  # not the client's own probe
            with gate.lock:
                gate.refused += 1
        if gate.mode == "echo" and status == 200:
            for alg in sent:
                headers[f"x-amz-checksum-{alg}"] = _checksum(alg, bytes(body))
        self._answer(status, headers, data)

    def _forward(self, body: bytes) -> tuple[int, dict[str, str], bytes]:
        up = self.gate.upstream
        conn = http.client.HTTPConnection(up.hostname or "127.0.0.1", up.port, timeout=30)
        try:
            headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_HEADERS}
            headers["Content-Length"] = str(len(body))
            conn.request(self.command, self.path, body=body, headers=headers)
            resp = conn.getresponse()
            data = resp.read()
            kept = {k: v for k, v in resp.getheaders() if k.lower() not in _HOP_HEADERS}
            return resp.status, kept, data
        finally:
            conn.close()

    def _answer(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = _relay


@contextmanager
def checksum_gate(
    upstream: str, *, flip: str = r"\.bin", times: int = 1, mode: str = "forward"
) -> Iterator[Gate]:
    """A running proxy to ``upstream``; point the client at ``gate.url``."""
    gate = Gate(upstream, flip, times, mode)
    handler = type("Handler", (_Handler,), {"gate": gate})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    gate.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield gate
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
