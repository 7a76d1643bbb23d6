"""Publishing one version from R trainer ranks: each uploads a share, one rank commits.

Every rank calls :meth:`ShardedPublisher.publish` with the same version. Each
encodes and uploads a disjoint share of the tensors with the single-process
publisher's own steps (:class:`~wanrl_s3.publish.publisher.VersionWriter`: same
payload objects, codecs and commit protocol), then posts a share record in the
store (:mod:`~wanrl_s3.publish.share_record`). The committing rank waits for
all R records, checks them (same run, version and base, disjoint names, same
tensor stream, every object landed), merges them into one manifest, binds it to
the store's run and signs it if it has a signer, creates it only if absent and
moves LATEST: the commit protocol of a single publisher, so a version is visible
only when whole. The
other ranks wait for the manifest, check it holds their share, and return.

Design choices, and why:

- **Assignment** (:mod:`~wanrl_s3.publish.assign`): ``balanced`` when every rank
  sees every tensor in the same order (verl's FSDP and Megatron-style
  generators): greedy by bytes over the stream, computed identically on every
  rank with no communication; ``own`` when ranks see only their shards: a rank
  publishes what it sees, and duplicate names across shares are refused at the
  merge.
- **Rendezvous through the store** (:mod:`~wanrl_s3.publish.rendezvous`), not a
  process group: it works across hosts and between independent processes, and
  needs nothing from the trainer's collectives while they drain the weights
  generator. A rank that dies means no commit: the committer times out
  (``timeout_s``, on an injectable clock) with an error naming the missing ranks,
  posts an abort so that the others stop waiting, and nothing becomes visible.
  Any rank that fails once the version is chosen (its claimability check, its
  upload, its record) posts that abort too, so the others stop at once rather
  than wait out ``timeout_s``.
  The other ranks wait for the commit too (at most ``2 * timeout_s``: the
  committer may itself still be waiting), so each rank keeps its delta base only
  for a version that really committed with its share in it; a rank that gives up
  waiting posts an abort too, so that no committer later merges its stale record.
- **Deltas**: each rank holds the base bits of its own share only. The
  keyframe cadence counts committed versions, which every rank sees alike (from
  the manifest it waits for), so all ranks agree on keyframe or delta. The
  single publisher's "delta too big -> republish as keyframe" needs the merged
  size, which only exists after the commit; republishing would upload the model
  twice and rendezvous twice. Instead each tensor still falls back to its whole
  bytes when its delta does not pay (as in Publisher), the oversized delta
  version is committed as it is (valid and bit-exact), and every rank, seeing
  the committed manifest's sizes, makes the *next* version a keyframe. A rank
  that lost its base (a failed version) sends its share whole; a delta version
  may hold whole tensors, so the version still commits.
- **Adopting** (:meth:`ShardedPublisher.adopt_newest`, at a launch's first
  version): only the committing rank may hold the keys that say whether the
  readers trust the store's newest version, so it decides and posts its choice
  next to the share records; the others follow it. Were each rank to decide
  alone, a rank without keys could send a delta against a base the committer
  refused, and the merged version would be one the readers cannot use. Each rank
  fetches only its own share of the base, as it would hold after publishing it.
- ``run_id`` must be the same on every rank of one launch and new for every
  launch (broadcast one from rank 0 at start, or derive it from the job id and
  restart count): share records are keyed by it. A rank that finds its key taken
  (another launch with the same id) refuses and aborts the version; records a
  crashed launch left come with its abort marker unless a rank was killed
  outright, which is why the id must not be reused.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import (
    StoreError,
    UsageError,
    VerificationError,
    VersionConflictError,
    WanrlError,
)
from ..fetch.subscriber import Subscriber
from ..format import layout
from ..format.listing import Listings
from ..format.manifest import RUN_ID_RE, Manifest
from ..format.manifests import Manifests
from ..io.tensors import StateDict, iter_items
from ..store import SYSTEM_CLOCK, Clock, ObjectStore
from ..units import require_positive
from .adopt import AdoptionPoint, adoption_point, base_tensors, take, trusted
from .assign import ShareSelector, check_rank
from .merge import merge
from .publisher import Continuing, DeltaBase, Draft, PublishConfig, PublishResult, VersionWriter
from .rendezvous import Rendezvous
from .share_record import ASSIGN_MODES, ShareRecord

if TYPE_CHECKING:
    from ..format.signing import Verifier

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Ranks:
    """Who this rank is among how many, and how they meet. Validated on creation."""

    rank: int
    ranks: int
    assign: str
    commit_rank: int
    timeout_s: float
    poll_s: float

    def __post_init__(self) -> None:
        check_rank("rank", self.rank, self.ranks)
        check_rank("commit_rank", self.commit_rank, self.ranks)
        if self.assign not in ASSIGN_MODES:
            raise UsageError(
                f"assign must be one of {', '.join(ASSIGN_MODES)}, got {self.assign!r}"
            )
        require_positive("timeout_s", self.timeout_s)
        require_positive("poll_s", self.poll_s)


class ShardedPublisher(Continuing):
    """One rank's part in publishing versions from R ranks (see the module docstring).

    Construct one on every rank with the same ``store``, ``config``, ``ranks``,
    ``run_id`` and ``assign``; only the committing rank (``commit_rank``) needs a
    ``signer``. Not thread-safe: one publish at a time per rank.

    With ``assign="balanced"`` a rank reads only the name, shape and dtype of the
    tensors that are not its own, never their data (:class:`~wanrl_s3.ShareSelector`
    decides which are, with the same rule): other ranks' tensors may be storage-less
    placeholders (torch ``meta`` tensors), so a rank need hold only its share.

    A :class:`~wanrl_s3.VersionPublisher`, like :class:`~wanrl_s3.Publisher`: the
    trainer core (:class:`~wanrl_s3.TrainerPublisher`) drives either.
    """

    def __init__(
        self,
        store: ObjectStore | Sequence[ObjectStore],
        config: PublishConfig | None = None,
        *,
        rank: int,
        ranks: int,
        run_id: str,
        assign: str = "balanced",
        commit_rank: int = 0,
        signer: Any = None,
        timeout_s: float = 600.0,
        poll_s: float = 0.5,
        clock: Clock | None = None,
    ) -> None:
        """``assign``: "balanced" (every rank sees every tensor) or "own" (each rank sees
        and publishes only its own). ``timeout_s``: how long the committing rank waits for
        the last share after its own. ``clock``: for tests (fake time)."""
        self._spec = _Ranks(rank, ranks, assign, commit_rank, timeout_s, poll_s)
        if not isinstance(run_id, str) or not RUN_ID_RE.match(run_id) or run_id in (".", ".."):
            raise UsageError(
                f"run_id must be 1-128 characters of letters, digits and '._-', got {run_id!r}"
            )
        self._writer = VersionWriter(store, config, run_id=run_id, signer=signer, rank=rank)
        self.clock = clock or SYSTEM_CLOCK

    @property
    def store(self) -> ObjectStore:
        """The primary store, where the ranks meet."""
        return self._writer.store

    @property
    def stores(self) -> tuple[ObjectStore, ...]:
        """Every store each version is written to (the first is the primary)."""
        return self._writer.stores

    @property
    def rank(self) -> int:
        """This rank (0 to ``ranks - 1``)."""
        return self._spec.rank

    @property
    def ranks(self) -> int:
        """How many ranks publish each version."""
        return self._spec.ranks

    @property
    def run_id(self) -> str:
        """The run every rank's versions belong to (each manifest records it)."""
        return self._writer.run_id

    @property
    def config(self) -> PublishConfig:
        """The publication settings every rank shares."""
        return self._writer.config

    @property
    def signer(self) -> Any:
        """The signer of each committed manifest, or None: versions go out unsigned."""
        return self._writer.signer

    @property
    def is_committer(self) -> bool:
        """Whether this rank is ``commit_rank``: it writes each version's manifest and LATEST."""
        return self._spec.rank == self._spec.commit_rank

    def share_selector(self) -> ShareSelector | None:
        """This rank's picks out of one version's stream, when every rank sees it whole.

        With ``assign="balanced"``, a fresh selector with the very rule
        :meth:`publish` applies: a caller fed the stream first (a host copy that keeps
        only this rank's tensors) knows the share as the tensors go past. None with
        ``"own"``: this rank publishes every tensor it is given.
        """
        spec = self._spec
        return ShareSelector(spec.rank, spec.ranks) if spec.assign == "balanced" else None

    def publish(
        self,
        tensors: StateDict,
        version: int,
        *,
        metadata: Mapping[str, str] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> PublishResult | None:
        """Publish this rank's share of ``version``; return once the version is committed.

        ``tensors``: every tensor (``balanced``) or this rank's own (``own``), as a
        mapping or (name, tensor) pairs. Returns the PublishResult on the committing
        rank and None on the others. ``metadata`` is taken from the committing rank.
        Raises VersionConflictError if the version is taken (this share removed),
        StoreError if a rank failed or did not arrive in time (nothing visible),
        UsageError if the shares do not fit together (nothing visible).
        """
        start = time.monotonic()
        meet = self._meet(version)
        try:
            base, held = self._writer.begin(version)
        except BaseException as exc:  # e.g. LATEST unreadable here only: stop the others now
            meet.abort(self._spec.rank, f"it could not begin v{version}: {exc}")
            raise
        draft, own = self._share(tensors, version, base, held, progress, meet)
        if self.is_committer:
            manifest, moved = self._commit(own, meet, metadata or {})
        else:
            manifest, moved = self._confirm(draft, own, meet), False
        if held is not None:
            self._writer.keep(manifest, held, self._since_keyframe(manifest, base))
        if not self.is_committer:
            return None
        return PublishResult.of(manifest, time.monotonic() - start, moved)

    def adopt_newest(
        self, version: int, names: Collection[str] | None, *, verifier: Verifier | None = None
    ) -> AdoptionPoint | None:
        """Continue from the store's newest version, so the launch's first version is a delta.

        Call on every rank before the launch's first :meth:`publish` (of ``version``);
        the trainer core (:class:`~wanrl_s3.TrainerPublisher`) does. The committing rank
        judges whether the readers trust the newest version (``verifier``, else its
        signer's key) and posts its choice; the others wait for it (``timeout_s`` at
        most) and follow it, so that every rank encodes against that base or none does.
        Each rank then fetches, verified, only the tensors of ``names`` (its share;
        None: it takes no base but still takes part). Returns where the store stood
        (``adopted``: whether this rank took a base), None when it is empty. Raises
        StoreError when the committing rank gave up or posted no choice in time.
        """
        meet = self._meet(version)
        with Subscriber(self.store) as sub:
            point = adoption_point(sub)
            if self.is_committer:
                chosen = point is not None and trusted(sub, point, self, verifier)
                try:
                    meet.post_base(point.base_key if chosen and point is not None else None)
                except StoreError as exc:
                    meet.abort(self.rank, f"it could not post the delta base: {exc}")
                    raise
            else:
                chosen = point is not None and self._follow(meet.await_base(), point)
            if not chosen or point is None or names is None:
                return point
            tensors = base_tensors(sub, point, names)
        return point if tensors is None else take(self, point, tensors)

    def _follow(self, posted: tuple[int, str] | None, point: AdoptionPoint) -> bool:
        """Whether the committing rank's choice is the newest version this rank sees."""
        if posted is None:
            return False
        if posted != point.base_key:
            log.warning(
                "rank %d: the committing rank chose v%d as the delta base but this rank sees "
                "v%d as the newest: its share of the first version is sent whole",
                self.rank, posted[0], point.version,
            )  # fmt: skip
            return False
        self.origin_run_id = point.origin_run_id
        return True

    def _meet(self, version: int) -> Rendezvous:
        """Where the ranks meet for ``version``."""
        spec = self._spec
        return Rendezvous(
            self._writer.store, layout.check_version(version), self.run_id, spec.ranks,
            spec.timeout_s, spec.poll_s, self.clock,
        )  # fmt: skip

    # -- every rank -------------------------------------------------------------
    def _share(
        self,
        tensors: StateDict,
        version: int,
        base: DeltaBase | None,
        held: dict[str, Any] | None,
        progress: Callable[[int], None] | None,
        meet: Rendezvous,
    ) -> tuple[Draft, ShareRecord]:
        """Encode and upload this rank's share, then post its record."""
        spec = self._spec
        selector = ShareSelector(spec.rank, spec.ranks, spec.assign)
        items = selector.select(iter_items(tensors))
        try:
            draft = self._writer.write(items, version, base, held, progress, allow_empty=True)
        except BaseException as exc:
            meet.abort(spec.rank, f"its share failed: {exc}")
            raise
        record = ShareRecord(
            run_id=self.run_id,
            version=version,
            rank=spec.rank,
            ranks=spec.ranks,
            assign=spec.assign,
            publish_id=draft.writer.publish_id,
            share=draft.manifest(self.run_id, version, {}) if draft.entries else None,
            stream_hash=selector.stream_hash(),
        )
        try:
            meet.post(record)
        except BaseException as exc:
            meet.abort(spec.rank, f"its share record could not be posted: {exc}")
            draft.writer.delete_objects()
            raise
        return draft, record

    def _since_keyframe(self, manifest: Manifest, base: DeltaBase | None) -> int:
        """Versions since the keyframe, as every rank counts them from the committed manifest.

        A delta version over the fraction makes the next version a keyframe on every
        rank (the single publisher republishes it instead; see the module docstring).
        """
        cfg = self.config
        if manifest.kind == "full":
            return 0
        if self._writer.delta_too_big(manifest):
            return cfg.keyframe_every
        if base is not None and base.version == manifest.base_version:
            return base.since_keyframe + 1
        return (
            len(Manifests(self._writer.store).chain(manifest.version)) - 1
        )  # this rank had no base

    def _discard(self, records: Sequence[ShareRecord], stores: Sequence[ObjectStore]) -> None:
        """Remove the payload of ``records`` from ``stores`` (best effort; gc collects the rest)."""
        if not records:
            return
        keys = [r.share.payload_key(o.key) for r in records if r.share for o in r.share.objects]
        for store in stores:
            with contextlib.suppress(StoreError):
                store.delete(keys)

    # -- the committing rank ----------------------------------------------------------
    def _commit(
        self, own: ShareRecord, meet: Rendezvous, metadata: Mapping[str, str]
    ) -> tuple[Manifest, bool]:
        pub, records = self._writer, [own]
        try:
            records = meet.gather(own)
            manifest = merge(records, metadata=metadata, created_at_s=time.time())
            _check_landed(pub.stores, records)
            manifest = pub.seal(manifest)
        except BaseException as exc:
            meet.abort(self._spec.rank, f"the committing rank gave up: {exc}")
            self._discard(records, pub.stores)
            if isinstance(exc, WanrlError) and pub.store.exists(layout.manifest_key(own.version)):
                raise VersionConflictError(  # e.g. our other ranks saw it and removed their shares
                    f"v{own.version} was claimed by another publisher at {pub.store.url} while "
                    f"this job published it; this job's shares were removed ({exc})"
                ) from exc
            raise
        try:
            pub.commit(
                manifest,
                [r.publish_id for r in records],
                lambda stores: self._discard(records, stores),
            )
        except VersionConflictError as exc:
            meet.abort(self._spec.rank, str(exc))
            raise
        meet.clear(range(self._spec.ranks))
        return manifest, pub.advance(manifest)

    # -- the other ranks --------------------------------------------------------------
    def _confirm(self, draft: Draft, own: ShareRecord, meet: Rendezvous) -> Manifest:
        """Wait for the commit; the manifest, if it holds this share."""
        wait_s = 2 * self._spec.timeout_s
        try:
            manifest = meet.await_manifest(wait_s)
        except StoreError:
            if meet.aborted() is not None:  # no commit will come: this share is garbage now
                draft.writer.delete_objects()
            else:  # the committer may still commit it: keep the share, but stop later ranks
                meet.abort(self._spec.rank, f"gave up waiting {wait_s:g} s for the commit")
            raise
        if not _holds(manifest, own):
            draft.writer.delete_objects()
            raise VersionConflictError(
                f"v{own.version} was committed by another publisher (run {manifest.run_id!r}) "
                f"at {self._writer.store.url}; this rank's share was removed"
            )
        return manifest


def _holds(manifest: Manifest, record: ShareRecord) -> bool:
    """Whether ``manifest`` is our version: our run, with this share's objects and tensors."""
    if manifest.run_id != record.run_id:
        return False
    if not set(record.object_keys) <= {o.key for o in manifest.objects}:
        return False
    tensors = () if record.share is None else record.share.tensors
    return all(manifest.by_name.get(t.name) == t for t in tensors)


def _check_landed(stores: Sequence[ObjectStore], records: Sequence[ShareRecord]) -> None:
    """Every object a share names exists, at its recorded size, in every store."""
    version = records[0].version
    shares = [(r, r.share) for r in records if r.share is not None]
    for store in stores:
        listings = Listings(store)
        for r, share in shares:
            for obj in share.objects:
                found = listings.size(share.payload_key(obj.key))
                if found != obj.size:
                    raise VerificationError(
                        f"v{version}: rank {r.rank}'s share names {obj.key!r} of {obj.size} "
                        f"bytes, but {store.url} holds "
                        + ("no such object" if found is None else f"{found} bytes")
                    )
