"""The object-store protocol: abstract primitives, and the helpers built on them.

Shaped like fsspec's ``AbstractFileSystem`` and zarr-python's store ABC. A
backend (s3://, gs://, az://, file://, memory:// or a third party's) subclasses
:class:`ObjectStore` and implements its abstract primitives, the underscore
methods that each make one request to the service; a subclass that misses one
cannot be instantiated (``TypeError``), so an incomplete backend fails where it
is made, not at its first request. Everything callers use (retries, resumable
ranged reads, multipart writers with cleanup, the compare-and-swap used for
LATEST) is written once here on top of them, so every backend behaves the same
and one contract suite (:class:`wanrl_s3.testing.StoreContract`) covers them all.

Features a service may lack have default primitives and a capability flag, a
class attribute that the helpers, callers and the contract suite read:

- ``supports_multipart``: ``_mpu_*`` upload an object as parts in parallel, and
  uploads left by a crash can be listed and aborted. Without it a writer holds
  the whole object and sends one PUT.
- ``supports_server_side_copy``: ``_copy`` copies inside the service, no byte
  through this process. Without it :meth:`ObjectStore.copy` reads and writes.
- ``supports_copy_from``: ``_copy_from`` copies from another store of the same
  service (another bucket) inside the service. Without it
  :meth:`ObjectStore.copy_from` streams the bytes through this process.

A flag and its primitives go together: a class that declares a flag without
implementing its primitives, or implements them without the flag, is refused
when it is defined.

Keys are relative to the store's root (the bucket prefix or directory the URL
names). They are validated before any I/O: no absolute paths, no ``..`` or
empty components, so nothing can escape the root. Listings are folder-like:
``list("c")`` is what lies under ``c/``, never ``cc/0``.
"""

from __future__ import annotations

import abc
import builtins
import functools
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from ..errors import (
    NotFoundError,
    ObjectTooLargeError,
    PreconditionFailedError,
    StoreError,
    TransientStoreError,
    UsageError,
    VerificationError,
)
from .retry import RetryPolicy
from .writer import MIN_PART_BYTES, ObjectWriter, PartSlots

_WRITE_REPAIRS = 3  # writes damaged in transit, in a row, repaired inside one _put
_KEY_RE = re.compile(r"^[A-Za-z0-9._\-]+(/[A-Za-z0-9._\-]+)*$")
_OPTIONAL_PRIMITIVES = {
    "supports_multipart": ("_mpu_create", "_mpu_put", "_mpu_complete", "_mpu_abort", "_mpu_list"),
    "supports_server_side_copy": ("_copy",),
    "supports_copy_from": ("_copy_from",),
}


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
    """What a listing or a HEAD says of an object, without reading it."""

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


class ObjectStore(abc.ABC):
    """Base class of every backend: implement the abstract primitives, call the helpers.

    A primitive makes one request, with the key already validated; it raises
    :class:`TransientStoreError` for a failure worth retrying (the helpers retry
    those, and only those), :class:`NotFoundError` and
    :class:`PreconditionFailedError` where documented, and another
    :class:`StoreError` for the rest.
    """

    #: The URL scheme, as in ``s3://``.
    protocol: ClassVar[str] = ""
    #: The option names :func:`~wanrl_s3.store.open_store` passes to :meth:`from_url`;
    #: None reads them from its signature (or the constructor's, where ``from_url``
    #: forwards ``**options``). Others are dropped, so one set of CLI flags serves
    #: every scheme.
    open_options: ClassVar[frozenset[str] | None] = None
    #: ``_mpu_*`` are implemented (see the module docstring).
    supports_multipart: ClassVar[bool] = False
    #: ``_copy`` copies inside the service.
    supports_server_side_copy: ClassVar[bool] = False
    #: ``_copy_from`` copies from another store of the same service inside it.
    supports_copy_from: ClassVar[bool] = False
    #: ``_mpu_put`` takes a ``bytearray`` and keeps no reference to it once it returns:
    #: a writer then lends it the part's buffer and fills that buffer again with a
    #: later part (see :class:`~wanrl_s3.store.writer.PartSlots`). False: parts are
    #: sent as ``bytes`` of their own.
    takes_part_buffers: ClassVar[bool] = False
    #: The most keys one ``_delete`` call is given: S3's DeleteObjects takes 1,000; a
    #: backend whose service takes fewer in one request lowers it.
    max_delete_keys: ClassVar[int] = 1000

    def __init__(self, retry: RetryPolicy | None = None) -> None:
        self.retry = retry or RetryPolicy()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """Refuse a class whose capability flags and optional primitives disagree."""
        super().__init_subclass__(**kwargs)
        for flag, names in _OPTIONAL_PRIMITIVES.items():
            inherited = [n for n in names if getattr(cls, n) is getattr(ObjectStore, n)]
            if getattr(cls, flag) and inherited:
                raise TypeError(
                    f"{cls.__name__} declares {flag} = True but does not implement "
                    f"{', '.join(inherited)}"
                )
            if not getattr(cls, flag) and len(inherited) < len(names):
                raise TypeError(
                    f"{cls.__name__} implements {', '.join(sorted(set(names) - set(inherited)))} "
                    f"but does not declare {flag} = True: a flag and its primitives go together"
                )

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """The store ``url`` names, made with ``options``: what ``open_store`` calls.

        Each backend parses its own URL, so the registry needs no per-scheme
        code and a third-party scheme is opened like ours. This default hands
        the whole URL to the constructor; a backend whose constructor takes the
        URL's parts (a bucket and a prefix) overrides it.
        """
        constructor: Any = cls  # a subclass's constructor, whatever its signature
        store: Self = constructor(url, **options)
        return store

    # -- primitives every backend implements ------------------------------------
    @property
    @abc.abstractmethod
    def url(self) -> str:
        """The URL that names this store (for messages, and to open it again)."""

    @abc.abstractmethod
    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        """The object; None when ``if_none_match`` is its ETag; NotFoundError if absent.

        With ``max_read_bytes`` (1 or more), at most that many bytes from its start,
        in the same one request (a ranged GET, ``Range: bytes=0-(max_read_bytes-1)``,
        where the service has them), and never more held in memory even from a
        service that ignores the range: the bounded readers of :meth:`get` ask one
        byte past their limit. An empty object comes back empty (with its ETag).
        """

    @abc.abstractmethod
    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        """Read ``len(buf)`` bytes at ``offset`` into ``buf``; return how many arrived.

        May return fewer when the stream breaks after some bytes (the caller
        resumes from there) or the object ends first; 0 when ``offset`` is at or
        past its end. NotFoundError if absent; TransientStoreError only if no
        byte arrived.
        """

    @abc.abstractmethod
    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        """Write a whole object, return its ETag; PreconditionFailedError if a condition fails.

        ``if_none_match``: only if absent; ``if_match``: only if its ETag is that.
        Every write of other bytes gives the object a new ETag.
        """

    @abc.abstractmethod
    def _head(self, key: str) -> ObjectInfo | None:
        """The object's size and ETag, or None if it is absent."""

    @abc.abstractmethod
    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix``, a plain string prefix as S3's.

        :meth:`list` makes it folder-like; the store's own bookkeeping objects
        (staged parts, markers) are left out.
        """

    @abc.abstractmethod
    def _delete(self, keys: builtins.list[str]) -> None:
        """Delete at most ``max_delete_keys`` keys; absent keys are not an error."""

    # -- optional primitives, announced by the capability flags ------------------
    def _mpu_create(self, key: str) -> str:
        """Start a multipart upload of ``key``; its upload id (``supports_multipart``)."""
        raise NotImplementedError(f"{type(self).__name__} has no multipart uploads")

    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes | bytearray) -> str:
        """Upload part ``part_number`` (from 1); its ETag, for the completion.

        ``data`` is ``bytes``, or a ``bytearray`` the writer fills again once this
        returns where ``takes_part_buffers``."""
        raise NotImplementedError(f"{type(self).__name__} has no multipart uploads")

    def _mpu_complete(self, key: str, upload_id: str, parts: builtins.list[tuple[int, str]]) -> str:
        """Join the parts, in number order, into the object; its ETag."""
        raise NotImplementedError(f"{type(self).__name__} has no multipart uploads")

    def _mpu_abort(self, key: str, upload_id: str) -> None:
        """Drop an upload and its parts; an upload already gone is not an error."""
        raise NotImplementedError(f"{type(self).__name__} has no multipart uploads")

    def _mpu_list(self, prefix: str) -> Iterator[PendingUpload]:
        """The uploads in progress whose key starts with ``prefix``, whoever started them."""
        raise NotImplementedError(f"{type(self).__name__} has no multipart uploads")

    def _copy(self, src_key: str, dst_key: str) -> None:
        """Copy inside the service (``supports_server_side_copy``); this default reads and writes.

        NotFoundError if the source is absent.
        """
        blob = self._get(src_key)
        if blob is None:  # pragma: no cover - only with if_none_match
            raise StoreError(f"GET {src_key} returned nothing")
        self._put(dst_key, blob.data)

    def _copy_from(self, source: ObjectStore, src_key: str, dst_key: str) -> bool:
        """Copy ``source``'s object here inside the service, where one service holds both.

        False where it cannot (``source`` is elsewhere): the caller then streams.
        Called only where ``supports_copy_from`` is declared.
        """
        return False

    def _empty_object(self, key: str, if_none_match: str | None) -> Blob | None:
        """What ``_get`` returns when a ranged read found no byte 0 (HTTP 416): an empty object.

        For backends: a 416 carries no ETag, so it comes from a HEAD (only
        empty objects pay for the second request).
        """
        info = self._head(key)
        if info is None:
            raise NotFoundError(f"{self.url}/{key} does not exist")
        if info.size:  # replaced by a longer one meanwhile: read again
            raise TransientStoreError(f"GET {key}: the object changed while it was read")
        return None if info.etag == if_none_match else Blob(b"", info.etag)

    def _write_confirmed(
        self,
        key: str,
        send: Callable[[bool, str | None], tuple[str, bool]],
        remove: Callable[[str], None],
        *,
        if_none_match: bool,
        if_match: str | None,
    ) -> str:
        """For backends whose service may store a body damaged in transit: ``_put`` through this.

        ``send(if_none_match, if_match)`` writes once and returns the ETag and whether
        the service was shown to hold the bytes sent. A damaged write is repaired
        here, on the same conditions: a create is removed (``remove(etag)``) and made
        again; a compare-and-swap is made again over exactly its own damaged write
        (``If-Match`` on that ETag), which is no other writer's move; a plain write is
        sent again. After :data:`_WRITE_REPAIRS` repairs it is a transient error.
        """
        for _ in range(_WRITE_REPAIRS + 1):
            etag, intact = send(if_none_match, if_match)
            if intact:
                return etag
            if if_none_match:
                remove(etag)
            elif if_match is not None:
                if_match = etag
        raise TransientStoreError(
            f"PUT {key}: the service stored other bytes than were sent, "
            f"{_WRITE_REPAIRS + 1} times in a row"
        )

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

    # -- reading through a cache (wanrl_s3.cdn.CdnReadStore overrides both) ----------
    @property
    def origin(self) -> ObjectStore:
        """The store whose answers need nothing to vouch for them: this one. A store
        that reads through a cache returns the store behind it, where a reader takes
        what no pin covers (a manifest no LATEST or delta names)."""
        return self

    def distrust(self, key: str, reason: str) -> None:
        """``key`` as read here failed its check (``reason``): read it from :attr:`origin`
        from now on. The verifying readers call it before their one second read, so a
        cache's bad copy costs one read from the origin; a plain store has nothing to do."""
        return None

    # -- helpers: built on the primitives, never overridden -----------------------
    def get(self, key: str, *, max_bytes: int | None = None) -> Blob:
        """The whole object with its ETag, retried: for small objects read at once (manifests).

        ``max_bytes``: the most this reader accepts. A larger object is refused
        (:class:`ObjectTooLargeError`) having read ``max_bytes + 1`` bytes at most,
        so whoever can write the bucket cannot run a reader out of memory with a
        huge pointer or record. Every reader of an object others can write passes it.
        """
        check_key(key)
        limit = _read_limit(max_bytes)
        blob = self.retry.call(lambda: self._get(key, max_read_bytes=limit), f"GET {key}")
        if blob is None:  # pragma: no cover - only with if_none_match
            raise StoreError(f"GET {key} returned nothing")
        return self._within(key, blob, max_bytes)

    def get_bytes(self, key: str, *, max_bytes: int | None = None) -> bytes:
        """The object's bytes, for callers that do not need its ETag; bounded as :meth:`get`."""
        return self.get(key, max_bytes=max_bytes).data

    def get_if_changed(
        self, key: str, etag: str | None, *, max_bytes: int | None = None
    ) -> Blob | None:
        """The object if its ETag differs from ``etag`` (a conditional GET), else None.

        Lets a poller of LATEST pay for a few headers, not the body, while nothing
        moved; still one request when bounded (``max_bytes``, as :meth:`get`).
        """
        check_key(key)
        limit = _read_limit(max_bytes)
        blob = self.retry.call(
            lambda: self._get(key, if_none_match=etag, max_read_bytes=limit), f"GET {key}"
        )
        return None if blob is None else self._within(key, blob, max_bytes)

    def _within(self, key: str, blob: Blob, max_bytes: int | None) -> Blob:
        """``blob``, unless it holds more than ``max_bytes`` (then ObjectTooLargeError)."""
        if max_bytes is not None and len(blob.data) > max_bytes:
            raise ObjectTooLargeError(
                f"{self.url}/{key} is larger than {max_bytes:,} bytes, the most its reader "
                f"accepts (refused after reading {len(blob.data):,} bytes)"
            )
        return blob

    def read_into(self, key: str, offset: int, buf: memoryview) -> None:
        """Fill ``buf`` from ``offset``, resuming after dropped connections at the last byte.

        A dropped connection costs only the bytes in flight, not the range. A
        read that ends early without an error is checked against the object's
        size: an object shorter than the range is damaged (truncated), which no
        retry fixes, so that is a :class:`VerificationError` at once.
        """
        check_key(key)
        done = 0
        attempts = self.retry.attempts()  # a throttled GET waits longer (RetryPolicy)
        while done < len(buf):
            error: Exception | None = None
            try:
                got = self._read_into(key, offset + done, buf[done:])
            except TransientStoreError as exc:
                got, error = 0, exc
            else:
                if got == 0:
                    self._require_size(key, offset + len(buf))
            if got > 0:
                done += got
                attempts.reset()
                continue
            if not attempts.failed(error):
                raise StoreError(
                    f"GET {key} bytes {offset + done}-{offset + len(buf) - 1} failed after "
                    f"{attempts.count} attempts: {error or 'the stream ended early'}"
                ) from error

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
        """Write a whole object, retried; its ETag. Conditions as in :func:`compare_and_swap`.

        A retried conditional write whose first response was lost can fail its
        condition against itself: callers that create (manifests, share
        records) read the object back to tell.
        """
        check_key(key)
        return self.retry.call(
            lambda: self._put(key, data, if_none_match=if_none_match, if_match=if_match),
            f"PUT {key}",
        )

    def head(self, key: str) -> ObjectInfo | None:
        """Size and ETag without the body, or None if absent: cheaper than a GET."""
        check_key(key)
        return self.retry.call(lambda: self._head(key), f"HEAD {key}")

    def exists(self, key: str) -> bool:
        """Whether the object is there (one HEAD)."""
        return self.head(key) is not None

    def list(self, folder: str = "", *, name_prefix: str = "") -> builtins.list[ObjectInfo]:
        """The objects inside ``folder``, at any depth, sorted by key.

        Folder-like, so that a version's listing never picks up another's:
        ``list("c")`` and ``list("c/")`` are what lies under ``c/``, never
        ``cc/0`` nor an object named ``c``; ``list()`` is the whole store.
        ``name_prefix`` keeps the names inside the folder that start with it
        (``list("workers", name_prefix="verl-")``), filtered by the service,
        so one worker's listing does not carry the whole fleet's.
        """
        prefix = _prefix(folder, name_prefix)
        return self.retry.call(
            lambda: sorted(
                (o for o in self._list(prefix) if o.key.startswith(prefix)), key=lambda o: o.key
            ),
            f"LIST {prefix or '/'}",
        )

    def delete(self, keys: builtins.list[str]) -> None:
        """Delete every key (absent ones are fine), in batches the service accepts.

        Retention deletes whole versions, easily more than the 1,000 keys S3
        takes in one request.
        """
        for key in keys:
            check_key(key)
        for start in range(0, len(keys), self.max_delete_keys):
            batch = keys[start : start + self.max_delete_keys]
            self.retry.call(functools.partial(self._delete, batch), f"DELETE {len(batch)} objects")

    def copy(self, src_key: str, dst_key: str) -> None:
        """Copy an object inside this store; server-side where ``supports_server_side_copy``."""
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
        slots: PartSlots | threading.Semaphore | None = None,
    ) -> bool:
        """Copy ``size`` bytes of another store's object here; True if it went server-side.

        Server-side where both stores live on one service (S3 CopyObject across
        buckets: no byte passes through this machine); otherwise streamed as
        ranged reads of ``part_bytes`` into a multipart writer whose parts in
        memory ``slots`` bounds (see :meth:`open_writer`). What a relay uses to
        fill a replica region.
        """
        check_key(src_key)
        check_key(dst_key)
        if self.supports_copy_from and self.retry.call(
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

    def pending_uploads(self, folder: str = "") -> builtins.list[PendingUpload]:
        """Multipart uploads under ``folder`` never completed nor aborted, for gc to sweep.

        A crashed publisher leaves them, and the service bills their parts
        until they are aborted. Folder-like, as :meth:`list`.
        """
        if not self.supports_multipart:
            return []  # nothing can be pending
        prefix = _prefix(folder, "")
        return self.retry.call(
            lambda: [u for u in self._mpu_list(prefix) if u.key.startswith(prefix)],
            "LIST uploads",
        )

    def abort_upload(self, pending: PendingUpload) -> None:
        """Abort an upload that :meth:`pending_uploads` found, freeing its parts."""
        if not self.supports_multipart:
            return  # nothing can be pending
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
        slots: PartSlots | threading.Semaphore | None = None,
    ) -> ObjectWriter:
        """A streaming writer: parts upload in parallel on ``executor``.

        So an object of any size is written without holding it whole (where
        ``supports_multipart``). ``slots`` bounds the parts held in memory; pass
        one :class:`PartSlots` to several writers to bound them together and
        let them share part buffers (a plain semaphore bounds them only).
        """
        check_key(key)
        return ObjectWriter(
            self, key, executor, part_bytes=part_bytes, max_in_flight=max_in_flight, slots=slots
        )


def _prefix(folder: str, name_prefix: str) -> str:
    """The plain prefix of a folder-like listing: ``folder/`` and then ``name_prefix``."""
    folder = folder[:-1] if folder.endswith("/") else folder
    base = check_key(folder, field_name="folder") + "/" if folder else ""
    if name_prefix:
        check_key((base + name_prefix).rstrip("/"), field_name="name_prefix")
    return base + name_prefix


def compare_and_swap(store: ObjectStore, key: str, expected_etag: str | None, data: bytes) -> str:
    """Replace ``key`` only if it still has ``expected_etag`` (``None``: only if absent).

    Raises :class:`PreconditionFailedError` when someone else moved it first.
    """
    if expected_etag is None:
        return store.put_bytes(key, data, if_none_match=True)
    return store.put_bytes(key, data, if_match=expected_etag)


def get_or_none(store: ObjectStore, key: str, *, max_bytes: int | None = None) -> Blob | None:
    """The object, or None if it is absent: for keys whose absence is a normal answer.

    ``max_bytes`` bounds the read as in :meth:`ObjectStore.get`.
    """
    try:
        return store.get(key, max_bytes=max_bytes)
    except NotFoundError:
        return None


def _read_limit(max_bytes: int | None) -> int | None:
    """What a bounded read asks the primitive for: one byte past the limit, to see it passed."""
    if max_bytes is None:
        return None
    if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0:
        raise UsageError(f"max_bytes must be an integer >= 0, got {max_bytes!r}")
    return max_bytes + 1


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
