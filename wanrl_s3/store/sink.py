"""Response bodies landing in the caller's buffer: one copy, and a count of what arrived.

Two ways, for the SDKs' two shapes:

- :func:`read_socket_into`: where the SDK hands back its urllib3 response (boto3's
  streaming body, azure-core's requests transport), the body is read from the
  socket straight into the buffer (``readinto``): one copy from the kernel into the
  tensor's memory, and no per-chunk Python objects. The SDKs' own readers cost 3 to
  5 copies and a chunk object per MiB; on a loaded machine that CPU is what limits
  a pull (profiles in docs/benchmarks.md, "Object-store libraries").
- :class:`BufferSink`: a file-like for SDKs that download into a stream
  (google-cloud-storage); it copies each chunk into the buffer.

Both count the bytes that arrived, so a stream that breaks after some bytes still
reports them and the read resumes after the last byte instead of starting over.
"""

from __future__ import annotations

import http.client
from typing import Any

import urllib3.exceptions

from ..errors import StoreError
from ..units import MiB

#: What a body read from a socket raises when the connection breaks or stalls.
SOCKET_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # reset, timeout (TimeoutError is an OSError)
    http.client.HTTPException,
    urllib3.exceptions.HTTPError,
)
_CHUNK_BYTES = MiB  # per readinto: a broken connection loses at most this much


class StreamBroke(Exception):
    """The body stopped early; ``done`` bytes of it are already in the buffer."""

    def __init__(self, done: int) -> None:
        super().__init__(done)
        self.done = done


def read_socket_into(raw: Any, buf: memoryview) -> int | None:
    """Read a urllib3 response's body into ``buf``; the bytes read, or None if it cannot.

    None where ``raw`` is not a urllib3 response over http.client (another
    transport): the caller copies chunks instead. Fewer bytes than ``len(buf)``
    when the body ends early; :class:`StreamBroke` (with the count) when the
    connection fails. The connection goes back to the pool only once the body
    was read to its end (http.client closed its file), so no unread byte is left
    on a connection that the next request would use.
    """
    fp: Any = getattr(raw, "_fp", None)
    if not (hasattr(fp, "readinto") and hasattr(fp, "isclosed") and hasattr(raw, "release_conn")):
        return None
    done = 0
    try:
        while done < len(buf):
            n = fp.readinto(buf[done : done + _CHUNK_BYTES])
            if not n:
                break
            done += n
    except SOCKET_ERRORS as exc:
        _drop(raw)
        raise StreamBroke(done) from exc
    if fp.isclosed():
        raw.release_conn()  # the body is consumed: the connection can be reused
    else:
        _drop(raw)  # bytes past the buffer: never reuse that connection
    return done


def _drop(raw: Any) -> None:
    """Close the connection and give its slot back (the pool opens a new one next time)."""
    raw.close()
    raw.release_conn()


class BufferSink:
    """A file-like that writes into a fixed buffer, for SDKs that download into a stream."""

    def __init__(self, buf: memoryview) -> None:
        self.buf = buf
        self.done = 0

    def write(self, data: bytes | memoryview) -> int:
        n = len(data)
        if self.done + n > len(self.buf):
            raise StoreError(f"the server sent more than the {len(self.buf)} bytes asked for")
        self.buf[self.done : self.done + n] = data
        self.done += n
        return n

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return self.done

    def flush(self) -> None:
        return None
