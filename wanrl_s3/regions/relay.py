"""Copy mode: relay each new version from the primary region to the replicas.

``wanrl-s3 relay`` watches the primary's LATEST. For each replica, the relay
takes the newest version and every version of its delta chain, oldest first,
and makes the replica hold each exactly as the primary does, committing what
is missing as a publisher would (invariants 2 and 5):

1. every payload object, server-side (S3 CopyObject across buckets) where
   both buckets are on one S3 service, else streamed through this machine;
2. the copy is read back and checked: every object's size and every tensor's
   ``stored_hash`` (:func:`~wanrl_s3.fetch.stored.check_stored`). A payload
   flipped, replaced or truncated in the primary is copied faithfully, so it is
   the copy that must verify; one that does not is refused (VerificationError,
   logged with the version and region, exit 3 with ``--once``) and tried again
   at once when the primary's payload changes (it was repaired), else after 1,
   2, 4, ... passes (:mod:`.refusals`): a damaged primary is not copied, and
   read back, every poll interval;
3. the manifest, byte for byte (so signatures still verify), created with
   ``If-None-Match: *``;
4. LATEST, by compare-and-swap, once the whole chain is in: exactly the
   primary's pointer (signed, if it is), never moved backwards.

A replica therefore shows only whole versions that verify, and every version
there keeps its chain back to a keyframe (invariant 4). A relay that stops
midway leaves payload objects no manifest references (the GC's to collect) and
starts over where it stopped. Versions that are on no chain the newest one
needs are not copied: workers only ever want the newest.

The primary is read like any reader reads it (:mod:`wanrl_s3.format.manifests`):
each manifest bounded and checked against the digest its LATEST or its
successor pins, and, with a ``verifier`` (``--verify-key``), signed by a
trusted key, as is LATEST, which also must not have expired. The relay then
follows one run, like a worker: the one it is given (``--run``), else the run
of the replicas' own signed LATEST (what it relayed before: a relay started
by cron for one pass must not take another run's version planted in the
primary), else the primary's first. So an edited, forged or foreign manifest
is not relayed, and a LATEST that moves backwards is refused rather than
followed.

**Repair.** At its first pass, and whenever the primary's LATEST changes
without naming a newer version (the primary was repaired), the relay checks
each replica's chain again: a manifest that differs from the primary's, or
payload objects missing or of the wrong size, are copied again, checked and
committed over the damaged copy, and LATEST is set back to the primary's. Only
a replica version that is a valid version of its own (it parses, is signed by a
trusted key when a verifier is given, and names payload of its own, not the
primary's) is left alone as a conflict: something else published into the
replica, and the relay will not overwrite it. What each pass refused, per
region, is in :attr:`Relay.refused`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import (
    ManifestError,
    PreconditionFailedError,
    SignatureError,
    UsageError,
    VerificationError,
    VersionConflictError,
    WanrlError,
)
from ..fetch.download import wait_all
from ..fetch.stored import check_sizes, check_stored
from ..format import latest, layout
from ..format.manifest import Manifest
from ..format.manifests import Manifests, read_stored
from ..store import MIN_PART_BYTES, ObjectStore, PartSlots
from ..units import MiB, require_int, require_positive
from .config import RegionsConfig
from .refusals import RefusedCopies, StillRefused
from .relay_observer import IGNORE, PRIMARY, RelayObserver

if TYPE_CHECKING:
    from ..format.signing import Verifier

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
    """Copies versions from ``source`` to each store of ``replicas`` (named by region).

    ``verifier``: relay only versions (and a LATEST) signed by its keys, of one run
    (``run``, else the run the replicas hold; see the module docstring). ``observer``
    is told what happens (:class:`wanrl_s3.RelayMetrics`).
    """

    def __init__(
        self,
        source: ObjectStore,
        replicas: Mapping[str, ObjectStore],
        config: RelayConfig | None = None,
        *,
        observer: RelayObserver = IGNORE,
        verifier: Verifier | None = None,
        run: str | None = None,
    ) -> None:
        if not replicas:
            raise UsageError("the relay needs at least one replica region to copy to")
        self.source = source
        self.replicas = dict(replicas)
        self.config = config or RelayConfig()
        self.observer = observer
        self.verifier = verifier
        n = self.config.concurrency
        self._objects = ThreadPoolExecutor(n, thread_name_prefix="wanrl-relay")
        self._parts = ThreadPoolExecutor(n, thread_name_prefix="wanrl-relay-part")
        self._checks = ThreadPoolExecutor(n, thread_name_prefix="wanrl-relay-check")
        self._slots = PartSlots(n + 2)  # streamed parts held in memory, all copies
        self._etag: str | None = None
        self._target: int | None = None  # the primary's LATEST version
        self._pointer: latest.Latest | None = None  # and the pointer itself, signed or not
        self._synced: dict[str, str | None] = {}  # per replica: the primary ETag it matches
        self._present: dict[str, set[int]] = {name: set() for name in self.replicas}
        self.refused: dict[str, str] = {}  # per replica: why the last pass failed there
        self._refused_copies = RefusedCopies()
        self._run = run
        # the primary's manifests, verified and pinned from its LATEST down, kept as stored;
        # made at the first pass, once the run to follow is known
        self._primary: Manifests | None = None

    @classmethod
    def from_regions(
        cls,
        regions: RegionsConfig,
        config: RelayConfig | None = None,
        *,
        observer: RelayObserver = IGNORE,
        verifier: Verifier | None = None,
        run: str | None = None,
        **store_options: Any,
    ) -> Relay:
        """Primary to every other region of a regions file (its mode should be ``copy``)."""
        return cls(
            regions.store(regions.primary, **store_options),
            {r.name: r.store(**store_options) for r in regions.replicas},
            config,
            observer=observer,
            verifier=verifier,
            run=run,
        )

    def close(self) -> None:
        for pool in (self._objects, self._parts, self._checks):
            pool.shutdown(wait=True, cancel_futures=True)

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

        Every failure is logged and kept in :attr:`refused`; a replica that fails
        (unreachable, a copy that does not verify, a conflict) does not hold the
        others back, is tried again on the next pass, and the first failure is
        raised at the end.
        """
        try:
            start_s = time.monotonic()
            changed = self._manifests.poll_latest(self._etag)
            self.observer.polled(
                time.monotonic() - start_s, None if changed is None else changed[0].version
            )
            if changed is not None:
                if self._target is not None and changed[0].version <= self._target:
                    self._forget_checks()  # the primary changed in place: check everything again
                self._pointer, self._etag = changed
                self._target = self._pointer.version
        except WanrlError as exc:
            log.error("primary %s: cannot read LATEST: %s", self.source.url, exc)
            self.observer.failed(PRIMARY, exc)
            raise
        if self._target is None or self._pointer is None:
            return []
        done: list[RelayedVersion] = []
        failures: list[WanrlError] = []
        for name, replica in self.replicas.items():
            if name in self._synced and self._synced[name] == self._etag:
                continue
            try:
                done += self._sync_replica(name, replica, self._pointer)
            except WanrlError as exc:
                quiet = isinstance(exc, StillRefused) and not exc.first  # said at its first pass
                log.log(
                    logging.DEBUG if quiet else logging.ERROR,
                    "%s: refused to relay v%d: %s", name, self._target, exc,
                )  # fmt: skip
                self.refused[name] = f"v{self._target}: {exc}"
                self.observer.failed(name, exc)
                failures.append(exc)
            else:
                self._synced[name] = self._etag
                self.refused.pop(name, None)
                self.observer.synced(name, self._pointer.version)
        if failures:
            raise failures[0]
        return done

    @property
    def _manifests(self) -> Manifests:
        if self._primary is None:
            run = self._run or (None if self.verifier is None else self._replicas_run())
            self._primary = Manifests(self.source, keep_bytes=True, verifier=self.verifier, run=run)
        return self._primary

    def _replicas_run(self) -> str | None:
        """The run of the first replica whose LATEST a trusted key signed (expired or not)."""
        for name, replica in self.replicas.items():
            try:
                pointer = latest.read(replica)
                if pointer is None or self.verifier is None:
                    continue
                self.verifier.verify_bytes(pointer.signing_bytes(), pointer.signature, "LATEST")
            except (ManifestError, SignatureError) as exc:
                log.info("%s: its LATEST tells no run to follow (%s)", name, exc)
                continue
            if pointer.origin_run_id is not None:
                log.info("following run %s, the one %s holds", pointer.origin_run_id, name)
                return pointer.origin_run_id
        return None

    def _forget_checks(self) -> None:
        self._synced.clear()
        for present in self._present.values():
            present.clear()

    def _sync_replica(
        self, name: str, replica: ObjectStore, pointer: latest.Latest
    ) -> list[RelayedVersion]:
        chain = self._manifests.chain(pointer.version)
        missing = [m for m in chain if not self._has(name, replica, m)]
        done = [self._copy_version(name, replica, m) for m in missing]
        # the primary's own pointer, so a signed LATEST stays signed in every region
        moved = latest.restore(replica, pointer)
        log.info("%s: LATEST %s v%d", name, "at" if moved else "already past", pointer.version)
        self._manifests.retain(m.version for m in chain)
        return done

    # -- one version -----------------------------------------------------------------
    def _has(self, name: str, replica: ObjectStore, m: Manifest) -> bool:
        """Whether the replica holds the primary's ``m`` whole (its manifest, its objects at
        their sizes); False for a version to copy, or to repair. Another valid version in its
        place is a VersionConflictError."""
        if m.version in self._present[name]:
            return True
        try:
            found = read_stored(replica, m.version)
        except ManifestError:  # over the size bound: damaged, not a version
            found = b""
        if found is None:
            return False
        if found != self._manifests.stored_bytes(m.version):
            self._check_no_conflict(replica, m)
            log.warning("%s: v%d differs from the primary's: repairing it", name, m.version)
            return False
        try:
            check_sizes(replica, m)
        except VerificationError as exc:
            log.warning("%s: %s: repairing", name, exc)
            return False
        self._present[name].add(m.version)
        return True

    def _check_no_conflict(self, replica: ObjectStore, m: Manifest) -> None:
        """Refuse to overwrite a replica's version that is a valid version of its own."""
        try:
            theirs = Manifests(replica, verifier=self.verifier).get(m.version)
        except (ManifestError, SignatureError, VerificationError):
            return  # no valid version: a damaged copy, the relay's to repair
        ours = {o.key.split("/")[0] for o in m.objects}
        if not ours & {o.key.split("/")[0] for o in theirs.objects}:
            raise VersionConflictError(
                f"version {m.version} at {replica.url} is not the primary's: something else "
                "published into this replica; the relay will not overwrite it"
            )

    def _copy_version(self, name: str, replica: ObjectStore, m: Manifest) -> RelayedVersion:
        refusals = self._refused_copies  # the primary's ETags are asked only after a refusal
        if refusals.holds(name, m.version):
            refusals.check(name, m.version, self._source_etags(m))
        try:
            done = self._copy_checked(name, replica, m)
        except VerificationError as exc:
            refusals.refused(name, m.version, self._source_etags(m), exc)
            raise
        self._refused_copies.copied(name, m.version)
        return done

    def _source_etags(self, m: Manifest) -> tuple[str, ...]:
        """The primary's payload objects' ETags ("" where one is missing), as a copy sees them."""
        found = (self.source.head(m.payload_key(o.key)) for o in m.objects)
        return tuple("" if info is None else info.etag for info in found)

    def _copy_checked(self, name: str, replica: ObjectStore, m: Manifest) -> RelayedVersion:
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
        check_stored(replica, m, self._checks, chunk_bytes=cfg.part_bytes)  # what is committed
        self._commit_manifest(replica, m)
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

    def _commit_manifest(self, replica: ObjectStore, m: Manifest) -> None:
        """Create the manifest; over a damaged or edited copy (checked: not a conflict)."""
        data = self._manifests.stored_bytes(m.version)
        key = layout.manifest_key(m.version)
        try:
            replica.put_bytes(key, data, if_none_match=True)
        except PreconditionFailedError:  # ours from an interrupted pass, or one to repair
            try:
                same = read_stored(replica, m.version) == data
            except ManifestError:  # over the size bound: damaged
                same = False
            if not same:
                self._check_no_conflict(replica, m)
                replica.put_bytes(key, data)


__all__ = ["Relay", "RelayConfig", "RelayedVersion"]
