"""A third party's backend in miniature: the abstract primitives and nothing optional.

It declares no multipart uploads and no server-side copies, so the contract's
cases for those are skipped and the helpers' fallbacks (a writer that sends
one PUT, copies that read and write) carry it. It takes its URL whole, through
the default ``from_url``, and one option of its own (``color``).
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from urllib.parse import urlsplit

from wanrl_s3.errors import NotFoundError, PreconditionFailedError
from wanrl_s3.store import Blob, ObjectInfo, ObjectStore, RetryPolicy


class DictStore(ObjectStore):
    protocol = "dict"

    def __init__(self, url: str, *, retry: RetryPolicy | None = None, color: str = "plain") -> None:
        super().__init__(retry)
        self.name = urlsplit(url).netloc
        self.color = color
        self.objects: dict[str, tuple[bytes, str]] = {}
        self._lock = threading.Lock()
        self._generations = itertools.count(1)

    @property
    def url(self) -> str:
        return f"dict://{self.name}"

    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        with self._lock:
            if key not in self.objects:
                raise NotFoundError(f"{self.url}/{key} does not exist")
            data, etag = self.objects[key]
        return None if etag == if_none_match else Blob(data[:max_read_bytes], etag)

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        blob = self._get(key)
        chunk = blob.data[offset : offset + len(buf)] if blob else b""
        buf[: len(chunk)] = chunk
        return len(chunk)

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        with self._lock:
            current_etag = self.objects[key][1] if key in self.objects else None
            if (if_none_match and current_etag) or (if_match and current_etag != if_match):
                raise PreconditionFailedError(f"{self.url}/{key}: precondition failed")
            etag = f'"{next(self._generations)}"'
            self.objects[key] = (bytes(data), etag)
            return etag

    def _head(self, key: str) -> ObjectInfo | None:
        with self._lock:
            item = self.objects.get(key)
        return None if item is None else ObjectInfo(key, len(item[0]), item[1])

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        with self._lock:
            items = [(k, v) for k, v in self.objects.items() if k.startswith(prefix)]
        return (ObjectInfo(k, len(data), etag) for k, (data, etag) in items)

    def _delete(self, keys: list[str]) -> None:
        with self._lock:
            for key in keys:
                self.objects.pop(key, None)
