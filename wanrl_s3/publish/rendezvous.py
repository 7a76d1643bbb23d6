"""The ranks of a sharded publish meet in the store, not in a process group.

Each rank posts its share record (created only if absent) once its payload is
complete; the committing rank polls one LIST of the version's share directory
until all R records are there, then commits; the other ranks poll for the
manifest, which tells them the version is committed and whether it holds their
share. Everything waits on an injectable clock with a bound, so a rank that
died costs a timeout (a clear error), never a hang, and tests run on fake time.

Why the store: it is the one thing every rank already reaches, across hosts,
without a process group (the verl trainer's collectives are busy with the
weights generator, and a benchmark's ranks are independent processes); the
cost is a few small requests per poll, against uploads of hundreds of MB.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import (
    NotFoundError,
    PreconditionFailedError,
    StoreError,
    UsageError,
    VersionConflictError,
)
from ..format import layout
from ..format.manifest import Manifest
from ..format.manifests import Manifests, read_bounded
from ..store import Clock, ObjectStore
from .share_record import (
    ABORT_NAME,
    BASE_NAME,
    MAX_ABORT_BYTES,
    ShareRecord,
    abort_json,
    base_json,
    parse_abort,
    parse_base,
    rank_of,
)


@dataclass(frozen=True)
class Rendezvous:
    """Where the ranks of run ``run_id`` meet for ``version`` (in the primary store)."""

    store: ObjectStore
    version: int
    run_id: str
    ranks: int
    timeout_s: float
    poll_s: float
    clock: Clock

    @property
    def prefix(self) -> str:
        return layout.shares_dir(self.version, self.run_id) + "/"

    def post(self, record: ShareRecord) -> None:
        """Create this rank's record; a create whose response was lost is recognised as ours."""
        key = layout.share_key(self.version, self.run_id, record.rank)
        data = record.to_json()
        for _ in range(3):
            try:
                self.store.put_bytes(key, data, if_none_match=True)
                return
            except PreconditionFailedError as exc:
                stored = read_bounded(self.store, key, f"share record of rank {record.rank}")
                if stored is None:
                    # Created, then removed: ours, read and cleared by a committer quicker
                    # than our retry (or another launch's): create it again; whether the
                    # version holds this share is decided by its manifest.
                    continue
                if stored == data:
                    return  # our create went through; the retry met it
                raise VersionConflictError(
                    f"{self.store.url}: {key} already holds a share of v{self.version} for "
                    f"rank {record.rank} of run {self.run_id!r}: another launch with the same "
                    "run id publishes (or published) this version; give every launch its own "
                    "run id"
                ) from exc
        raise StoreError(f"{self.store.url}: {key} kept vanishing while it was created")

    def gather(self, own: ShareRecord) -> list[ShareRecord]:
        """Every rank's record, in rank order, once all are posted (the committing rank).

        Raises StoreError when a rank posted an abort, or when records are still
        missing ``timeout_s`` after this call began (naming the missing ranks).
        """
        records = {own.rank: own}
        deadline_s = self.clock.monotonic() + self.timeout_s
        while True:
            for info in self.store.list(self.prefix):
                name = info.key[len(self.prefix) :]
                if name == ABORT_NAME:
                    why = self._read_abort(info.key)
                    if why is not None:  # None: removed since the listing
                        raise self._aborted(why)
                    continue
                rank = rank_of(name)
                if rank is None or rank in records:
                    continue
                if rank >= self.ranks:
                    raise UsageError(
                        f"a share record of rank {rank} for v{self.version}, but this job has "
                        f"{self.ranks} ranks: every rank must pass the same ranks="
                    )
                data = read_bounded(self.store, info.key, f"share record of rank {rank}")
                if data is None:
                    continue  # removed since the listing: not posted, as far as this poll knows
                records[rank] = ShareRecord.from_json(
                    data, version=self.version, run_id=self.run_id, rank=rank
                )
            if len(records) == self.ranks:
                return [records[r] for r in range(self.ranks)]
            if self.clock.monotonic() >= deadline_s:
                missing = sorted(set(range(self.ranks)) - set(records))
                raise StoreError(
                    f"v{self.version} not committed: rank(s) {_ranks(missing)} posted no share "
                    f"within {self.timeout_s:g} s (died, or slower than timeout_s); nothing is "
                    "visible and LATEST did not move"
                )
            self.clock.sleep(self.poll_s)

    def await_manifest(self, wait_s: float) -> Manifest:
        """The version's manifest once someone commits it (the other ranks).

        Raises StoreError on an abort, or when no manifest appears within ``wait_s``.
        """
        deadline_s = self.clock.monotonic() + wait_s
        manifests = Manifests(self.store)
        while True:
            with contextlib.suppress(NotFoundError):
                return manifests.get(self.version)
            why = self.aborted()
            if why is not None:
                raise self._aborted(why)
            if self.clock.monotonic() >= deadline_s:
                raise StoreError(
                    f"v{self.version} was not committed within {wait_s:g} s of this rank's "
                    "share: the committing rank died or is stuck; this share is left for gc"
                )
            self.clock.sleep(self.poll_s)

    def post_base(self, base: tuple[int, str] | None) -> None:
        """The committing rank's choice of delta base, (version, manifest digest) or None."""
        data = base_json(*(base or (None, None)))
        self.store.put_bytes(self.prefix + BASE_NAME, data)

    def await_base(self) -> tuple[int, str] | None:
        """The committing rank's choice of delta base (:meth:`post_base`), once posted.

        Raises StoreError on an abort, or when none is posted within ``timeout_s``;
        ManifestError when the record is malformed.
        """
        deadline_s = self.clock.monotonic() + self.timeout_s
        while True:
            data = read_bounded(self.store, self.prefix + BASE_NAME, "base record", MAX_ABORT_BYTES)
            if data is not None:
                return parse_base(data)
            why = self.aborted()
            if why is not None:
                raise self._aborted(why)
            if self.clock.monotonic() >= deadline_s:
                raise StoreError(
                    f"the committing rank chose no delta base for v{self.version} within "
                    f"{self.timeout_s:g} s (died, or slower than timeout_s)"
                )
            self.clock.sleep(self.poll_s)

    def aborted(self) -> str | None:
        """Why the version was given up (``rank N: reason``), or None if nobody gave up."""
        return self._read_abort(self.prefix + ABORT_NAME)

    def _read_abort(self, key: str) -> str | None:
        data = read_bounded(self.store, key, "abort marker", MAX_ABORT_BYTES)
        return None if data is None else parse_abort(data)

    def abort(self, rank: int, reason: str) -> None:
        """Tell every rank that ``version`` will not be committed (best effort; first wins)."""
        with contextlib.suppress(StoreError):
            self.store.put_bytes(self.prefix + ABORT_NAME, abort_json(rank, reason),
                                 if_none_match=True)  # fmt: skip

    def clear(self, ranks: Sequence[int]) -> None:
        """Remove the records of a committed version (best effort: gc collects leftovers)."""
        keys = [layout.share_key(self.version, self.run_id, r) for r in ranks]
        keys.append(self.prefix + BASE_NAME)
        with contextlib.suppress(StoreError):
            self.store.delete(keys)

    def _aborted(self, why: str) -> StoreError:
        return StoreError(f"v{self.version} was not committed: {why}")


def _ranks(ranks: Sequence[int]) -> str:
    shown = ", ".join(map(str, ranks[:16]))
    return shown + (f" and {len(ranks) - 16} more" if len(ranks) > 16 else "")
