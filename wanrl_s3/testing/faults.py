"""A fault-injecting HTTP/1.1 proxy for an S3 endpoint (SeaweedFS or moto in tests).

Black-box fault testing: put :class:`FaultProxy` between a client (the CLI,
a worker, a :class:`~wanrl_s3.store.ObjectStore`) and the server, and it
injects, per request, the faults real networks and services produce: throttling
and 5xx answers, connection resets before or after the server acted (the lost
response to a conditional write), truncated and trickling bodies, and flipped
bytes in either direction, and conditional headers dropped (a store that
ignores ``If-None-Match`` and ``If-Match``). Which request gets which fault is chosen by
:class:`Rule` s (method, key pattern, probability, how many times) from a seeded
random generator, and every fault is counted. A :class:`~wanrl_s3.testing.RateLimit`
adds S3's request-rate limit per prefix: requests past it are answered 503 SlowDown.

Requests are forwarded byte for byte (SigV4 signs them), chunked bodies
included (boto3's ``aws-chunked`` uploads with trailing checksums pass through
with their framing intact); responses are re-framed with a ``Content-Length``.
Each request gets its own upstream connection. Every loop is bounded and
every socket has a timeout, so a stuck peer cannot hang the proxy.
"""

from __future__ import annotations

import contextlib
import enum
import random
import re
import socket
import socketserver
import struct
import threading
import time
import urllib.parse
from collections import Counter
from dataclasses import dataclass, field
from typing import BinaryIO

from ..errors import UsageError
from .seaweed import CREDENTIALS
from .sigv4 import resign
from .throttle import RateLimit

_MAX_LINE_BYTES = 64 * 1024
_MAX_HEADERS = 200
_MAX_CHUNKS = 1_000_000
_MAX_REQUESTS_PER_CONNECTION = 10_000
_NO_BODY_STATUSES = frozenset({204, 304})


class Fault(enum.Enum):
    """What the proxy does to one request."""

    SLOW_DOWN = "slow_down"  # 503 SlowDown; the server never sees the request
    INTERNAL_ERROR = "internal_error"  # 500 InternalError; the server never sees it
    RESET_BEFORE = "reset_before"  # connection reset; the server never sees it
    RESET_AFTER = "reset_after"  # the server acted; its response is lost (reset)
    TRUNCATE = "truncate"  # the response body stops halfway (reset)
    TRICKLE = "trickle"  # the response body dribbles out (slow, bounded)
    FLIP_REQUEST = "flip_request"  # one byte of the request body flipped (upload corruption)
    FLIP_RESPONSE = "flip_response"  # one byte of the response body flipped
    # If-None-Match and If-Match dropped (the request re-signed): a store that ignores them
    IGNORE_CONDITIONS = "ignore_conditions"


@dataclass(frozen=True)
class Rule:
    """Apply ``fault`` to requests with this ``method`` whose key matches ``key``.

    ``key`` is a regular expression searched in the unquoted request path
    (``/bucket/prefix/v/000000000002/manifest.json``); None matches any.
    ``min_body_bytes`` keeps only requests whose body is at least that long:
    uploads of data, on any service, whatever its paths look like.
    ``count`` caps how many times the rule fires (None: no cap).
    """

    fault: Fault
    method: str | None = None
    key: str | None = None
    probability: float = 1.0
    count: int | None = None
    min_body_bytes: int = 0

    def __post_init__(self) -> None:
        if not 0.0 <= self.probability <= 1.0:
            raise UsageError(f"Rule.probability must be in [0, 1], got {self.probability}")
        if self.count is not None and self.count < 0:
            raise UsageError(f"Rule.count must be >= 0 or None, got {self.count}")
        if self.key is not None:
            re.compile(self.key)

    def matches(self, method: str, path: str, body_bytes: int = 0) -> bool:
        """Whether a request (``method``, URL ``path``, body length in bytes) is one this rule
        targets; ``probability`` and ``count`` are the proxy's to apply."""
        return (
            (self.method is None or self.method == method)
            and (self.key is None or re.search(self.key, path) is not None)
            and body_bytes >= self.min_body_bytes
        )


@dataclass
class _Message:
    """One HTTP message: its head (start line and headers, as received) and body."""

    start: bytes
    headers: list[tuple[bytes, bytes]]
    body: bytes = b""
    body_spans: list[tuple[int, int]] = field(default_factory=list)  # payload bytes in body

    def header(self, name: bytes) -> bytes | None:
        return next((v for k, v in self.headers if k.lower() == name), None)

    def head_bytes(self) -> bytes:
        lines = [self.start, *(k + b": " + v for k, v in self.headers)]
        return b"\r\n".join(lines) + b"\r\n\r\n"


def _read_line(rfile: BinaryIO) -> bytes:
    line = rfile.readline(_MAX_LINE_BYTES + 1)
    if len(line) > _MAX_LINE_BYTES:
        raise ConnectionError("header line too long")
    return line


def _read_head(rfile: BinaryIO) -> _Message | None:
    """Start line and headers; None at a clean end of the connection."""
    start = _read_line(rfile)
    if not start:
        return None
    headers: list[tuple[bytes, bytes]] = []
    for _ in range(_MAX_HEADERS):
        line = _read_line(rfile)
        if line in (b"\r\n", b"\n", b""):
            return _Message(start.rstrip(b"\r\n"), headers)
        name, _, value = line.rstrip(b"\r\n").partition(b":")
        headers.append((name.strip(), value.strip()))
    raise ConnectionError("too many headers")


def _read_exact(rfile: BinaryIO, n: int) -> bytes:
    data = rfile.read(n)
    if len(data) != n:
        raise ConnectionError(f"body ended after {len(data)} of {n} bytes")
    return data


def _read_chunked(rfile: BinaryIO) -> tuple[bytes, list[tuple[int, int]]]:
    """A chunked body exactly as sent (sizes, data, trailers) and where its data lies."""
    raw = bytearray()
    spans: list[tuple[int, int]] = []
    for _ in range(_MAX_CHUNKS):
        size_line = _read_line(rfile)
        raw += size_line
        size = int(size_line.split(b";")[0].strip() or b"x", 16)
        if size == 0:
            for _ in range(_MAX_HEADERS):  # trailers (trailing checksums), then a blank line
                line = _read_line(rfile)
                raw += line
                if line in (b"\r\n", b"\n", b""):
                    return bytes(raw), spans
            raise ConnectionError("too many trailers")
        spans.append((len(raw), len(raw) + size))
        raw += _read_exact(rfile, size + 2)  # data and its CRLF
    raise ConnectionError("too many chunks")


def _read_body(rfile: BinaryIO, msg: _Message, *, until_eof: bool) -> None:
    """Fill ``msg.body``: chunked (kept as sent), Content-Length, or (responses) to EOF."""
    if b"chunked" in (msg.header(b"transfer-encoding") or b"").lower():
        msg.body, msg.body_spans = _read_chunked(rfile)
        return
    length = msg.header(b"content-length")
    if length is not None:
        msg.body = _read_exact(rfile, int(length))
    elif until_eof:
        msg.body = rfile.read()
    msg.body_spans = [(0, len(msg.body))]


def _read_request(rfile: BinaryIO, wfile: BinaryIO) -> _Message | None:
    msg = _read_head(rfile)
    if msg is None:
        return None
    if (msg.header(b"expect") or b"").lower() == b"100-continue":
        wfile.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        wfile.flush()
    _read_body(rfile, msg, until_eof=False)
    return msg


def _read_response(rfile: BinaryIO, method: str) -> _Message:
    """The final response (interim 1xx answers skipped), its body decoded."""
    for _ in range(10):
        msg = _read_head(rfile)
        if msg is None:
            raise ConnectionError("the server closed the connection without answering")
        status = int(msg.start.split()[1])
        if status >= 200:
            break
    else:
        raise ConnectionError("too many interim responses")
    if method != "HEAD" and status not in _NO_BODY_STATUSES:
        _read_body(rfile, msg, until_eof=True)
        if msg.header(b"transfer-encoding") is not None:
            msg.body = b"".join(msg.body[a:b] for a, b in msg.body_spans)
        msg.headers = [
            (k, v)
            for k, v in msg.headers
            if k.lower() not in (b"transfer-encoding", b"content-length", b"connection")
        ]
        msg.headers.append((b"Content-Length", str(len(msg.body)).encode()))
        msg.body_spans = [(0, len(msg.body))]
    return msg


def _s3_error(status: int, code: str) -> _Message:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
        f"<Message>injected by FaultProxy</Message></Error>"
    ).encode()
    reason = {500: "Internal Server Error", 503: "Slow Down"}[status]
    headers = [(b"Content-Type", b"application/xml"), (b"Content-Length", str(len(body)).encode())]
    return _Message(f"HTTP/1.1 {status} {reason}".encode(), headers, body, [(0, len(body))])


def _flip(msg: _Message, rng: random.Random) -> bool:
    """Flip one bit of one payload byte of ``msg`` (False if it has none)."""
    spans = [(a, b) for a, b in msg.body_spans if b > a]
    if not spans:
        return False
    a, b = rng.choice(spans)
    pos = rng.randrange(a, b)
    body = bytearray(msg.body)
    body[pos] ^= 1 << rng.randrange(8)
    msg.body = bytes(body)
    return True


def _reset(conn: socket.socket) -> None:
    """Close with a TCP reset (SO_LINGER 0), not a polite FIN."""
    with contextlib.suppress(OSError):
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


class FaultProxy:
    """A threaded HTTP/1.1 proxy on 127.0.0.1 in front of ``upstream`` that injects faults.

    Use as a context manager (or :meth:`start` / :meth:`stop`); point a store
    at :attr:`url`. :attr:`counts` says how often each fault fired,
    :attr:`requests` how many requests came in and :attr:`repeats` how many of
    them repeated an earlier one (same method, target, range and conditions
    since :meth:`reset_counters`): the retries the client spent.
    :attr:`response_bytes` counts the response body bytes sent to clients (what
    a bounded read must keep small).
    """

    def __init__(
        self,
        upstream: str,
        *,
        seed: int = 0,
        rules: list[Rule] | None = None,
        timeout_s: float = 30.0,
        trickle_bytes: int = 4096,
        trickle_delay_s: float = 0.02,
        trickle_max_s: float = 0.5,
        secret_key: str = CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
        rate_limit: RateLimit | None = None,
    ) -> None:
        """``secret_key`` re-signs requests whose headers a fault changed. ``rate_limit``
        refuses (503 SlowDown) what a partition is asked past its rate, before any rule."""
        parsed = urllib.parse.urlsplit(upstream)
        if parsed.scheme != "http" or not parsed.hostname or not parsed.port:
            raise UsageError(f"FaultProxy needs an http://HOST:PORT upstream, got {upstream!r}")
        self.upstream = (parsed.hostname, parsed.port)
        self.timeout_s = timeout_s
        self.trickle = (trickle_bytes, trickle_delay_s, trickle_max_s)
        self._secret_key = secret_key
        self.rate_limit = rate_limit
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._rules: list[tuple[Rule, int]] = []  # (rule, times fired)
        self.set_rules(rules or [])
        self.counts: Counter[Fault] = Counter()
        self.requests = 0
        self.repeats = 0
        self.response_bytes = 0
        self._seen: set[tuple[bytes, ...]] = set()
        self._conns: set[socket.socket] = set()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.proxy = self
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``: the endpoint a client uses in place of the upstream's."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    # -- control ----------------------------------------------------------------
    def set_rules(self, rules: list[Rule]) -> None:
        """Replace the rules (their fire counts start again from zero)."""
        with self._lock:
            self._rules = [(r, 0) for r in rules]

    def clear(self) -> None:
        """Drop every rule: requests pass through untouched (a rate limit still applies)."""
        self.set_rules([])

    def reset_counters(self) -> None:
        """Zero the counts of faults, requests, repeated requests and response bytes (the rules'
        fire counts stay)."""
        with self._lock:
            self.counts.clear()
            self.requests = self.repeats = self.response_bytes = 0
            self._seen.clear()

    def start(self) -> FaultProxy:
        """Serve on a background thread; returns ``self``."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop accepting, reset every open connection, and wait for the server thread."""
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            conns, self._conns = list(self._conns), set()
        for conn in conns:
            _reset(conn)
        if self._thread is not None:
            self._thread.join(timeout=self.timeout_s)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    # -- per request --------------------------------------------------------------
    def _choose(self, req: _Message) -> Fault | None:
        """Count the request and pick its fault: the first rule that matches and fires."""
        method, target = req.start.split(b" ")[:2]
        path = urllib.parse.unquote(target.decode("latin-1").split("?")[0])
        ident = (method, target, *(req.header(h) or b"" for h in _IDENTITY_HEADERS))
        with self._lock:
            self.requests += 1
            self.repeats += ident in self._seen
            self._seen.add(ident)
            limit = self.rate_limit
            if limit is not None and not limit.admit(method.decode(), target.decode("latin-1")):
                self.counts[Fault.SLOW_DOWN] += 1
                return Fault.SLOW_DOWN
            for i, (rule, fired) in enumerate(self._rules):
                if not rule.matches(method.decode(), path, len(req.body)):
                    continue
                if rule.count is not None and fired >= rule.count:
                    continue
                if self._rng.random() >= rule.probability:
                    continue
                self._rules[i] = (rule, fired + 1)
                self.counts[rule.fault] += 1
                return rule.fault
        return None

    def _forward(self, req: _Message) -> _Message:
        with socket.create_connection(self.upstream, timeout=self.timeout_s) as up:
            up.sendall(req.head_bytes() + req.body)
            with up.makefile("rb") as rfile:
                return _read_response(rfile, req.start.split(b" ")[0].decode())

    def _serve(self, wfile: BinaryIO, req: _Message) -> str:
        """Answer one request, faults included; then "keep", "close" or "reset" the connection."""
        fault = self._choose(req)
        if fault in (Fault.SLOW_DOWN, Fault.INTERNAL_ERROR):
            error = _s3_error(*_ERRORS[fault])
            wfile.write(error.head_bytes() + error.body)
            return "keep"
        if fault is Fault.RESET_BEFORE:
            return "reset"
        if fault is Fault.FLIP_REQUEST:
            with self._lock:
                _flip(req, self._rng)
        if fault is Fault.IGNORE_CONDITIONS:
            method, target = req.start.split(b" ")[:2]
            req.headers = resign(method, target, req.headers, self._secret_key, dropped=_CONDITIONS)
        resp = self._forward(req)
        if fault is Fault.RESET_AFTER:
            return "reset"
        if fault is Fault.TRUNCATE:
            self._count_out(len(resp.body) // 2)
            wfile.write(resp.head_bytes() + resp.body[: len(resp.body) // 2])
            return "close"
        if fault is Fault.FLIP_RESPONSE:
            with self._lock:
                _flip(resp, self._rng)
        self._count_out(len(resp.body))
        wfile.write(resp.head_bytes())
        if fault is Fault.TRICKLE:
            self._trickle(wfile, resp.body)
        else:
            wfile.write(resp.body)
        return "keep"

    def _count_out(self, n_bytes: int) -> None:
        with self._lock:
            self.response_bytes += n_bytes

    def _trickle(self, wfile: BinaryIO, body: bytes) -> None:
        """Send ``body`` a little at a time for at most ``trickle_max_s``, then the rest."""
        step, delay_s, max_s = self.trickle
        deadline = time.monotonic() + max_s
        pos = 0
        while pos < len(body) and time.monotonic() < deadline:
            wfile.write(body[pos : pos + step])
            wfile.flush()
            pos += step
            time.sleep(delay_s)
        wfile.write(body[pos:])

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(self.timeout_s)
        with self._lock:
            self._conns.add(conn)
        action = "close"
        try:
            with conn.makefile("rb") as rfile, conn.makefile("wb") as wfile:
                for _ in range(_MAX_REQUESTS_PER_CONNECTION):
                    req = _read_request(rfile, wfile)  # type: ignore[arg-type]
                    action = "close" if req is None else self._serve(wfile, req)  # type: ignore[arg-type]
                    if action != "reset":
                        wfile.flush()
                    if action != "keep":
                        break
        except (OSError, ValueError, IndexError):
            action = "reset"  # the client or the server went away, or sent garbage
        finally:
            with self._lock:
                self._conns.discard(conn)
            if action == "reset":
                _reset(conn)
            else:
                _close(conn, self.timeout_s)


def _close(conn: socket.socket, timeout_s: float) -> None:
    """Close politely: FIN after everything sent, then wait (bounded) for the client's close.

    A reset would throw away response bytes the client has not read yet, and a
    truncated body must arrive truncated, not vanish.
    """
    try:
        conn.shutdown(socket.SHUT_WR)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and conn.recv(65536):
            pass
    except OSError:
        pass
    conn.close()


_ERRORS = {Fault.SLOW_DOWN: (503, "SlowDown"), Fault.INTERNAL_ERROR: (500, "InternalError")}
_IDENTITY_HEADERS = (b"range", b"if-match", b"if-none-match")
_CONDITIONS = frozenset({b"if-match", b"if-none-match"})


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    proxy: FaultProxy


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.server.proxy._handle(self.request)


__all__ = ["Fault", "FaultProxy", "Rule"]
