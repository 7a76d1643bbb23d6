"""Multipart uploads for services without S3's upload ids: a marker object per upload.

GCS (parts are objects, joined by ``compose``) and Azure Blob (parts are staged
blocks, joined by a block-list commit) have no "list the uploads in progress"
call that the gc's sweep could use, nor an id to abort one by. So a backend
built on :class:`MarkedUploads` writes a small marker ``.uploads/<id>`` (its
body: the key being uploaded) when an upload starts and deletes it when the
upload completes or is aborted: pending uploads are exactly the markers, listed
with their start times, whichever process started them. Keys under ``.uploads/``
are the store's own, hidden from :meth:`ObjectStore.list` like ``file://``'s.
"""

from __future__ import annotations

import abc
import builtins
import contextlib
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..errors import NotFoundError, StoreError, TransientStoreError, UsageError
from .retry import RetryPolicy
from .sink import StreamBroke, read_socket_into
from .spec import ObjectInfo, ObjectStore, PendingUpload

UPLOADS_PREFIX = ".uploads/"
# A marker holds a key (S3's limit: 1,024 bytes); a longer body is not ours and is not read whole.
_MARKER_MAX_BYTES = 4096
_DELETE_THREADS = 16  # below the SDK clients' connection pools (32)


class PastTheEnd(StoreError):
    """A ranged read starts at or after the object's end (HTTP 416)."""


def marker_key(upload_id: str) -> str:
    return f"{UPLOADS_PREFIX}{upload_id}"


def is_internal(key: str) -> bool:
    """True for the store's own bookkeeping keys (markers, staged parts)."""
    return key.startswith(UPLOADS_PREFIX)


class MarkedUploads(ObjectStore):
    """``_mpu_create`` and ``_mpu_list`` from marker objects; the backend joins parts.

    A backend implements ``_list_all`` (every object, markers included) instead of
    ``_list``, ``_delete_one`` instead of ``_delete`` (neither service deletes in
    batches through its SDK's plain API), ``_mpu_put`` and ``_mpu_complete``, and
    ``_discard_parts`` to drop what an aborted upload staged. Keys live under
    ``prefix`` in a bucket or container.
    """

    supports_multipart = True

    def __init__(self, container: str, prefix: str, scheme: str, retry: RetryPolicy | None) -> None:
        super().__init__(retry)
        if not container:
            raise UsageError(
                f"a {scheme}:// URL needs a bucket or container: {scheme}://NAME[/PREFIX]"
            )
        self.prefix = prefix.strip("/")

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _rel(self, name: str) -> str:
        return name[len(self.prefix) + 1 :] if self.prefix else name

    @abc.abstractmethod
    def _delete_one(self, key: str) -> None:
        """Delete one key; NotFoundError (ignored) if it is absent."""

    @abc.abstractmethod
    def _list_all(self, prefix: str) -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix``, this class's own included."""

    @abc.abstractmethod
    def _discard_parts(self, key: str, upload_id: str) -> None:
        """Drop what an upload staged (its marker is the caller's)."""

    @abc.abstractmethod
    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes | bytearray) -> str:
        """Stage one part of the upload; what the completion needs to name it."""

    @abc.abstractmethod
    def _mpu_complete(self, key: str, upload_id: str, parts: builtins.list[tuple[int, str]]) -> str:
        """Join the staged parts into ``key`` and remove the marker; the object's ETag."""

    def _delete(self, keys: list[str]) -> None:
        """One request per key, ``_DELETE_THREADS`` at a time: a version's payload is many keys."""
        if len(keys) <= 1:
            for key in keys:
                self._delete_absent_ok(key)
            return
        with ThreadPoolExecutor(min(_DELETE_THREADS, len(keys)), "wanrl-delete") as pool:
            for _ in pool.map(self._delete_absent_ok, keys):
                pass  # raises the first failure; the caller's retry deletes the batch again

    def _delete_absent_ok(self, key: str) -> None:
        with contextlib.suppress(NotFoundError):
            self._delete_one(key)

    def _body_into(self, what: str, raw: Any, buf: memoryview) -> int:
        """Read a ranged GET's body (its urllib3 response) into ``buf``; the bytes that arrived.

        A stream that breaks keeps what arrived (the caller resumes after the
        last byte); TransientStoreError if nothing did.
        """
        try:
            done = read_socket_into(raw, buf)
        except StreamBroke as broke:
            if broke.done == 0:
                raise TransientStoreError(f"{self.url}: {what}: {broke.__cause__}") from broke
            return broke.done
        if done is None:
            raise StoreError(f"{self.url}: {what}: reads need the SDK's requests transport")
        return done

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        return (o for o in self._list_all(prefix) if not is_internal(o.key))

    def _mpu_create(self, key: str) -> str:
        upload_id = uuid.uuid4().hex
        self._put(marker_key(upload_id), key.encode(), if_none_match=True)
        return upload_id

    def _check_upload(self, key: str, upload_id: str) -> None:
        """NotFoundError unless ``upload_id`` is an upload of ``key`` still in progress."""
        blob = self._get(marker_key(upload_id), max_read_bytes=_MARKER_MAX_BYTES)
        if blob is None or blob.data.decode(errors="replace") != key:
            raise NotFoundError(f"{self.url}: no upload {upload_id} for {key}")

    def _mpu_abort(self, key: str, upload_id: str) -> None:
        self._discard_parts(key, upload_id)
        self._delete([marker_key(upload_id)])

    def _mpu_list(self, prefix: str) -> Iterator[PendingUpload]:
        for marker in self._list_all(UPLOADS_PREFIX):
            upload_id = marker.key[len(UPLOADS_PREFIX) :]
            if "/" in upload_id:
                continue  # a staged part, not a marker
            try:
                blob = self._get(marker.key, max_read_bytes=_MARKER_MAX_BYTES)
            except NotFoundError:
                continue  # completed or aborted meanwhile
            key = blob.data.decode(errors="replace") if blob else ""
            if key.startswith(prefix):
                yield PendingUpload(key, upload_id, marker.last_modified_s)


def timestamp_s(value: Any) -> float:
    """An SDK's datetime (or None) as seconds since the epoch (0.0 when unknown)."""
    return value.timestamp() if value is not None else 0.0
