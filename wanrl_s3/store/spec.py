"""The object-store protocol: a few primitives, and helpers built on them.

Modelled on fsspec's ``AbstractFileSystem``: an implementation (s3://, file://,
memory://) overrides only the underscore primitives below; everything callers
use (retries, resumable ranged reads, multipart writers with cleanup, the
compare-and-swap used for LATEST) is written once here on top of them, so every
backend gets the same behaviour and one contract test suite covers them all.

Keys are relative to the store's root (the bucket prefix or directory the URL
names). They are validated before any I/O: no absolute paths, no ``..`` or
empty components, so nothing can escape the root.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import re
import threading
from collections.abc import Iterator
from concurrent.futures import Executor, Future
from dataclasses import dataclass, field
from typing import ClassVar

from ..errors import (
    NotFoundError,
    PreconditionFailedError,
    StoreError,
    TransientStoreError,
    UsageError,
    VerificationError,
)
from ..units import MiB
from .retry import RetryPolicy

_KEY_RE = re.compile(r"^[A-Za-z0-9._\-]+(/[A-Za-z0-9._\-]+)*$")
MIN_PART_BYTES = 5 * MiB  # S3's floor for every part but the last


def check_key(key: str, *, field_name: str = "key") -> str:
    """Refuse keys that could escape the store root or that S3 would mangle."""
    if not isinstance(key, str) or not _KEY_RE.match(key):
        raise UsageError(
            f"{field_name} {key!r} is not a valid relative key "
            "(letters, digits, '._-' and '/' separators, no empty parts)"
        )
    if any(part in (".", "..") for part in key.split("/")):
        raise UsageError(f"{field_name} {key!r} must not contain '.' or '..' components")
    return key


@dataclass(frozen=True)
class ObjectInfo:
    key: str
    size: int
    etag: str
    last_modified_s: float = 0.0


@dataclass(frozen=True)
class Blob:
    """An object's bytes with the ETag they were read at."""

    data: bytes
    etag: str


@dataclass(frozen=True)
class PendingUpload:
    """A multipart upload that was started and neither completed nor aborted."""

    key: str
    upload_id: str
    initiated_s: float


class ObjectStore:
    """Base class of every backend. Override the primitives; use the helpers."""

    protocol: ClassVar[str] = ""

    def __init__(self, retry: RetryPolicy | None = None) -> None:
        self.retry = retry or RetryPolicy()

    # -- primitives: implementations override these ------------------------------
    def _get(self, key: str, *, if_none_match: str | None = None) -> Blob | None:
        """The whole object; None when ``if_none_match`` is its ETag; NotFoundError if absent."""
        raise NotImplementedError

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        """Read ``len(buf)`` bytes at ``offset`` into ``buf``; return how many arrived.

        May return fewer when the stream breaks after some bytes (the caller
        resumes from there); raises TransientStoreError only if none arrived.
        """
        raise NotImplementedError

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        """Write a whole object, return its ETag; PreconditionFailedError if a condition fails."""
        raise NotImplementedError

    def _head(self, key: str) -> ObjectInfo | None:
        raise NotImplementedError

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix`` (a plain string prefix)."""
        raise NotImplementedError

    def _delete(self, keys: list[str]) -> None:
        """Delete the keys; absent keys are not an error."""
        raise NotImplementedError

    def _mpu_create(self, key: str) -> str:
        raise NotImplementedError

    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes) -> str:
        raise NotImplementedError

    def _mpu_complete(self, key: str, upload_id: str, parts: list[tuple[int, str]]) -> str:
        raise NotImplementedError

    def _mpu_abort(self, key: str, upload_id: str) -> None:
        raise NotImplementedError

    def _mpu_list(self, prefix: str) -> Iterator[PendingUpload]:
        raise NotImplementedError

    def _copy(self, src_key: str, dst_key: str) -> None:
        """Server-side copy where the backend has one; this default moves the bytes."""
        self._put(dst_key, self._get(src_key).data)  # type: ignore[union-attr]

    def _copy_from(self, source: ObjectStore, src_key: str, dst_key: str) -> bool:
        """Server-side copy of ``source``'s object here, where one service holds both.

        False (this default) where the backend cannot; the caller then streams.
        """
        return False

    # -- optional probes (`wanrl-s3 doctor`): a backend answers where it can --------
    #: What keeps an upload damaged in transit from being committed where the service
    #: itself does not refuse it (``wanrl-s3 doctor`` prints it).
    upload_check: ClassVar[str] = (
        "nothing at upload: readers verify every tensor's BLAKE3 and refuse a damaged version"
    )

    def _put_with_wrong_checksum(self, key: str, data: bytes) -> bool | None:
        """PUT ``data`` declaring the integrity checksum of other bytes.

        True if the service refused it, False if it stored it; None (this
        default) where the backend sends no checksum the service could check.
        """
        return None

    def _mpu_complete_if_absent(
        self, key: str, upload_id: str, parts: list[tuple[int, str]]
    ) -> str | None:
        """Complete an upload only if ``key`` does not exist yet; its ETag.

        PreconditionFailedError if it exists; None (this default) where the
        backend cannot make a completion conditional.
        """
        return None

    # -- helpers: built on the primitives, never overridden -----------------------
    @property
    def url(self) -> str:
        raise NotImplementedError

    def get(self, key: str) -> Blob:
        check_key(key)
        blob = self.retry.call(lambda: self._get(key), f"GET {key}")
        if blob is None:  # pragma: no cover - only with if_none_match
            raise StoreError(f"GET {key} returned nothing")
        return blob

    def get_bytes(self, key: str) -> bytes:
        return self.get(key).data

    def get_if_changed(self, key: str, etag: str | None) -> Blob | None:
        """The object if its ETag differs from ``etag`` (a conditional GET), else None."""
        check_key(key)
        return self.retry.call(lambda: self._get(key, if_none_match=etag), f"GET {key}")

    def read_into(self, key: str, offset: int, buf: memoryview) -> None:
        """Fill ``buf`` from ``offset``, resuming after dropped connections at the last byte.

        A read that ends early without an error is checked against the object's
        size: an object shorter than the range is damaged (truncated), which no
        retry fixes, so that is a :class:`VerificationError` at once.
        """
        check_key(key)
        done = failures = 0
        last_error: Exception | None = None
        while done < len(buf):
            try:
                got = self._read_into(key, offset + done, buf[done:])
            except TransientStoreError as exc:
                got, last_error = 0, exc
            else:
                if got == 0:
                    self._require_size(key, offset + len(buf))
            if got > 0:
                done, failures = done + got, 0
                continue
            failures += 1
            if failures >= self.retry.max_attempts:
                raise StoreError(
                    f"GET {key} bytes {offset + done}-{offset + len(buf) - 1} failed after "
                    f"{failures} attempts: {last_error or 'the stream ended early'}"
                ) from last_error
            self.retry.clock.sleep(self.retry.delay_s(failures))

    def _require_size(self, key: str, end: int) -> None:
        """Refuse an object too short to hold bytes up to ``end`` (or gone altogether)."""
        info = self.head(key)
        if info is None:
            raise NotFoundError(f"{self.url}/{key} does not exist")
        if info.size < end:
            raise VerificationError(
                f"{self.url}/{key} holds {info.size} bytes, but bytes up to {end} were "
                "expected: the object is truncated"
            )

    def put_bytes(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        check_key(key)
        return self.retry.call(
            lambda: self._put(key, data, if_none_match=if_none_match, if_match=if_match),
            f"PUT {key}",
        )

    def head(self, key: str) -> ObjectInfo | None:
        check_key(key)
        return self.retry.call(lambda: self._head(key), f"HEAD {key}")

    def exists(self, key: str) -> bool:
        return self.head(key) is not None

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        if prefix:
            check_key(prefix.rstrip("/"), field_name="prefix")
        return self.retry.call(
            lambda: sorted(self._list(prefix), key=lambda o: o.key), f"LIST {prefix or '/'}"
        )

    def delete(self, keys: builtins.list[str]) -> None:
        for key in keys:
            check_key(key)
        for start in range(0, len(keys), 1000):  # S3's DeleteObjects limit
            batch = keys[start : start + 1000]
            self.retry.call(functools.partial(self._delete, batch), f"DELETE {len(batch)} objects")

    def copy(self, src_key: str, dst_key: str) -> None:
        check_key(src_key)
        check_key(dst_key)
        self.retry.call(lambda: self._copy(src_key, dst_key), f"COPY {src_key}")

    def copy_from(
        self,
        source: ObjectStore,
        src_key: str,
        dst_key: str,
        *,
        size: int,
        executor: Executor,
        part_bytes: int,
        slots: threading.Semaphore | None = None,
    ) -> bool:
        """Copy ``size`` bytes of another store's object here; True if it went server-side.

        Server-side where both stores live on one service (S3 CopyObject across
        buckets: no byte passes through this machine); otherwise streamed as
        ranged reads of ``part_bytes`` into a multipart writer whose parts in
        memory ``slots`` bounds (see :meth:`open_writer`).
        """
        check_key(src_key)
        check_key(dst_key)
        if self.retry.call(
            lambda: self._copy_from(source, src_key, dst_key), f"COPY {source.url}/{src_key}"
        ):
            return True
        with self.open_writer(dst_key, executor, part_bytes=part_bytes, slots=slots) as writer:
            buf = memoryview(bytearray(min(part_bytes, size)))
            for offset in range(0, size, part_bytes):
                piece = buf[: min(part_bytes, size - offset)]
                source.read_into(src_key, offset, piece)
                writer.write(piece)
            writer.close()
        return False

    def pending_uploads(self, prefix: str = "") -> builtins.list[PendingUpload]:
        return self.retry.call(lambda: builtins.list(self._mpu_list(prefix)), "LIST uploads")

    def abort_upload(self, pending: PendingUpload) -> None:
        self.retry.call(
            lambda: self._mpu_abort(pending.key, pending.upload_id), f"ABORT {pending.key}"
        )

    def open_writer(
        self,
        key: str,
        executor: Executor,
        *,
        part_bytes: int,
        max_in_flight: int = 8,
        slots: threading.Semaphore | None = None,
    ) -> ObjectWriter:
        """A streaming writer: parts upload in parallel on ``executor``.

        ``slots`` bounds the parts held in memory; pass one semaphore to several
        writers to bound them together.
        """
        check_key(key)
        return ObjectWriter(
            self, key, executor, part_bytes=part_bytes, max_in_flight=max_in_flight, slots=slots
        )


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
        view = memoryview(data).cast("B")
        self.bytes_written += len(view)
        while len(view):
            room = self.part_bytes - len(self._buf)
            self._buf += view[:room]
            view = view[room:]
            if len(self._buf) == self.part_bytes and len(view):
                self._flush_part()

    def _flush_part(self) -> None:
        if self._upload_id is None:
            self._upload_id = self.store.retry.call(
                lambda: self.store._mpu_create(self.key), f"CREATE upload {self.key}"
            )
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


def compare_and_swap(store: ObjectStore, key: str, expected_etag: str | None, data: bytes) -> str:
    """Replace ``key`` only if it still has ``expected_etag`` (``None``: only if absent).

    Raises :class:`PreconditionFailedError` when someone else moved it first.
    """
    if expected_etag is None:
        return store.put_bytes(key, data, if_none_match=True)
    return store.put_bytes(key, data, if_match=expected_etag)


def get_or_none(store: ObjectStore, key: str) -> Blob | None:
    try:
        return store.get(key)
    except NotFoundError:
        return None


__all__ = [
    "MIN_PART_BYTES",
    "Blob",
    "ObjectInfo",
    "ObjectStore",
    "ObjectWriter",
    "PendingUpload",
    "PreconditionFailedError",
    "check_key",
    "compare_and_swap",
    "get_or_none",
]
