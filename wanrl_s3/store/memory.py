"""memory:// : a process-local store for tests and examples.

Stores with the same name share one bucket, like fsspec's MemoryFileSystem, so
a publisher and a subscriber in one process see each other.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from collections.abc import Iterator
from typing import Any, Self
from urllib.parse import urlsplit

from ..errors import NotFoundError, PreconditionFailedError
from .retry import RetryPolicy
from .spec import Blob, ObjectInfo, ObjectStore, PendingUpload

_BUCKETS: dict[str, dict[str, tuple[bytes, str, float]]] = {}
_UPLOADS: dict[str, dict[str, tuple[str, float, dict[int, bytes]]]] = {}
_LOCK = threading.RLock()
_IDS = itertools.count(1)


def _etag(data: bytes) -> str:
    return '"' + hashlib.md5(data, usedforsecurity=False).hexdigest() + '"'


class MemoryStore(ObjectStore):
    """Objects in this process's memory, shared by every store of the same name.

    Copies move the bytes (the default ``_copy``): there is no service to copy inside.
    """

    protocol = "memory"
    supports_multipart = True
    takes_part_buffers = True

    def __init__(self, name: str = "default", *, retry: RetryPolicy | None = None) -> None:
        super().__init__(retry)
        self.name = name.strip("/") or "default"
        with _LOCK:
            self._objects = _BUCKETS.setdefault(self.name, {})
            self._uploads = _UPLOADS.setdefault(self.name, {})

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Self:
        """``memory://NAME``: every store of one name shares its objects."""
        parts = urlsplit(url)
        return cls(parts.netloc + parts.path, **options)

    @property
    def url(self) -> str:
        return f"memory://{self.name}"

    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        with _LOCK:
            try:
                data, etag, _ = self._objects[key]
            except KeyError:
                raise NotFoundError(f"{self.url}/{key} does not exist") from None
        if if_none_match == etag:
            return None
        return Blob(data if max_read_bytes is None else data[:max_read_bytes], etag)

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        data = self._get(key).data  # type: ignore[union-attr]
        chunk = data[offset : offset + len(buf)]
        buf[: len(chunk)] = chunk
        return len(chunk)

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        with _LOCK:
            current = self._objects.get(key)
            if if_none_match and current is not None:
                raise PreconditionFailedError(f"{self.url}/{key} already exists")
            if if_match is not None and (current is None or current[1] != if_match):
                raise PreconditionFailedError(f"{self.url}/{key} changed (ETag mismatch)")
            etag = _etag(bytes(data))
            self._objects[key] = (bytes(data), etag, time.time())
            return etag

    def _head(self, key: str) -> ObjectInfo | None:
        with _LOCK:
            item = self._objects.get(key)
        return None if item is None else ObjectInfo(key, len(item[0]), item[1], item[2])

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        with _LOCK:
            items = [(k, v) for k, v in self._objects.items() if k.startswith(prefix)]
        for key, (data, etag, mtime) in items:
            yield ObjectInfo(key, len(data), etag, mtime)

    def _delete(self, keys: list[str]) -> None:
        with _LOCK:
            for key in keys:
                self._objects.pop(key, None)

    def _mpu_create(self, key: str) -> str:
        upload_id = f"mem-{next(_IDS)}"
        with _LOCK:
            self._uploads[upload_id] = (key, time.time(), {})
        return upload_id

    def _mpu_put(self, key: str, upload_id: str, part_number: int, data: bytes | bytearray) -> str:
        with _LOCK:
            self._upload(key, upload_id)[2][part_number] = bytes(data)
        return _etag(bytes(data))

    def _mpu_complete(self, key: str, upload_id: str, parts: list[tuple[int, str]]) -> str:
        with _LOCK:
            stored = self._upload(key, upload_id)[2]
            data = b"".join(stored[n] for n, _ in sorted(parts))
            del self._uploads[upload_id]
            return self._put(key, data)

    def _mpu_abort(self, key: str, upload_id: str) -> None:
        with _LOCK:
            self._uploads.pop(upload_id, None)

    def _mpu_list(self, prefix: str) -> Iterator[PendingUpload]:
        with _LOCK:
            items = list(self._uploads.items())
        for upload_id, (key, started, _) in items:
            if key.startswith(prefix):
                yield PendingUpload(key, upload_id, started)

    def _upload(self, key: str, upload_id: str) -> tuple[str, float, dict[int, bytes]]:
        upload = self._uploads.get(upload_id)
        if upload is None or upload[0] != key:
            raise NotFoundError(f"no multipart upload {upload_id} for {key}")
        return upload
