"""Copy mode: relay each new version from the primary region to the replicas.

``wanrl-s3 relay`` watches the primary's LATEST. For each replica behind it,
the relay takes the newest version and every version of its delta chain that
the replica lacks, oldest first, and commits each there exactly as a
publisher would (invariants 2 and 5):

1. every payload object, server-side (S3 CopyObject across buckets) where
   both buckets are on one S3 service, else streamed through this machine;
2. the manifest, byte for byte (so signatures still verify), created with
   ``If-None-Match: *``; a replica holding a different manifest for that
   version is a VersionConflictError, never overwritten;
3. LATEST, by compare-and-swap and only forwards, once the whole chain is in.

A replica therefore shows only whole versions, and every version there keeps
its chain back to a keyframe (invariant 4). A relay that stops midway leaves
payload objects no manifest references (the GC's to collect) and starts over
where it stopped. Versions that are on no chain the newest one needs are not
copied: workers only ever want the newest.

The primary is read like any reader reads it (:mod:`wanrl_s3.format.manifests`):
each manifest bounded and checked against the digest its LATEST or its
successor pins, so an edited manifest is not relayed, and a LATEST that moves
backwards is refused rather than followed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..errors import (
    PreconditionFailedError,
    UsageError,
    VersionConflictError,
    WanrlError,
)
from ..fetch.download import wait_all
from ..format import latest, layout
from ..format.manifest import Manifest
from ..format.manifests import Manifests, read_stored
from ..store import MIN_PART_BYTES, ObjectStore
from ..units import MiB, require_int, require_positive
from .config import RegionsConfig
from .relay_observer import IGNORE, PRIMARY, RelayObserver

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RelayConfig:
    poll_interval_s: float = 5.0
    concurrency: int = 8  # objects copied at once, and part uploads when streaming
    part_bytes: int = 8 * MiB  # streamed copies: ranged-read and multipart part size

    def __post_init__(self) -> None:
        require_positive("poll_interval_s", self.poll_interval_s)
        require_int("concurrency", self.concurrency)
        if require_int("part_bytes", self.part_bytes) < MIN_PART_BYTES:
            raise UsageError(f"part_bytes must be >= {MIN_PART_BYTES} (S3's minimum part size)")


@dataclass(frozen=True)
class RelayedVersion:
    """One version committed in one replica."""

    region: str
    version: int
    objects: int
    copied_bytes: int
    server_side: bool  # every object copied inside the service, none streamed
    seconds: float


class Relay:
    """Copies versions from ``source`` to each store of ``replicas`` (named by region);
    ``observer`` is told what happens (:class:`wanrl_s3.RelayMetrics`)."""

    def __init__(
        self,
        source: ObjectStore,
        replicas: Mapping[str, ObjectStore],
        config: RelayConfig | None = None,
        *,
        observer: RelayObserver = IGNORE,
    ) -> None:
        if not replicas:
            raise UsageError("the relay needs at least one replica region to copy to")
        self.source = source
        self.replicas = dict(replicas)
        self.config = config or RelayConfig()
        self.observer = observer
        n = self.config.concurrency
        self._objects = ThreadPoolExecutor(n, thread_name_prefix="wanrl-relay")
        self._parts = ThreadPoolExecutor(n, thread_name_prefix="wanrl-relay-part")
        self._slots = threading.Semaphore(n + 2)  # streamed parts held in memory, all copies
        self._etag: str | None = None
        self._target: int | None = None  # the primary's LATEST version
        self._pointer: latest.Latest | None = None  # and the pointer itself, signed or not
        self._synced: dict[str, int] = {}  # per replica: the version its LATEST was moved to
        self._present: dict[str, set[int]] = {name: set() for name in self.replicas}
        # the primary's manifests, verified and pinned from its LATEST down, kept as stored
        self._manifests = Manifests(source, keep_bytes=True)

    @classmethod
    def from_regions(
        cls,
        regions: RegionsConfig,
        config: RelayConfig | None = None,
        *,
        observer: RelayObserver = IGNORE,
        **store_options: Any,
    ) -> Relay:
        """Primary to every other region of a regions file (its mode should be ``copy``)."""
        return cls(
            regions.store(regions.primary, **store_options),
            {r.name: r.store(**store_options) for r in regions.replicas},
            config,
            observer=observer,
        )

    def close(self) -> None:
        self._objects.shutdown(wait=True, cancel_futures=True)
        self._parts.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Relay:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- the loop -------------------------------------------------------------------
    def run(self, stop: threading.Event) -> None:
        """Sync, wait a poll interval, repeat until ``stop``; failures are logged and retried."""
        while not stop.is_set():
            try:
                self.sync_once()
            except WanrlError:  # logged where it happened
                log.info("retrying in %.1f s", self.config.poll_interval_s)
            stop.wait(self.config.poll_interval_s)

    def sync_once(self) -> list[RelayedVersion]:
        """Bring every replica up to the primary's LATEST; what was committed where.

        Every failure is logged; a replica that fails (unreachable, a conflict)
        does not hold the others back, and the first failure is raised at the end.
        """
        try:
            start_s = time.monotonic()
            changed = self._manifests.poll_latest(self._etag)
            self.observer.polled(
                time.monotonic() - start_s, None if changed is None else changed[0].version
            )
            if changed is not None:
                self._pointer, self._etag = changed
                self._target = self._pointer.version
        except WanrlError as exc:
            log.error("primary %s: cannot read LATEST: %s", self.source.url, exc)
            self.observer.failed(PRIMARY, exc)
            raise
        if self._target is None:
            return []
        done: list[RelayedVersion] = []
        failures: list[WanrlError] = []
        for name, replica in self.replicas.items():
            if self._synced.get(name, -1) < self._target:
                try:
                    done += self._sync_replica(name, replica, self._target)
                except WanrlError as exc:
                    log.error("%s: could not relay v%d: %s", name, self._target, exc)
                    self.observer.failed(name, exc)
                    failures.append(exc)
        if failures:
            raise failures[0]
        return done

    def _sync_replica(self, name: str, replica: ObjectStore, target: int) -> list[RelayedVersion]:
        current, _ = latest.committed_version(replica)  # -1: absent or corrupt
        done = []
        if current < target:
            chain = self._manifests.chain(target)
            for m in chain:
                if not self._has(name, replica, m.version):
                    done.append(self._copy_version(name, replica, m))
            # the primary's own pointer, so a signed LATEST stays signed in every region
            moved = latest.advance(replica, chain[-1], pointer=self._pointer)
            log.info(
                "%s: LATEST %s v%d", name, "moved to" if moved else "already at or past", target
            )
            self._manifests.retain(m.version for m in chain)
        self._synced[name] = max(current, target)
        self.observer.synced(name, self._synced[name])
        return done

    # -- one version -----------------------------------------------------------------
    def _has(self, name: str, replica: ObjectStore, version: int) -> bool:
        """Whether the replica holds the primary's manifest of ``version`` (another: conflict)."""
        if version not in self._present[name]:
            found = read_stored(replica, version)
            if found is None:
                return False
            self._same_as_primary(replica, version, found)
            self._present[name].add(version)
        return True

    def _copy_version(self, name: str, replica: ObjectStore, m: Manifest) -> RelayedVersion:
        start = time.monotonic()
        cfg = self.config
        futures = [
            self._objects.submit(
                replica.copy_from,
                self.source,
                m.payload_key(o.key),
                m.payload_key(o.key),
                size=o.size,
                executor=self._parts,
                part_bytes=cfg.part_bytes,
                slots=self._slots,
            )
            for o in m.objects
        ]
        copied: list[bool] = wait_all(futures)  # every payload object, before the manifest
        server_side = all(copied)
        self._commit_manifest(replica, m.version)
        self._present[name].add(m.version)
        done = RelayedVersion(
            name, m.version, len(m.objects), m.stored_bytes, server_side, time.monotonic() - start
        )
        log.info(
            "relayed v%d to %s: %d objects, %d bytes %s in %.2f s",
            m.version,
            name,
            done.objects,
            done.copied_bytes,
            "server-side" if server_side else "streamed",
            done.seconds,
        )
        self.observer.relayed(done)
        return done

    def _commit_manifest(self, replica: ObjectStore, version: int) -> None:
        try:
            replica.put_bytes(
                layout.manifest_key(version),
                self._manifests.stored_bytes(version),
                if_none_match=True,
            )
        except PreconditionFailedError as exc:  # ours from an interrupted pass, or a conflict
            self._same_as_primary(replica, version, read_stored(replica, version), exc)

    def _same_as_primary(
        self,
        replica: ObjectStore,
        version: int,
        found: bytes | None,
        cause: Exception | None = None,
    ) -> None:
        if found != self._manifests.stored_bytes(version):
            raise VersionConflictError(
                f"version {version} at {replica.url} is not the primary's: something else "
                "published into this replica; the relay will not overwrite it"
            ) from cause


__all__ = ["Relay", "RelayConfig", "RelayedVersion"]
