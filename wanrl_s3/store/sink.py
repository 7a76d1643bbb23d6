"""A file-like that writes into a fixed buffer, for SDKs that download into a stream.

The vendor SDKs (google-cloud-storage, azure-storage-blob) write a ranged read
into a file object; this one copies each chunk straight into the caller's
buffer (one copy, as with boto3's chunked path) and counts what arrived, so a
stream that breaks after some bytes still reports them and the read resumes
after the last byte instead of starting over.
"""

from __future__ import annotations

from ..errors import StoreError


class BufferSink:
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
