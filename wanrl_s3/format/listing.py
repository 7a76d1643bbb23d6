"""What a store holds in a version's directories, each listed once.

A version's keys lie in its own directory (the manifest, share records, and the
payload when it has one prefix) and, when its payload is dealt over payload
prefixes, in one directory per prefix (``v/p<k>/<version>``, see
:mod:`wanrl_s3.format.layout`). A check that a version is whole lists exactly the
directories its keys lie in, once each: one request per directory, and where a
role may list but not read a missing key, S3 answers 403 to a GET, not 404.
"""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import Executor

from ..errors import UsageError
from ..store import ObjectStore
from . import layout


class Listings:
    """The sizes of a version's keys in one store, listing each directory on first use."""

    def __init__(self, store: ObjectStore) -> None:
        self.store = store
        self._sizes: dict[str, dict[str, int]] = {}

    def size(self, key: str) -> int | None:
        """The stored size of ``key`` (a version's key), or None when it is not there."""
        directory = _directory(key)
        listed = self._sizes.get(directory)
        if listed is None:
            listed = self._sizes[directory] = self._list(directory)
        return listed.get(key)

    def fill(self, keys: Iterable[str], pool: Executor) -> None:
        """List the directories of ``keys`` not listed yet, all at once on ``pool``: a
        version's payload prefixes cost one round trip, not one each."""
        todo = sorted({_directory(key) for key in keys} - set(self._sizes))
        for directory, listed in zip(todo, pool.map(self._list, todo), strict=True):
            self._sizes[directory] = listed

    def _list(self, directory: str) -> dict[str, int]:
        return {o.key: o.size for o in self.store.list(directory + "/")}

    def holds(self, key: str, size: int) -> bool:
        """Whether ``key`` is there with at least ``size`` bytes (shorter, or not there:
        the version is not whole yet)."""
        found = self.size(key)
        return found is not None and found >= size

    @property
    def requests(self) -> int:
        """Listings made so far."""
        return len(self._sizes)


def _directory(key: str) -> str:
    directory = layout.directory_of(key)
    if directory is None:
        raise UsageError(f"{key!r} is not a key of a version")
    return directory
