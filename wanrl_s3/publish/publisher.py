"""Publishing a policy version: tensors -> payload objects -> manifest -> LATEST.

The commit protocol (invariants 2 and 5 in DESIGN.md):

1. every payload object is written first, under a random publish id, in
   parallel multipart uploads;
2. then the manifest is created with ``If-None-Match: *``, so exactly one
   publisher can claim a version, and a claimed version never changes;
3. then LATEST is moved by compare-and-swap (``If-Match``), and only forwards.

A crash before step 2 leaves LATEST and every published version untouched;
the orphaned payload is collected by the GC. Readers find a version only
through its manifest, and only after all its bytes exist.

Given several stores (``fanout`` across regions), one pass over the tensors
writes the same payload objects to every store; the version is checked
claimable in every store before anything is written, then its manifest is
created in each store in turn and, only once every store holds it, LATEST
moves in each. A conflict in any store is a VersionConflictError.

For deltas the publisher keeps the bits it last published in host memory (one
copy of the model) and encodes each new tensor against them: a bit-exact XOR
delta (:mod:`wanrl_s3.codec`), or the raw bytes when the tensor changed
densely. A keyframe (a full version) goes out every ``keyframe_every``
versions, whenever no valid base is held, and whenever the delta came out
bigger than ``max_delta_fraction`` of a full snapshot.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..codec import CODING_PLANES, encode_full
from ..codec import bridge as codec_bridge
from ..errors import (
    ManifestError,
    PreconditionFailedError,
    UsageError,
    VersionConflictError,
)
from ..format import dtypes, hashing, latest, layout
from ..format.manifest import Manifest, ObjectRef, TensorEntry, check_tensor
from ..format.manifests import check_claimable, read_stored, run_of
from ..io.tensors import StateDict, byte_view, is_torch, iter_items, to_numpy
from ..store import ObjectStore
from ..units import MiB, require_int, require_positive
from .assign import ShareSelector
from .payload import PayloadWriter

#: ``PublishConfig.delta``: "auto" (a delta against the held base, with a keyframe every
#: ``keyframe_every`` versions), "never" (every version full) or "always" (a delta whenever
#: a base is held, no periodic keyframe).
DELTA_MODES = ("auto", "never", "always")
FULL_CODINGS = ("planes", "raw")


@dataclass(frozen=True)
class PublishConfig:
    """How to publish. Validated on creation; every size is in bytes."""

    delta: str = "auto"
    keyframe_every: int = 10
    max_delta_fraction: float = 0.5
    object_bytes: int = 64 * MiB  # moderate objects: ranged GETs stay cheap on every server
    part_bytes: int = 16 * MiB
    concurrency: int = 16
    zstd_level: int = 3
    # Whole tensors (keyframes, and tensors a delta does not pay for): "planes" codes them
    # losslessly in byte planes where that pays (about 0.67x for trained bf16 weights,
    # docs/full-format.md), "raw" stores their bytes as they are.
    full_coding: str = "planes"
    # With a signer, LATEST is signed and expires this long after each publication:
    # readers that require signatures refuse it after, so a frozen or replayed pointer
    # is seen. Set it well above kappa * T_train. None: the pointer never expires.
    latest_expiry_s: float | None = 7 * 24 * 3600.0
    # Payload objects dealt over this many prefixes of the store (v/p0/ ... v/p<K-1>/), fixed
    # for the run, so a fleet's reads of one version are not all asked of one prefix: the
    # planner's peak reads a second over the provider's per-prefix limit, rounded up
    # (`wanrl-s3 estimate` names it). 1: every object in the version's own directory.
    payload_prefixes: int = 1

    def __post_init__(self) -> None:
        if self.delta not in DELTA_MODES:
            raise UsageError(f"delta must be one of {', '.join(DELTA_MODES)}, got {self.delta!r}")
        if self.full_coding not in FULL_CODINGS:
            raise UsageError(
                f"full_coding must be one of {', '.join(FULL_CODINGS)}, got {self.full_coding!r}"
            )
        require_int("keyframe_every", self.keyframe_every)
        if require_positive("max_delta_fraction", self.max_delta_fraction) > 1:
            raise UsageError(f"max_delta_fraction must be in (0, 1], got {self.max_delta_fraction}")
        require_int("object_bytes", self.object_bytes)
        require_int("part_bytes", self.part_bytes)
        require_int("concurrency", self.concurrency)
        if self.latest_expiry_s is not None:
            require_positive("latest_expiry_s", self.latest_expiry_s)
        if require_int("payload_prefixes", self.payload_prefixes) > layout.MAX_PAYLOAD_PREFIXES:
            raise UsageError(
                f"payload_prefixes must be at most {layout.MAX_PAYLOAD_PREFIXES}, "
                f"got {self.payload_prefixes}"
            )

    def payload_prefix(self, version: int, index: int, rank: int = 0) -> int | None:
        """The payload prefix that payload object ``index`` of ``version`` goes under (of
        rank ``rank``'s share, publishing across ranks); None: the version's own folder.

        Consecutive objects on consecutive prefixes, so a reader's ranged GETs move from
        one prefix to the next; each version, and each rank's share, starts one prefix
        further on, so a version of fewer objects than prefixes does not always load the
        first ones.
        """
        if self.payload_prefixes == 1:
            return None
        return (version + rank + index) % self.payload_prefixes


@dataclass(frozen=True, kw_only=True)
class PublishResult:
    """What one publication committed: its kind (full or delta) and base, its bytes before
    and after coding, how long it took, and whether LATEST moved to it (not where a newer
    version was already named)."""

    version: int
    kind: str
    base_version: int | None
    raw_bytes: int
    stored_bytes: int
    tensors: int
    seconds: float
    latest_moved: bool
    density: float | None = None

    @classmethod
    def of(cls, manifest: Manifest, seconds: float, latest_moved: bool) -> PublishResult:
        """The figures of a committed ``manifest``."""
        return cls(
            version=manifest.version,
            kind=manifest.kind,
            base_version=manifest.base_version,
            raw_bytes=manifest.raw_bytes,
            stored_bytes=manifest.stored_bytes,
            tensors=len(manifest.tensors),
            seconds=seconds,
            latest_moved=latest_moved,
            density=manifest.density,
        )

    @property
    def throughput_mb_s(self) -> float:
        """Raw (uncoded) bytes published per second of the publication, in MB/s (10^6 bytes)."""
        return self.raw_bytes / max(self.seconds, 1e-9) / 1e6


@dataclass
class DeltaBase:
    """The bits of the last committed version, held to encode the next delta against."""

    version: int
    keyframe_version: int
    since_keyframe: int
    bits: dict[str, np.ndarray] = field(default_factory=dict)
    borrowed: bool = False  # read-only bits (a file's memory map): used once, never updated
    manifest_hash: str | None = None  # the base manifest's digest, pinned by the next delta


@dataclass
class Draft:
    """A version whose payload is written but whose manifest is not yet committed."""

    entries: list[TensorEntry]
    objects: tuple[ObjectRef, ...]
    writer: PayloadWriter
    base: DeltaBase | None

    def manifest(self, run_id: str, version: int, metadata: Mapping[str, str]) -> Manifest:
        base = self.base
        return Manifest(
            run_id=run_id,
            version=version,
            created_at_s=time.time(),
            kind="full" if base is None else "delta",
            tensors=tuple(self.entries),
            objects=self.objects,
            base_version=None if base is None else base.version,
            keyframe_version=version if base is None else base.keyframe_version,
            metadata=dict(metadata),
            base_manifest_hash=None if base is None else base.manifest_hash,
        )


class Continuing:
    """What both publishers do to continue a run: the run they belong to, the base they
    adopt. Their steps are a :class:`VersionWriter` (``_writer``)."""

    _writer: VersionWriter

    @property
    def origin_run_id(self) -> str | None:
        """The run this publisher's versions belong to (None: learnt at the next publication).

        Every manifest and LATEST names it, and readers follow one run: the store's
        run, else this publisher's own ``run_id``. :func:`~wanrl_s3.publish.adopt.adopt_newest`
        sets it to the run of the version it continues from.
        """
        return self._writer.origin_run_id

    @origin_run_id.setter
    def origin_run_id(self, run: str | None) -> None:
        self._writer.origin_run_id = run

    def adopt_base(
        self,
        version: int,
        tensors: Mapping[str, np.ndarray],
        *,
        keyframe_version: int,
        since_keyframe: int,
        borrow: bool = False,
        manifest_hash: str | None = None,
        copy: bool = True,
    ) -> None:
        """Start from an already published version (the caller has verified ``tensors``:
        the whole version, or a rank's share of it).

        A restarted trainer, or a one-shot CLI publish, uses this to send a delta
        instead of a keyframe. With ``borrow`` the arrays are read but never
        written (a memory-mapped file); the publisher then forgets them after
        one publish. Otherwise the publisher keeps a copy it updates with each
        version; ``copy=False`` hands it the arrays themselves (fetched for it: no
        second copy of the model in memory), which the caller must not use after.
        ``manifest_hash``: the adopted version's manifest digest, which the next
        delta's manifest pins (see :attr:`Manifest.digest`).
        """
        self._writer.adopt(
            version,
            tensors,
            keyframe_version=keyframe_version,
            since_keyframe=since_keyframe,
            borrow=borrow,
            manifest_hash=manifest_hash,
            copy=copy,
        )


class Publisher(Continuing):
    """Publishes versions of one run to one store, or to several (fanout).

    Not thread-safe: one publish at a time. A :class:`~wanrl_s3.VersionPublisher`
    (rank 0 of 1), so the trainer core (:class:`~wanrl_s3.TrainerPublisher`) drives
    it; its steps are a :class:`VersionWriter`, which ``ShardedPublisher`` shares.
    """

    def __init__(
        self,
        store: ObjectStore | Sequence[ObjectStore],
        config: PublishConfig | None = None,
        *,
        run_id: str | None = None,
        signer: Any = None,
        keep_base: bool = True,
    ) -> None:
        """``store``: one store, or several that each get every version (the first is the
        primary). ``keep_base=False`` holds no copy of the published bits (a one-shot publish).
        """
        self.run_id = run_id or f"run-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        self._writer = VersionWriter(
            store, config, run_id=self.run_id, signer=signer, keep_base=keep_base
        )
        self.stores = self._writer.stores
        self.store = self.stores[0]
        self.keep_base = keep_base
        self.config = self._writer.config
        self.signer = signer

    @property
    def rank(self) -> int:
        """0: one process publishes every version whole."""
        return 0

    @property
    def ranks(self) -> int:
        """1: this process publishes every version alone."""
        return 1

    def share_selector(self) -> ShareSelector | None:
        """None: this publisher publishes every tensor it is given."""
        return None

    def publish(
        self,
        tensors: StateDict,
        version: int,
        *,
        metadata: Mapping[str, str] | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> PublishResult:
        """Publish ``tensors`` (a mapping, or (name, tensor) pairs) as ``version``.

        Raises VersionConflictError, changing nothing, if the version exists or
        LATEST is already at or past it. ``progress`` gets each tensor's byte
        count once it is encoded and handed to the uploads.
        """
        start = time.monotonic()
        steps = self._writer
        base, held = steps.begin(version)
        draft = steps.write(iter_items(tensors), version, base, held, progress)
        manifest = draft.manifest(self.run_id, version, metadata or {})
        if base is not None and steps.delta_too_big(manifest):
            source = held if held is not None else tensors if isinstance(tensors, Mapping) else None
            if source is not None:  # a keyframe instead; a one-pass generator can't be re-read
                draft.writer.delete_objects()
                draft = steps.write(iter_items(dict(source)), version, None, held)
                manifest = draft.manifest(self.run_id, version, metadata or {})
        manifest = steps.seal(manifest)
        steps.commit(manifest, (draft.writer.publish_id,), draft.writer.delete_objects)
        moved = steps.advance(manifest)
        if held is not None:
            since = 0 if manifest.kind == "full" else base.since_keyframe + 1  # type: ignore[union-attr]
            steps.keep(manifest, held, since)
        return PublishResult.of(manifest, time.monotonic() - start, moved)


class VersionWriter:
    """The steps of one publication, which Publisher and ShardedPublisher share.

    Check that a version is claimable, encode tensors against the held delta base
    and upload them, seal the manifest (bind it to the run, validate and sign it),
    create it only if absent, move LATEST, and hold the committed bits as the next
    base. :class:`Publisher` runs the steps for a whole version; ``ShardedPublisher``
    runs them for one rank's share and commits the merged shares with the same
    :meth:`seal`, :meth:`commit` and :meth:`advance`.
    Not thread-safe: one publication at a time.
    """

    def __init__(
        self,
        store: ObjectStore | Sequence[ObjectStore],
        config: PublishConfig | None = None,
        *,
        run_id: str,
        signer: Any = None,
        keep_base: bool = True,
        rank: int = 0,
    ) -> None:
        """``run_id``: the run a store with no version yet starts (see :attr:`origin_run_id`).
        ``rank``: the publishing rank whose share this writes (0 of 1 for a whole
        version); the ranks of one version start their payload on different prefixes."""
        self.stores = (store,) if isinstance(store, ObjectStore) else tuple(store)
        if not self.stores:
            raise UsageError("a Publisher needs at least one store")
        self.store = self.stores[0]
        self.config = config or PublishConfig()
        self.run_id = run_id
        self.signer = signer
        self.keep_base = keep_base
        self.rank = rank
        # the run the versions belong to (every manifest and LATEST names it, readers follow
        # one run): the store's, learnt at the first publication, or ``run_id``
        self.origin_run_id: str | None = None
        self._base: DeltaBase | None = None

    def hold(self, base: DeltaBase) -> None:
        """Hold ``base`` (verified, or just committed) to encode the next delta against."""
        self._base = base

    def adopt(
        self,
        version: int,
        tensors: Mapping[str, np.ndarray],
        *,
        keyframe_version: int,
        since_keyframe: int,
        borrow: bool,
        manifest_hash: str | None,
        copy: bool = True,
    ) -> None:
        """Hold a published version's verified ``tensors`` as the base (copied unless
        ``borrow``, read-only arrays used for one publish, or not ``copy``: handed over)."""
        if borrow:
            bits = dict(tensors)
        else:  # arrays it may update in place: writable and contiguous, the caller's if given
            bits = {k: v if not copy and _writable(v) else np.array(v) for k, v in tensors.items()}
        base = DeltaBase(
            layout.check_version(version),
            keyframe_version,
            since_keyframe,
            bits,
            borrowed=borrow,
            manifest_hash=manifest_hash,
        )
        self.hold(base)

    # -- the steps ------------------------------------------------------------------
    def begin(self, version: int) -> tuple[DeltaBase | None, dict[str, np.ndarray] | None]:
        """Check ``version`` is claimable; the delta base, and the dict the new bits go into.

        The first publication learns the run (:attr:`origin_run_id`) from the store:
        with a signer, a version its own key signed tells it first. The held bits
        change in place while encoding, so the base is forgotten until :meth:`keep`
        restores it after a commit (a failed publish leaves no base).
        """
        layout.check_version(version)
        self._check_claimable(version)
        if self.origin_run_id is None:
            trust = None if self.signer is None else self.signer.verifier()
            self.origin_run_id = run_of(self.store, trust) or self.run_id
        base = self._delta_base(version)
        prior, self._base = self._base, None
        if not self._keeps_base:
            return base, None
        return base, prior.bits if prior is not None and not prior.borrowed else {}

    def keep(self, manifest: Manifest, held: dict[str, np.ndarray], since_keyframe: int) -> None:
        """Hold ``held`` (the bits just committed in ``manifest``) as the next delta's base."""
        self.hold(
            DeltaBase(
                manifest.version,
                manifest.keyframe_version or manifest.version,
                since_keyframe,
                held,
                manifest_hash=manifest.digest,
            )
        )

    def advance(self, manifest: Manifest) -> bool:
        """Move LATEST to ``manifest`` in every store; True if it moved everywhere."""
        pointer = self._pointer(manifest)
        return all([latest.advance(store, manifest, pointer=pointer) for store in self.stores])

    @property
    def _keeps_base(self) -> bool:
        return self.config.delta != "never" and self.keep_base

    # -- helpers ------------------------------------------------------------------
    def _check_claimable(self, version: int) -> None:
        for store in self.stores:
            check_claimable(store, version)

    def _delta_base(self, version: int) -> DeltaBase | None:
        base, cfg = self._base, self.config
        if base is None or cfg.delta == "never" or base.version >= version:
            return None
        if cfg.delta == "auto" and base.since_keyframe + 1 >= cfg.keyframe_every:
            return None
        return base

    def write(
        self,
        items: Iterator[tuple[str, Any]],
        version: int,
        base: DeltaBase | None,
        held: dict[str, np.ndarray] | None,
        progress: Callable[[int], None] | None = None,
        *,
        allow_empty: bool = False,
    ) -> Draft:
        """Encode and upload ``items``; ``allow_empty``: a rank's share may hold no tensor."""
        cfg = self.config
        writer = PayloadWriter(
            self.stores,
            version,
            secrets.token_hex(6),
            object_bytes=cfg.object_bytes,
            part_bytes=cfg.part_bytes,
            concurrency=cfg.concurrency,
            prefix_of=functools.partial(cfg.payload_prefix, version, rank=self.rank),
        )
        entries: list[TensorEntry] = []
        try:
            for name, x in items:
                check_tensor(name, tuple(x.shape))  # bad input: refused, what landed removed
                entries.append(self._encode(name, x, writer, held, base))
                if progress is not None:
                    progress(entries[-1].nbytes)
            objects = writer.close()
        except BaseException:
            writer.abort()
            raise
        if not entries and not allow_empty:
            raise UsageError("nothing to publish: the state dict has no tensors")
        if held is not None:
            for gone in set(held) - {e.name for e in entries}:
                del held[gone]
        return Draft(entries, objects, writer, base)

    def _encode(
        self,
        name: str,
        x: Any,
        writer: PayloadWriter,
        held: dict[str, np.ndarray] | None,
        base: DeltaBase | None,
    ) -> TensorEntry:
        """One tensor: an XOR delta against the base bits when that pays, else the whole tensor.

        ``held`` (when the publisher keeps a base) ends up with the new bits.
        """
        old = None if base is None else base.bits.get(name)
        if old is not None:
            in_place = held is not None and held.get(name) is old
            entry = self._encode_delta(name, x, old, writer, update=in_place)
            if entry is not None:
                if held is not None and not in_place:
                    held[name] = to_numpy(x, name=name).copy()
                return entry
        arr = to_numpy(x, name=name)
        if held is not None:
            held[name] = _hold(arr, held.get(name))
        view = byte_view(arr)
        digest = hashing.digest(view)
        dtype = dtypes.of_numpy(arr.dtype).name
        stored, encoding, stored_hash = view, "raw", digest
        if self.config.full_coding == "planes":
            coded = encode_full(arr, dtype)
            if coded.coding == CODING_PLANES:  # else coding did not pay: the bytes as they are
                stored, encoding, stored_hash = coded.data, "planes", hashing.digest(coded.data)
        return TensorEntry(
            name, dtype, tuple(arr.shape), digest, encoding, writer.write(stored), stored_hash
        )

    def _encode_delta(
        self, name: str, x: Any, old: np.ndarray, writer: PayloadWriter, *, update: bool
    ) -> TensorEntry | None:
        """``x`` as a delta against ``old`` (``old`` then holds ``x`` if ``update``), or None."""
        dt = dtypes.of_torch(x.dtype) if is_torch(x) else dtypes.of_numpy(x.dtype)
        if tuple(x.shape) != old.shape or dt.numpy != old.dtype:
            return None
        limit = int(old.nbytes * self.config.max_delta_fraction)
        payload, digest = codec_bridge.encode_delta(
            old, x, level=self.config.zstd_level, max_bytes=limit, update=update
        )
        if payload is None:
            return None
        view = memoryview(payload.data)
        return TensorEntry(
            name,
            dt.name,
            old.shape,
            digest,
            "xor-delta",
            writer.write(view),
            hashing.digest(view),
            payload.changed,
        )

    def delta_too_big(self, manifest: Manifest) -> bool:
        return (
            self.config.delta == "auto"
            and manifest.stored_bytes > self.config.max_delta_fraction * manifest.raw_bytes
        )

    def _pointer(self, manifest: Manifest) -> latest.Latest:
        """LATEST for ``manifest``: signed, and expiring, when this publisher signs."""
        if self.signer is None:
            return latest.Latest.of(manifest)
        return latest.Latest.of(manifest, expires_in_s=self.config.latest_expiry_s).signed(
            self.signer
        )

    def seal(self, manifest: Manifest) -> Manifest:
        """``manifest`` bound to the run, checked by the strict reader, and signed."""
        return self._sign(replace(manifest, origin_run_id=self.origin_run_id).validate())

    def _sign(self, manifest: Manifest) -> Manifest:
        if self.signer is None:
            return manifest
        return manifest.with_signature(self.signer.sign(manifest.signing_bytes()))

    def commit(
        self,
        manifest: Manifest,
        publish_ids: Sequence[str],
        discard: Callable[[Sequence[ObjectStore]], None],
    ) -> None:
        """Create the manifest in each store in turn; stop at the first store that has one.

        ``publish_ids``: the payload directories ``manifest`` references (one per rank's
        share), by which a stored manifest is recognised as ours; ``discard`` removes that
        payload from the stores given when the version was claimed by someone else.
        """
        data = manifest.to_json()
        for i, store in enumerate(self.stores):
            try:
                store.put_bytes(layout.manifest_key(manifest.version), data, if_none_match=True)
            except PreconditionFailedError as exc:
                if _is_ours(store, manifest.version, data, publish_ids):
                    continue  # our create went through; its response was lost and the retry saw it
                discard(self.stores[i:])
                done = ", ".join(s.url for s in self.stores[:i])
                raise VersionConflictError(
                    f"version {manifest.version} was claimed by another publisher at "
                    f"{store.url}; "
                    + (
                        f"it is committed at {done} only, and LATEST moved nowhere"
                        if done
                        else "this publish changed nothing"
                    )
                ) from exc


def _is_ours(store: ObjectStore, version: int, data: bytes, publish_ids: Sequence[str]) -> bool:
    """Whether the manifest stored for ``version`` is the one this publish sent.

    A conditional create whose response was lost is retried and then fails its
    precondition against itself; reading back what is stored tells a success from
    a lost race. A stored manifest that names our payload (one of our random publish
    ids) is ours in every way that matters: its payload must not be deleted.
    """
    try:
        stored = read_stored(store, version)
    except ManifestError:  # over the size bound: not the manifest this publish validated
        return False
    return stored is not None and (
        stored == data or any(f'"{pid}/'.encode() in stored for pid in publish_ids)
    )


def _writable(arr: np.ndarray) -> bool:
    return isinstance(arr, np.ndarray) and arr.flags.writeable and arr.flags.c_contiguous


def _hold(arr: np.ndarray, reuse: np.ndarray | None) -> np.ndarray:
    """A private copy of ``arr`` for the next delta, reusing ``reuse``'s memory when it fits."""
    if reuse is arr:
        return arr
    if reuse is not None and reuse.shape == arr.shape and reuse.dtype == arr.dtype:
        np.copyto(reuse, arr)
        return reuse
    return arr.copy()
