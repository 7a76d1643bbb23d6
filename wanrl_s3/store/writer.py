"""Writing one object from a stream of bytes, in parallel parts where the store has them.

:meth:`ObjectStore.open_writer` hands these out; callers never build one. A
store without multipart uploads (``supports_multipart = False``) still gets a
working writer: it holds the object and sends it as one PUT on close.
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
    _buf: bytearray = field(default_factory=bytearray)
    _upload_id: str | None = None
    slots: threading.Semaphore | None = None  # shared between writers to bound memory
    _parts: list[Future[tuple[int, str]]] = field(default_factory=list)
    bytes_written: int = 0

    def __post_init__(self) -> None:
        if self.part_bytes < MIN_PART_BYTES:
            raise UsageError(f"part_bytes must be >= {MIN_PART_BYTES} (S3's minimum part size)")
        if self.slots is None:
            self.slots = threading.Semaphore(self.max_in_flight)
        self._slots = self.slots

    def write(self, data: memoryview | bytes) -> None:
        """Append ``data``; every full part goes out on the executor as soon as it fills.

        A part that lies whole in ``data`` is copied once, straight into the bytes
        that are sent; only the bytes of a part that spans calls are gathered first.
        """
        view = memoryview(data).cast("B")
        self.bytes_written += len(view)
        if not self.store.supports_multipart:
            self._buf += view  # one PUT on close: the whole object is held until then
            return
        while len(view):
            if not self._buf and len(view) > self.part_bytes:  # more follows: a part for sure
                self._flush_part(bytes(view[: self.part_bytes]))
                view = view[self.part_bytes :]
                continue
            room = self.part_bytes - len(self._buf)
            self._buf += view[:room]
            view = view[room:]
            if len(self._buf) == self.part_bytes and len(view):
                self._flush_part()

    def _flush_part(self, data: bytes | None = None) -> None:
        """Send ``data`` (or the bytes gathered so far) as the next part."""
        if self._upload_id is None:
            self._upload_id = self.store.retry.call(
                lambda: self.store._mpu_create(self.key), f"CREATE upload {self.key}"
            )
        if data is None:
            data, self._buf = bytes(self._buf), bytearray()
        number = len(self._parts) + 1
        self._slots.acquire()  # bounds memory: at most max_in_flight parts held
        try:
            self._parts.append(
                self.executor.submit(self._upload_part, self._upload_id, number, data)
            )
        except BaseException:
            self._slots.release()
            raise

    def _upload_part(self, upload_id: str, number: int, data: bytes) -> tuple[int, str]:
        try:
            etag = self.store.retry.call(
                lambda: self.store._mpu_put(self.key, upload_id, number, data),
                f"PUT {self.key} part {number}",
            )
            return number, etag
        finally:
            self._slots.release()

    @property
    def is_multipart(self) -> bool:
        """True once a part went out (the object is then completed, not PUT whole)."""
        return self._upload_id is not None

    def close(self) -> str:
        """Finish the object and return its ETag."""
        if self._upload_id is None:
            data, self._buf = bytes(self._buf), bytearray()
            return self.store.put_bytes(self.key, data)
        if self._buf:
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
        self._buf = bytearray()
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
