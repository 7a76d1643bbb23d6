"""Response bodies landing in the caller's buffer: one copy, and a count of what arrived.

Every backend sends its ranged GETs through its SDK's own HTTP stack (boto3's
client, azure-core's pipeline, google-auth's session: credentials, connection
pool, timeouts), and every one of those stacks is requests/urllib3 over
http.client. :func:`read_socket_into` reads the body from the socket straight
into the buffer (``readinto``): one copy from the kernel into the tensor's
memory, no chunk objects. The SDKs' own downloaders cost three to five copies
and an object per chunk; on a loaded machine that CPU is what held a pull back
(profiles in docs/results/stores.md). The count of bytes
that arrived survives a broken stream, so the read resumes after the last byte
instead of starting over. A buffer that is a file's writable map (a pull's
output file) is filled through the file instead (``pwrite`` from a small buffer
of this thread's, used again): writing through the map has the kernel zero
every page before the bytes land (see :func:`wanrl_s3.io.pages.file_span`).
"""

from __future__ import annotations

import http.client
import os
import threading
from collections.abc import Callable
from typing import Any

import urllib3.exceptions

from ..errors import LocalIOError, StoreError
from ..io.pages import file_span
from ..units import MiB

#: What a body read from a socket raises when the connection breaks or stalls.
SOCKET_ERRORS: tuple[type[BaseException], ...] = (
    OSError,  # reset, timeout (TimeoutError is an OSError)
    http.client.HTTPException,
    urllib3.exceptions.HTTPError,
)
_CHUNK_BYTES = MiB  # per readinto: a broken connection loses at most this much
_bounce = threading.local()  # per thread: the buffer a file's chunks pass through


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
    span = file_span(buf)
    done = 0
    try:
        while done < len(buf):
            if span is None:
                n = fp.readinto(buf[done : done + _CHUNK_BYTES])
            else:
                n = _into_file(raw, fp, span[0], span[1] + done, min(_CHUNK_BYTES, len(buf) - done))
            if not n:
                break
            done += n
    except LocalIOError:
        raise  # the output file's, not the connection's (an OSError too)
    except SOCKET_ERRORS as exc:
        _drop(raw)
        raise StreamBroke(done) from exc
    if fp.isclosed():
        raw.release_conn()  # the body is consumed: the connection can be reused
    else:
        _drop(raw)  # bytes past the buffer: never reuse that connection
    return done


def _into_file(raw: Any, fp: Any, fd: int, offset: int, size: int) -> int:
    """Up to ``size`` bytes of the body, gathered whole, written at ``offset`` of ``fd``.

    Gathered before writing so the writes are whole pages (a partial page is
    read or zeroed first). The bytes written, 0 at the body's end. A failed
    write is the local disk's (LocalIOError), not the connection's.
    """
    chunk: bytearray | None = getattr(_bounce, "buf", None)
    if chunk is None:
        chunk = _bounce.buf = bytearray(_CHUNK_BYTES)
    view = memoryview(chunk)[:size]
    got = 0
    while got < size and (n := fp.readinto(view[got:])):
        got += n
    written = 0
    try:
        while written < got:
            written += os.pwrite(fd, view[written:got], offset + written)
    except OSError as exc:
        _drop(raw)
        raise LocalIOError.wrap(
            "cannot write the downloaded bytes to the output file", exc
        ) from exc
    return got


def ranged_response(
    response: Any, offset: int, length: int, where: str, error_of: Callable[[Any], Exception]
) -> Any | None:
    """A ranged GET's response (requests' or azure-core's) if it holds the bytes asked for.

    None past the object's end (416). Any status but 206 is raised as the SDK's
    own exception, ``error_of(response)``. A 206 whose range is not the one asked
    for (a proxy or a server bug) is refused: its body would land at the wrong
    place in the tensor.
    """
    if response.status_code == 416:
        response.close()
        return None
    if response.status_code != 206:
        raise error_of(response)
    served = str(response.headers.get("content-range", "")).partition(" ")[2].partition("/")[0]
    if served.partition("-")[0] != str(offset) or (
        int(response.headers.get("content-length", -1)) > length
    ):
        response.close()
        raise StoreError(f"{where}: asked for {length} bytes from {offset}, got bytes {served}")
    return response


def _drop(raw: Any) -> None:
    """Close the connection and give its slot back (the pool opens a new one next time)."""
    raw.close()
    raw.release_conn()


class CappedSink:
    """A file-like that keeps the first ``limit`` bytes written to it, for bounded reads.

    A bounded read asks the service for a range; should it send more anyway,
    :class:`Full` stops the SDK's download as soon as the cap is reached, so no
    more than ``limit`` bytes are ever held, whatever the object's size.
    """

    class Full(Exception):
        """The cap is reached and more bytes came: the caller keeps what it has."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()

    def write(self, data: bytes | memoryview) -> int:
        room = self.limit - len(self.data)
        self.data += memoryview(data)[:room]
        if len(data) > room:
            raise CappedSink.Full
        return len(data)

    def writable(self) -> bool:
        return True

    def tell(self) -> int:
        return len(self.data)

    def flush(self) -> None:
        return None
