"""Reading versions: find, plan, download, verify every byte, decode, hand out.

Nothing leaves a :class:`Subscriber` unverified (invariant 1): payload bytes are
checked against the BLAKE3 hashes in the manifest before they are decoded, and
every reconstructed tensor against the published tensor's hash before any
tensor of the version is returned or passed to a callback. A delta applied to
the wrong base therefore fails loudly; the subscriber then starts over from the
keyframe instead of installing garbage.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..codec import bridge as codec_bridge
from ..codec import decode_full
from ..errors import NotFoundError, VerificationError, WanrlError
from ..format import dtypes, hashing, layout
from ..format.latest import Latest
from ..format.listing import Listings
from ..format.manifest import Manifest, TensorEntry
from ..format.manifests import Manifests, safe_lookup
from ..io.pages import release
from ..io.tensors import byte_view
from ..store import ObjectStore
from ..units import MiB, require_int
from .chain import HAVE, FetchPlan, Recipe, plan_fetch
from .download import Progress
from .stream import Streamer, Tensor

log = logging.getLogger(__name__)
PREFETCH_MANIFESTS = 64  # at most this many manifests below a target are fetched at once
# payload bytes held in buffers while a version streams in: 16 requests of 8 MiB in flight
# (64 MiB: 0.1x less memory on a 1 GiB pull, 1.7x its time against moto, docs/results/memory.md)
WINDOW_BYTES = 128 * MiB
# one GET per 16 MiB, so that a pull of fewer than 16 payload objects still keeps its 16
# connections busy (SeaweedFS: 1.3x the pull of one GET per 64 MiB, docs/results/transfer.md)
RANGE_BYTES = 16 * MiB
Allocator = Callable[[TensorEntry], np.ndarray]


@dataclass(frozen=True)
class Snapshot:
    """The verified tensors of one version, in host memory (or a file's memory map)."""

    version: int
    tensors: Mapping[str, np.ndarray]
    manifest: Manifest | None = None
    downloaded_bytes: int = 0
    path: tuple[int, ...] = field(default=())  # versions whose payload was read
    download_s: float = 0.0
    verify_s: float = 0.0  # hash checks and decoding left once the last byte arrived
    peak_buffer_bytes: int = 0  # the most payload held in buffers at once (the window's peak)

    def items(self, *, release_pages: bool = False) -> Iterator[tuple[str, np.ndarray]]:
        """The tensors in turn. With ``release_pages``, each tensor that maps a file
        (a staged version: ``WatchConfig.host_cache_dir``) gives its pages back once the caller
        asks for the next one: its data stays in the file and the page cache, and reading
        it again costs a minor fault. For a consumer that copies each tensor elsewhere (an
        inference engine, to its device), so the host holds one tensor's pages, not the
        version's. Tensors in ordinary memory are left alone."""
        for item in self.tensors.items():
            yield item
            if release_pages:
                release(item[1])

    def to_torch(self, device: str | None = None) -> dict[str, Any]:
        """The tensors as torch tensors by name, moved to ``device`` (None: on the CPU, sharing
        memory with the arrays where torch can)."""
        from ..io.tensors import to_torch

        return {name: to_torch(arr, device) for name, arr in self.tensors.items()}


class VerifiedOnLoad(Mapping[str, np.ndarray]):
    """Tensors of ``manifest`` that are fetched and verified when loaded, not up front
    (:class:`~wanrl_s3.fetch.streamed_base.StreamedBase`): :meth:`Subscriber.verify_local`
    takes them as they are instead of hashing arrays that are not filled yet."""

    manifest: Manifest


def _alloc(entry: TensorEntry) -> np.ndarray:
    return np.empty(entry.shape, dtypes.by_name(entry.dtype).numpy)


def reusing(have: Snapshot) -> Allocator:
    """An allocator that hands out ``have``'s own arrays where they fit (same shape and
    dtype, writeable, C-contiguous host memory), new ones elsewhere: the version fetched
    is decoded into the one it replaces, so the two are never held at once. ``have`` is
    spoiled from the first write, whether or not the fetch succeeds."""

    def alloc(entry: TensorEntry) -> np.ndarray:
        arr = have.tensors.get(entry.name)
        if (
            isinstance(arr, np.ndarray)
            and arr.shape == tuple(entry.shape)
            and arr.dtype == dtypes.by_name(entry.dtype).numpy
            and arr.flags.writeable
            and arr.flags.c_contiguous
        ):
            return arr
        return _alloc(entry)

    return alloc


class Subscriber:
    """Reads versions from one store. Thread-safe; holds a pool of download threads."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        concurrency: int = 16,
        range_bytes: int = RANGE_BYTES,
        verifier: Any = None,
        manifest_cache: int = 256,
        window_bytes: int = WINDOW_BYTES,
        run: str | None = None,
    ) -> None:
        """``window_bytes`` bounds the coded and delta payload held while a version streams
        in (:mod:`wanrl_s3.fetch.stream`); a single tensor bigger than that is held alone.
        ``run``: read only versions of this run (see :class:`Manifests`)."""
        require_int("concurrency", concurrency)
        require_int("range_bytes", range_bytes)
        require_int("window_bytes", window_bytes)
        self.store = store
        self.range_bytes = range_bytes
        self.window_bytes = window_bytes
        self.concurrency = concurrency
        self.verifier = verifier
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix="wanrl-get")
        # checks and decodes: CPU-bound, so one per core; more would only hold more tensors
        # (output pages, a local base's) resident at once while a version streams in
        self._check_pool = ThreadPoolExecutor(_cores(), thread_name_prefix="wanrl-check")
        # manifests get their own threads: a plan made while a download fills _pool
        # (the watcher's abandon check) must not queue behind its payload reads
        self._meta_pool = ThreadPoolExecutor(8, thread_name_prefix="wanrl-meta")
        # every manifest and LATEST this subscriber reads: bounded, pinned, cached, and LATEST
        # never followed backwards (the manifest owner, wanrl_s3.format.manifests)
        self.manifests = Manifests(store, verifier=verifier, cache_size=manifest_cache, run=run)
        # Version numbers below a committed delta that were found unpublished: the claim
        # rule (a version must be newer than the newest) means they never appear later,
        # so the prefetch asks for each once, not again before every delta.
        self._unpublished: set[int] = set()

    def close(self) -> None:
        """Stop the download, check and manifest threads, cancelling queued work; waits for them."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        self._check_pool.shutdown(wait=True, cancel_futures=True)
        self._meta_pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> Subscriber:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- finding versions: the manifest owner's (format.manifests) ---------------------
    def latest(self) -> Latest | None:
        """LATEST, checked before anyone follows it (signed when required; never backwards)."""
        return self.manifests.latest()

    def poll_latest(self, etag: str | None) -> tuple[Latest, str] | None:
        """LATEST if it changed since ``etag`` (a conditional GET: cheap when unchanged)."""
        return self.manifests.poll_latest(etag)

    def resolve(self, version: int | str | None) -> int:
        """A version number: ``version`` itself, or LATEST's for None or ``"latest"``.

        Raises NotFoundError when nothing is published, UsageError for a malformed version."""
        return self.manifests.resolve(version)

    def versions(self) -> list[int]:
        """Every version with a committed manifest, ascending."""
        return self.manifests.versions()

    def manifest(self, version: int) -> Manifest:
        """The validated (and, with a verifier, signature-checked) manifest; cached."""
        return self.manifests.get(version)

    def missing(self, version: int, have_version: int | None = None) -> str | None:
        """What keeps ``version`` from being whole in this store; None once it is.

        Bucket replication has no ordering: a replica can show LATEST before the
        manifest, or a manifest before its payload. Such a version is not an
        error, only not yet visible, and a reader must not start on it. Checked
        for exactly what the plan from ``have_version`` reads (every manifest of
        the chain, every payload object at least at the size its manifest says)
        by listing the directories those keys lie in (:class:`Listings`): one
        request per version, and one per payload prefix the plan reads from (those
        together, in one round trip). An
        object longer than its manifest says holds every byte the plan reads, and
        every byte read is verified: such a version is whole, as it is to
        ``pull``, or a worker would wait for it forever.
        """
        listings = Listings(self.store)

        def lookup(v: int) -> Manifest:
            key = layout.manifest_key(v)
            if not self.manifests.is_cached(v) and listings.size(key) is None:
                raise NotFoundError(f"the manifest of v{v}")
            return self.manifest(v)

        try:
            plan = plan_fetch(lookup(version), lookup, have_version)
        except NotFoundError as exc:
            return str(exc)
        wanted = plan.objects
        listings.fill(wanted, self._meta_pool)  # the payload prefixes at once
        absent = [key for key, size in wanted.items() if not listings.holds(key, size)]
        if absent:
            return f"{len(absent)} of the {len(wanted)} payload objects it needs (e.g. {absent[0]})"
        return None

    def is_visible(self, version: int, have_version: int | None = None) -> bool:
        """Whether every byte the plan to ``version`` reads is in this store (see missing)."""
        return self.missing(version, have_version) is None

    def plan(self, version: int | str | None = None, have_version: int | None = None) -> FetchPlan:
        """What to read to reach ``version`` (None: LATEST's) from ``have_version``: the keyframe
        and deltas, with every manifest on the way checked and pinned from LATEST."""
        if version is not None and version != "latest":
            self.manifests.pin_from_latest(self.resolve(version))
        target = self.manifest(self.resolve(version))
        self._prefetch_chain(target)
        return plan_fetch(target, safe_lookup(self.manifest), have_version)

    def _prefetch_chain(self, target: Manifest) -> None:
        """Fetch the manifests between ``target``'s keyframe and it together, not one by one.

        Planning walks a delta chain base by base; uncached, that costs one round
        trip per version (ten behind a keyframe_every=10 target, a second on a
        100 ms link). The walk then finds them cached. A version missing from the
        range (versions need not be consecutive) or failing here is left to the
        walk, which reports it if the chain needs it.
        """
        if target.kind != "delta" or target.keyframe_version is None:
            return
        low = max(target.keyframe_version, target.version - PREFETCH_MANIFESTS)
        wanted = [
            v
            for v in range(low, target.version)
            if v not in self._unpublished and not self.manifests.is_cached(v)
        ]
        if len(wanted) > 1:
            for done in [self._meta_pool.submit(self._manifest_if_there, v) for v in wanted]:
                done.result()

    def _manifest_if_there(self, version: int) -> None:
        try:
            self.manifest(version)
        except NotFoundError:
            self._unpublished.add(version)  # set.add is atomic; the pool's threads share it
        except WanrlError:
            pass  # left to the chain walk, which reports it if the chain needs it

    def identify(self, tensors: Mapping[str, np.ndarray]) -> int | None:
        """The newest version whose tensors are exactly these, by name, dtype, shape and hash.

        How a file the trainer wrote itself (no wanrl-s3 metadata) becomes a delta
        base: its bytes are hashed once and compared with each retained manifest.
        None when no version matches (the caller then pulls in full).
        """
        mine = {
            name: (dtypes.of_numpy(a.dtype).name, tuple(a.shape), _digest(a))
            for name, a in tensors.items()
        }
        for version in reversed(self.versions()):
            try:
                m = self.manifest(version)
            except WanrlError:
                continue  # a damaged or foreign version: it cannot be this file
            if set(m.by_name) == set(mine) and all(
                mine[e.name] == (e.dtype, e.shape, e.hash) for e in m.tensors
            ):
                return version
        return None

    def verify_local(self, snapshot: Snapshot) -> Manifest:
        """Check that a local copy holds exactly the published tensors of its version."""
        m = self.manifest(snapshot.version)
        tensors = snapshot.tensors
        if isinstance(tensors, VerifiedOnLoad) and tensors.manifest.digest == m.digest:
            return m  # each tensor is checked against this very manifest as it is loaded
        if set(snapshot.tensors) != set(m.by_name):
            raise VerificationError(
                f"the local copy's tensor names differ from version {m.version}'s"
            )
        for name, arr in snapshot.tensors.items():
            entry = m.by_name[name]
            if (
                arr.dtype != dtypes.by_name(entry.dtype).numpy
                or tuple(arr.shape) != entry.shape
                or _digest(arr) != entry.hash
            ):
                raise VerificationError(
                    f"tensor {name!r} of the local copy is not the one "
                    f"published as version {m.version}"
                )
        return m

    # -- reading ----------------------------------------------------------------
    def fetch(
        self,
        version: int | str | None = None,
        *,
        have: Snapshot | None = None,
        alloc: Allocator | None = None,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
    ) -> Snapshot:
        """The verified tensors of ``version`` (default: latest).

        With ``have`` (a snapshot the caller holds), only the deltas after it are
        downloaded when that is cheaper. ``alloc`` chooses where each tensor's
        bytes land (default: new host arrays; a file writer's memory map for pulls).
        """
        plan = self.plan(version, None if have is None else have.version)
        try:
            return self._materialize(plan, have, alloc or _alloc, progress, cancel)
        except VerificationError as exc:
            if plan.have_version is None:
                raise
            log.warning(
                "deltas from version %s did not verify (%s); starting over from the keyframe",
                plan.have_version,
                exc,
            )
            plan = plan_fetch(plan.target, safe_lookup(self.manifest), None)
            return self._materialize(plan, None, alloc or _alloc, progress, cancel)

    def fetch_named(self, version: int, names: Iterable[str]) -> dict[str, np.ndarray]:
        """The tensors of ``version`` named in ``names``, verified, in new host arrays; a
        name the version does not hold is left out (a trainer rank's share of it)."""
        plan = self.plan(version)
        wanted = set(names)
        outs = {e.name: _alloc(e) for e in plan.target.tensors if e.name in wanted}
        self.fetch_tensors(plan, outs)
        return outs

    def fetch_tensor(self, plan: FetchPlan, name: str, out: np.ndarray) -> None:
        """Tensor ``name`` of ``plan``'s target into ``out``, verified."""
        self.fetch_tensors(plan, {name: out})

    def fetch_tensors(self, plan: FetchPlan, outs: Mapping[str, np.ndarray]) -> None:
        """The tensors of ``plan``'s target that ``outs`` names into its arrays, verified, in
        one stream (adjacent ones in one request); for a base adopted lazily
        (:class:`~wanrl_s3.fetch.streamed_base.StreamedBase`), a few tensors at a time."""
        recipes = tuple(r for r in plan.recipes if r.name in outs)
        for name in set(outs) - {r.name for r in recipes}:
            raise NotFoundError(f"version {plan.target.version} has no tensor {name!r}")
        some = FetchPlan(plan.steps, plan.have_version, recipes)
        self._materialize(some, None, lambda e: outs[e.name], None, None)

    def stream(
        self,
        on_tensor: Callable[[str, np.ndarray], None],
        version: int | str | None = None,
        *,
        have: Snapshot | None = None,
    ) -> Snapshot:
        """Fetch and verify the whole version, then pass each (name, array) to ``on_tensor``.

        Verification of every tensor comes first, so an install callback never
        sees part of a version that later fails.
        """
        snapshot = self.fetch(version, have=have)
        for name, arr in snapshot.items():
            on_tensor(name, arr)
        return snapshot

    def _materialize(
        self,
        plan: FetchPlan,
        have: Snapshot | None,
        alloc: Allocator,
        progress: Progress | None,
        cancel: threading.Event | None,
    ) -> Snapshot:
        """Stream the plan into ``alloc``'s arrays, every tensor checked as it completes.

        The local tensors that recipes starting from ``have`` read are checked
        first, before anything downloads. ``download_s`` ends when the last byte
        arrived; ``verify_s`` is the checking and decoding left after that.
        """
        target = plan.target
        start = time.monotonic()
        outputs = {r.name: alloc(target.by_name[r.name]) for r in plan.recipes}
        bases = {
            r.name: _have_tensor(r, outputs[r.name], have)
            for r in plan.recipes
            if r.start_step == HAVE
        }
        streamer = Streamer(
            self.store,
            self._pool,
            self._check_pool,
            plan,
            range_bytes=self.range_bytes,
            window_bytes=self.window_bytes,
            concurrency=self.concurrency,
            progress=progress,
            cancel=cancel,
        )
        flight = streamer.run(outputs, bases, lambda t: self._finish(plan, t))
        done = time.monotonic()
        downloaded = max(start, min(flight.last_byte_s, done))
        return Snapshot(
            target.version,
            outputs,
            target,
            flight.moved_bytes,
            tuple(m.version for m in plan.steps if m.version != plan.have_version),
            downloaded - start,
            done - downloaded,
            peak_buffer_bytes=flight.peak_bytes,
        )

    def _finish(self, plan: FetchPlan, t: Tensor) -> None:
        """Verify what arrived, apply the deltas in order, verify the result.

        A recipe that starts from the local copy (``t.base``) decodes its first
        delta from there straight into ``dest``: one pass instead of a copy and
        then an in-place pass.
        """
        r, dest, base = t.recipe, t.dest, t.base
        if base is dest:  # decoding into the base's own array (see reusing): in place
            base = None
        if r.start is not None:
            self._finish_start(plan, r, r.start, dest, t.buffers.get(r.start_step))
        for step, entry in r.deltas:
            data = byte_view(t.buffers[step])
            if hashing.digest(data) != entry.stored_hash:
                raise VerificationError(
                    f"delta of tensor {r.name!r} in version "
                    f"{plan.steps[step].version} does not match its hash"
                )
            codec_bridge.apply_delta(data, dest, base=base)
            base = None
        if base is not None:  # the local copy is already the target version
            np.copyto(dest, base)
        rebuilt = r.deltas or r.start is None or r.start.encoding == "planes"
        if rebuilt and hashing.digest(byte_view(dest)) != plan.target.by_name[r.name].hash:
            raise VerificationError(
                f"tensor {r.name!r} rebuilt for version {plan.target.version} does not match "
                "the published hash (a delta applied to the wrong base?)"
            )

    @staticmethod
    def _finish_start(
        plan: FetchPlan,
        r: Recipe,
        start: TensorEntry,
        dest: np.ndarray,
        stored: np.ndarray | None,
    ) -> None:
        """The whole copy a recipe starts from: verified as stored, then decoded if coded."""
        data = byte_view(dest if stored is None else stored)
        if hashing.digest(data) != start.stored_hash:
            raise VerificationError(
                f"tensor {r.name!r} of version {plan.steps[r.start_step].version}: "
                "bytes do not match the manifest's hash"
            )
        if stored is not None:
            decode_full(data, dest, dtype=start.dtype)


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _digest(arr: np.ndarray) -> str:
    """The BLAKE3 of a local tensor; a file's pages are given back once hashed, so checking
    a whole file keeps one tensor resident, not the file."""
    digest = hashing.digest(byte_view(arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)))
    release(arr)
    return digest


def _have_tensor(r: Recipe, dest: np.ndarray, have: Snapshot | None) -> np.ndarray:
    src = None if have is None else have.tensors.get(r.name)
    if src is None or src.shape != dest.shape or src.dtype != dest.dtype:
        raise VerificationError(
            f"the local copy has no tensor {r.name!r} of the right "
            "shape and dtype to apply deltas to"
        )
    return src
