"""memory:// stores with one deliberate fault each, for the store doctor and publish's check."""

from __future__ import annotations

from collections.abc import Iterator

from wanrl_s3.errors import PreconditionFailedError
from wanrl_s3.store import Blob, ObjectInfo
from wanrl_s3.store.memory import MemoryStore


class IgnoresConditions(MemoryStore):
    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        return super()._put(key, data)


class StaleReads(MemoryStore):
    """GET answers with the object as it was before its last write."""

    previous: dict[str, Blob]

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        if not hasattr(self, "previous"):
            self.previous = {}
        info = self._head(key)
        if info is not None:
            self.previous[key] = super()._get(key)  # type: ignore[assignment]
        return super()._put(key, data, if_none_match=if_none_match, if_match=if_match)

    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        stale = getattr(self, "previous", {}).get(key)
        return stale or super()._get(
            key, if_none_match=if_none_match, max_read_bytes=max_read_bytes
        )


class StaleListing(MemoryStore):
    """LIST shows nothing written in the last 3 writes."""

    recent: list[str]

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        if not hasattr(self, "recent"):
            self.recent = []
        self.recent = [*self.recent[-2:], key]
        return super()._put(key, data, if_none_match=if_none_match, if_match=if_match)

    def _list(self, prefix: str) -> Iterator[ObjectInfo]:
        hidden = set(getattr(self, "recent", []))
        return (o for o in super()._list(prefix) if o.key not in hidden)


class IgnoresRanges(MemoryStore):
    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        return super()._read_into(key, 0, buf)


class KeepsDeleted(MemoryStore):
    def _delete(self, keys: list[str]) -> None:
        pass


class OneEtag(MemoryStore):
    """Every write gets the same ETag (and If-Match compares against it)."""

    def _put(
        self, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        if if_match not in (None, '"same"'):
            raise PreconditionFailedError(key)
        super()._put(key, data, if_none_match=if_none_match)
        return '"same"'

    def _head(self, key: str) -> ObjectInfo | None:
        info = super()._head(key)
        return None if info is None else ObjectInfo(key, info.size, '"same"', 0.0)

    def _get(
        self, key: str, *, if_none_match: str | None = None, max_read_bytes: int | None = None
    ) -> Blob | None:
        blob = super()._get(key, max_read_bytes=max_read_bytes)
        return None if if_none_match == '"same"' else Blob(blob.data, '"same"')  # type: ignore[union-attr]


class StoresBadChecksums(MemoryStore):
    upload_check = "something else catches it"

    def _put_with_wrong_checksum(self, key: str, data: bytes) -> bool:
        self._put(key, data)
        return False


class UnconditionalCompletion(MemoryStore):
    def _mpu_complete_if_absent(
        self, key: str, upload_id: str, parts: list[tuple[int, str]]
    ) -> str:
        return self._mpu_complete(key, upload_id, parts)


class ShortReads(MemoryStore):
    """Ranged reads stop 10 bytes before the object's end, and HEAD says so."""

    def _read_into(self, key: str, offset: int, buf: memoryview) -> int:
        size = len(super()._get(key).data) - 10  # type: ignore[union-attr]
        return super()._read_into(key, offset, buf[: max(0, size - offset)])

    def _head(self, key: str) -> ObjectInfo | None:
        info = super()._head(key)
        return None if info is None else ObjectInfo(key, info.size - 10, info.etag, 0.0)
