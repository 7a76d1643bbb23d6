"""GET requests to a CDN edge, and what their answers mean to a reader (private).

An edge answers in one of three ways, and :class:`EdgeClient` sorts them:

- the object (200 for a whole GET; 206 with a ``Content-Range`` that starts
  where it was asked for a ranged one), as raw bytes (no ``Content-Encoding``)
  and not an HTML page: returned;
- a failure worth trying again (a connection error or timeout, 408, 429, 5xx):
  :class:`~wanrl_s3.errors.TransientStoreError`, which the store's helpers retry;
- anything else (403 for a missing or expired signature, 404, a 200 to a ranged
  GET, an HTML error page served as 200, a range other than the one asked for,
  a body longer than the reader can hold): :class:`WrongAnswer`. The edge
  cannot serve that object; the caller reads it from the store instead.

A 416 (the range starts past the end of the edge's copy) is :class:`PastTheEnd`:
only the origin can say whether the object is that short or the copy truncated.
"""

from __future__ import annotations

import re
from typing import Any

import urllib3
import urllib3.exceptions

from ..errors import StoreError, TransientStoreError

_CHUNK_BYTES = 1 << 20  # a dropped connection loses at most this much of a range
_CONTENT_RANGE = re.compile(r"^bytes (\d+)-(\d+)/(\d+|\*)$")
_TRANSIENT_STATUS = frozenset({408, 429})
_NETWORK_ERRORS = (urllib3.exceptions.HTTPError, OSError)


class WrongAnswer(StoreError):
    """The edge answered, but not with the object asked for; the message says how."""


class PastTheEnd(StoreError):
    """The edge's copy of the object ends before the range starts (HTTP 416)."""


class EdgeClient:
    """A pool of HTTP(S) connections to one CDN, for whole and ranged GETs. Thread-safe."""

    def __init__(
        self, *, max_connections: int = 32, connect_timeout_s: float = 10.0, read_timeout_s: float
    ) -> None:
        self._pool = urllib3.PoolManager(
            num_pools=4,
            maxsize=max_connections,
            retries=False,  # the store's helpers retry, on their injectable clock
            timeout=urllib3.Timeout(connect=connect_timeout_s, read=read_timeout_s),
        )

    def close(self) -> None:
        self._pool.clear()

    def reachable(self, url: str, headers: dict[str, str]) -> str | None:
        """None when ``url``'s host answers HTTP at all (any status); else why not."""
        try:
            resp = self._pool.request("HEAD", url, headers=headers, redirect=False)
        except _NETWORK_ERRORS as exc:
            return _reason(exc)
        resp.release_conn()
        return None

    def get_whole(self, url: str, headers: dict[str, str], max_bytes: int) -> tuple[bytes, str]:
        """The object at ``url`` (200) and its ETag; at most ``max_bytes`` of it."""
        resp = self._open(url, headers)
        consumed = False
        try:
            _require(resp, 200)
            length = _length(resp)
            if length is not None and length > max_bytes:
                raise WrongAnswer(f"a body of {length} bytes, over the {max_bytes}-byte limit")
            data = _read_at_most(resp, max_bytes + 1)
            if len(data) > max_bytes:
                raise WrongAnswer(f"a body over the {max_bytes}-byte limit")
            if length is not None and len(data) != length:
                raise TransientStoreError(f"GET {url}: the body ended after {len(data)} bytes")
            consumed = True
            return data, str(resp.headers.get("ETag", ""))
        finally:
            _done(resp, consumed)

    def read_range(self, url: str, headers: dict[str, str], offset: int, buf: memoryview) -> int:
        """Bytes ``offset ...`` of the object at ``url`` into ``buf``; how many arrived.

        Fewer than asked when the edge's copy ends first, or when the body breaks
        after some bytes (the caller resumes after them).
        """
        end = offset + len(buf) - 1
        resp = self._open(url, {**headers, "Range": f"bytes={offset}-{end}"})
        consumed = False
        try:
            if resp.status == 416:
                raise PastTheEnd(f"HTTP 416 for bytes {offset}-{end}")
            _require(resp, 206)
            found = _CONTENT_RANGE.match(str(resp.headers.get("Content-Range", "")).strip())
            first, last = (int(found[1]), int(found[2])) if found else (-1, -1)
            if first != offset or not first <= last <= end:
                raise WrongAnswer(
                    f"Content-Range {resp.headers.get('Content-Range')!r} to a request for "
                    f"bytes {offset}-{end}"
                )
            want = last - first + 1
            length = _length(resp)
            if length is not None and length != want:
                raise WrongAnswer(f"Content-Length {length} for a range of {want} bytes")
            done = _stream_into(resp, buf[:want], url)
            consumed = done == want
            return done
        finally:
            _done(resp, consumed)

    def _open(self, url: str, headers: dict[str, str]) -> Any:
        try:
            return self._pool.request(
                "GET",
                url,
                headers={**headers, "Accept-Encoding": "identity"},
                preload_content=False,
                decode_content=False,
                redirect=False,
            )
        except _NETWORK_ERRORS as exc:
            raise TransientStoreError(f"GET {_without_query(url)}: {_reason(exc)}") from exc


def _require(resp: Any, expected: int) -> None:
    """Pass the answer only if it has the status expected and is the object's raw bytes."""
    status = int(resp.status)
    if status in _TRANSIENT_STATUS or status >= 500:
        raise TransientStoreError(f"HTTP {status}")
    if status != expected:
        raise WrongAnswer(f"HTTP {status}")
    content_type = str(resp.headers.get("Content-Type", "")).lower()
    if content_type.startswith(("text/html", "application/xhtml")):
        raise WrongAnswer(f"an HTML page (HTTP {status}, Content-Type {content_type})")
    encoding = str(resp.headers.get("Content-Encoding", "identity")).lower()
    if encoding not in ("", "identity"):
        raise WrongAnswer(f"a body in Content-Encoding {encoding}, not the object's bytes")


def _length(resp: Any) -> int | None:
    value = resp.headers.get("Content-Length")
    if value is None:
        return None
    if not str(value).strip().isdigit():
        raise WrongAnswer(f"Content-Length {value!r}")
    return int(value)


def _read_at_most(resp: Any, limit: int) -> bytes:
    try:
        return bytes(resp.read(limit))
    except _NETWORK_ERRORS as exc:
        raise TransientStoreError(f"the body broke off: {_reason(exc)}") from exc


def _stream_into(resp: Any, buf: memoryview, url: str) -> int:
    """Read the body straight into ``buf`` (one copy where urllib3's raw response is
    reachable, as the s3 backend does); what arrived before a break is kept."""
    fp: Any = getattr(resp, "_fp", None)
    read_into = getattr(fp, "readinto", None) or resp.readinto
    done = 0
    try:
        while done < len(buf):
            n = read_into(buf[done : done + _CHUNK_BYTES])
            if not n:
                break
            done += n
    except _NETWORK_ERRORS as exc:
        if done == 0:
            raise TransientStoreError(f"GET {_without_query(url)}: {_reason(exc)}") from exc
    return done


def _done(resp: Any, consumed: bool) -> None:
    """Give the connection back when its body was read to the end; otherwise close it
    (a body left unread would be read by the next request as its answer)."""
    if not consumed:
        resp.close()
    resp.release_conn()


def _without_query(url: str) -> str:
    """``url`` without its query string: a grant's signature never goes into a log."""
    return url.split("?", 1)[0]


def _reason(exc: BaseException) -> str:
    """The innermost cause of a urllib3 failure, on one line."""
    while exc.__context__ is not None and isinstance(exc, urllib3.exceptions.HTTPError):
        exc = exc.__context__
    return " ".join(str(exc).split()) or type(exc).__name__
