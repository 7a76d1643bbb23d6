"""Writing one object from a stream of bytes, in parallel parts where the store has them.

:meth:`ObjectStore.open_writer` hands these out; callers never build one. A
store without multipart uploads (``supports_multipart = False``) still gets a
working writer: it holds the object and sends it as one PUT on close.

Parts are gathered in buffers that are used again (:class:`PartSlots`): a fresh
16 MiB buffer costs a page fault per 4 KiB the first time it is written, which
measured more than the copy itself (0.45 of 0.57 CPU-seconds per GB here; a
third of a publish's client CPU in a perf profile). A store whose
``takes_part_buffers`` is True (s3://, az://, file://, memory://) is handed the
buffer itself, and the buffer is used again once its ``_mpu_put`` has returned;
any other store gets ``bytes``, as it may keep what it is given.
"""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..errors import StoreError, UsageError
from ..units import MiB

if TYPE_CHECKING:
    from .spec import ObjectStore

#: S3's floor for the size of every multipart part but the last.
MIN_PART_BYTES = 5 * MiB


class PartSlots:
    """At most ``count`` parts held in memory at once, in buffers used again.

    Pass one to several writers (``open_writer(slots=...)``) to bound their
    parts together and share the buffers; ``acquire``/``release`` bound anything
    else the caller holds (a single-PUT object) against the same budget. A
    buffer goes back to the free list only after its part was sent (or failed
    for good), so nothing reuses memory that a request may still read.
    """

    def __init__(self, count: int | threading.Semaphore) -> None:
        # A semaphore given is shared with whoever made it (callers that bound parts with one).
        self._sem = count if isinstance(count, threading.Semaphore) else threading.Semaphore(count)
        self._free: list[bytearray] = []
        self._size = 0  # the part size last asked for: only buffers of that size are kept
        self._lock = threading.Lock()

    def acquire(self) -> None:
        """Take one slot of the budget, waiting while ``count`` parts are held."""
        self._sem.acquire()

    def release(self) -> None:
        """Give a slot back (its part was sent, or failed for good)."""
        self._sem.release()

    def buffer(self, size: int) -> bytearray:
        """A free buffer of ``size`` bytes written before, or an empty one to grow.

        A new buffer is filled by appending, never zeroed first (``bytearray(size)``
        would write every page twice)."""
        with self._lock:
            self._size = size
            return self._free.pop() if self._free else bytearray()

    def give_back(self, buf: bytearray) -> None:
        """``buf`` is no longer read by anyone: the next part may fill it."""
        with self._lock:
            if len(buf) == self._size:  # a short last part's buffer is not kept
                self._free.append(buf)


@dataclass
class ObjectWriter:
    """Writes one object from a stream of bytes, uploading parts in parallel.

    An object that fits in one part goes out as a single PUT (one request
    instead of three). Otherwise a multipart upload is created on the first full
    part, and its abort is registered right there: :meth:`abort` (called by
    ``__exit__`` on any error) cancels it, so a failed publish leaves no
    half-built object and no billable orphan parts behind.
    """

    store: ObjectStore
    key: str
    executor: Executor
    part_bytes: int
    max_in_flight: int = 8
    _buf: bytearray | None = None  # the part being gathered (from the slots' buffers)
    _filled: int = 0  # bytes of it gathered so far
    _upload_id: str | None = None
    slots: PartSlots | threading.Semaphore | None = None  # shared between writers
    _parts: list[Future[tuple[int, str]]] = field(default_factory=list)
    bytes_written: int = 0

    def __post_init__(self) -> None:
        if self.part_bytes < MIN_PART_BYTES:
            raise UsageError(f"part_bytes must be >= {MIN_PART_BYTES} (S3's minimum part size)")
        if not isinstance(self.slots, PartSlots):
            self.slots = PartSlots(self.max_in_flight if self.slots is None else self.slots)
        self._slots: PartSlots = self.slots
        self._lend = self.store.supports_multipart and self.store.takes_part_buffers
        self._single = bytearray()  # a store without multipart: the whole object

    def write(self, data: memoryview | bytes) -> None:
        """Append ``data``; every full part goes out on the executor as soon as it fills.

        Every byte is copied once into the part that carries it (the caller may
        reuse ``data`` as soon as this returns); a store that needs ``bytes``
        gets a part lying whole in ``data`` copied straight into them.
        """
        view = memoryview(data).cast("B")
        self.bytes_written += len(view)
        if not self.store.supports_multipart:
            self._single += view  # one PUT on close: the whole object is held until then
            return
        while len(view):
            if not self._lend and not self._filled and len(view) > self.part_bytes:
                self._flush_part(bytes(view[: self.part_bytes]))  # more follows: a part for sure
                view = view[self.part_bytes :]
                continue
            if self._buf is None:
                self._buf = self._slots.buffer(self.part_bytes)
            n = min(self.part_bytes - self._filled, len(view))
            if len(self._buf) == self._filled:  # a new buffer: it grows as it fills
                self._buf += view[:n]
            else:
                self._buf[self._filled : self._filled + n] = view[:n]
            self._filled += n
            view = view[n:]
            if self._filled == self.part_bytes and len(view):
                self._flush_part()

    def _take_gathered(self, *, lend: bool) -> tuple[bytes | bytearray, bytearray | None]:
        """The bytes gathered so far, and the buffer to give back once they are sent.

        The buffer itself only if ``lend`` and the part fills it; otherwise the
        bytes are copied out (a short last part, a single PUT, a store that may
        keep what it is given) and the buffer is free at once.
        """
        buf, filled = self._buf, self._filled
        self._buf, self._filled = None, 0
        if buf is None:
            return b"", None
        if lend and filled == self.part_bytes:
            return buf, buf
        data = bytes(memoryview(buf)[:filled])
        self._slots.give_back(buf)
        return data, None

    def _flush_part(self, data: bytes | bytearray | None = None) -> None:
        """Send ``data`` (or the bytes gathered so far) as the next part."""
        if self._upload_id is None:
            self._upload_id = self.store.retry.call(
                lambda: self.store._mpu_create(self.key), f"CREATE upload {self.key}"
            )
        lent = None
        if data is None:
            data, lent = self._take_gathered(lend=self._lend)
        number = len(self._parts) + 1
        self._slots.acquire()  # bounds memory: at most max_in_flight parts held
        try:
            self._parts.append(
                self.executor.submit(self._upload_part, self._upload_id, number, data, lent)
            )
        except BaseException:
            self._slots.release()
            if lent is not None:
                self._slots.give_back(lent)
            raise

    def _upload_part(
        self, upload_id: str, number: int, data: bytes | bytearray, lent: bytearray | None
    ) -> tuple[int, str]:
        try:
            etag = self.store.retry.call(
                lambda: self.store._mpu_put(self.key, upload_id, number, data),
                f"PUT {self.key} part {number}",
            )
            return number, etag
        finally:
            self._slots.release()
            if lent is not None:  # sent, or failed for good: nothing reads it any more
                self._slots.give_back(lent)

    @property
    def is_multipart(self) -> bool:
        """True once a part went out (the object is then completed, not PUT whole)."""
        return self._upload_id is not None

    def close(self) -> str:
        """Finish the object and return its ETag."""
        if not self.store.supports_multipart:
            data, self._single = bytes(self._single), bytearray()
            return self.store.put_bytes(self.key, data)
        if self._upload_id is None:
            whole, _ = self._take_gathered(lend=False)
            return self.store.put_bytes(self.key, bytes(whole))
        if self._filled:
            self._flush_part()
        parts = [f.result() for f in self._parts]
        upload_id = self._upload_id
        etag = self.store.retry.call(
            lambda: self.store._mpu_complete(self.key, upload_id, parts),
            f"COMPLETE {self.key}",
        )
        self._upload_id = None
        return etag

    def abort(self) -> None:
        """Cancel the upload; safe to call twice and after errors."""
        for f in self._parts:
            f.cancel()
        for f in self._parts:
            if not f.cancelled():
                with contextlib.suppress(Exception):  # being torn down anyway
                    f.result()
        self._single = bytearray()
        if self._buf is not None:
            self._slots.give_back(self._buf)
            self._buf, self._filled = None, 0
        if self._upload_id is not None:
            upload_id, self._upload_id = self._upload_id, None
            # If this fails too, the GC's sweep of stale uploads collects it later.
            with contextlib.suppress(StoreError):
                self.store._mpu_abort(self.key, upload_id)

    def __enter__(self) -> ObjectWriter:
        return self

    def __exit__(self, exc_type: object, *_: object) -> None:
        if exc_type is not None:
            self.abort()
