"""The manifests of a store: the one owner of reading them, and of the claim rule.

Every module that reads a manifest from a store does it through a
:class:`Manifests` bound to that store (the subscriber, adopting, the relay, the
probe, sharded publishing, retention, the fleet estimate, ``inspect`` and
``status``), so there is one policy:

- **Bounded**: a manifest over :data:`~wanrl_s3.format.manifest.MAX_MANIFEST_BYTES`
  is refused before it is parsed, having read the limit plus one byte at most
  (:func:`read_bounded`: a ranged GET), so a huge object costs a reader no more
  memory than the largest manifest it accepts.
- **Strict, and read twice at most**: :meth:`Manifest.from_json` checks every
  field and, with a verifier, the signature is checked. A manifest that fails is
  read once more, so a body damaged on the way does not fail what a second read
  serves.
- **Pinned**: LATEST names the digest of its version's manifest, and each delta
  the digest of its base's. A manifest whose digest is not the one pinned is a
  :class:`~wanrl_s3.errors.ManifestError`: hashes cover tensor bytes, the pins
  cover the rest (names, dtypes, shapes, the lineage), so an edited manifest, or
  a delta made for another base, breaks the chain from LATEST down.
- **Cached**: verified manifests are kept, least recently used out first; a
  cached one is checked again against pins learnt since.
- **Never backwards**: once this reader has followed a LATEST (read the manifest
  it names), a LATEST naming an older version is refused, a rollback, until a
  newer version appears. A pointer to a version that never appears sets no floor.
- **One run**: a reader follows one run (``origin_run_id``, the run id of the
  run's first version, which every signed manifest and LATEST carry): the one
  it is given, or, when it requires signatures, the run of the first LATEST it
  follows. A version of another run (another run's genuine signed version copied
  into this prefix, when runs share a key) is refused and sets no floor, so the
  reader takes the next version of its own run as soon as it appears.
- **Rechecked**: a cached manifest is checked again against pins learnt since, the
  run, and a reloaded keyring (a key revoked since it was cached); one that fails
  is read again, so a store repaired since is followed at once.
- **The claim rule**: a new version must be newer than the newest committed one
  (:func:`require_newer`) and its manifest must not exist yet
  (:func:`check_claimable`). The publisher and adopting both ask here; the claim
  itself is the manifest's conditional create, which only the publisher makes.

The pointer itself (its format, reads, compare-and-swap) is
:mod:`wanrl_s3.format.latest`'s; this module follows it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import (
    ManifestError,
    NotFoundError,
    ObjectTooLargeError,
    SignatureError,
    UsageError,
    VerificationError,
    VersionConflictError,
    WanrlError,
)
from ..store import ObjectStore, get_or_none
from ..units import require_int
from . import latest as latest_pointer
from . import layout
from .latest import Latest
from .manifest import MAX_MANIFEST_BYTES, Manifest

if TYPE_CHECKING:
    from .signing import Verifier

log = logging.getLogger(__name__)
MAX_CHAIN = 100_000  # a delta chain longer than this does not end in a keyframe


# -- the claim rule -----------------------------------------------------------------
def require_newer(version: int, newest: int, where: str) -> None:
    """Refuse ``version`` unless it is newer than ``newest`` (-1: none) at ``where``."""
    if version <= newest:
        raise VersionConflictError(
            f"version {version} is not newer than the newest version at {where} "
            f"(LATEST names v{newest}); publish {newest + 1} or later"
        )


def check_claimable(store: ObjectStore, version: int) -> None:
    """Whether a publisher may try to claim ``version`` in ``store`` (VersionConflictError if not).

    Newer than what LATEST names (a corrupt pointer counts as none, see
    :func:`~wanrl_s3.format.latest.committed_version`), and no manifest yet. Two
    publishers can both pass; the conditional create of the manifest decides.
    """
    newest, _ = latest_pointer.committed_version(store)
    require_newer(version, newest, store.url)
    if store.exists(layout.manifest_key(version)):
        raise VersionConflictError(f"version {version} already exists at {store.url}")


RUN_SCAN = 16  # versions looked at, newest first, for a store whose LATEST tells no run


def run_of(store: ObjectStore, trust: Verifier | None = None) -> str | None:
    """The run ``store``'s versions belong to, for a publisher that continues it.

    LATEST's run, else the run of the newest of the last :data:`RUN_SCAN`
    manifests: a corrupt or deleted pointer must not start a new run that every
    reader of the old one refuses. With ``trust`` (the keys the readers trust),
    a pointer or manifest those keys signed comes first, so that a version some
    bucket writer signed with another key cannot move the run elsewhere; when
    none is trusted (the publisher's key was just rotated), the newest
    untrusted one still tells the run. A version that names no run (written
    before runs were bound) counts as the run of its own ``run_id``. None for a
    store with no version: the publisher starts the run.
    """
    try:
        pointer = latest_pointer.read(store)
    except ManifestError as exc:
        log.info("LATEST at %s tells no run (%s): looking at the newest manifests", store.url, exc)
        pointer = None
    if pointer is not None and _trusted(trust, pointer.signing_bytes(), pointer.signature):
        return pointer.origin_run_id or pointer.run_id
    manifests = Manifests(store)
    readable: list[Manifest] = []
    for version in reversed(manifests.versions()[-RUN_SCAN:]):
        try:
            m = manifests.get(version)
        except (ManifestError, NotFoundError):
            continue
        if _trusted(trust, m.signing_bytes(), m.signature):
            return m.origin_run_id or m.run_id
        readable.append(m)
    if pointer is not None:
        return pointer.origin_run_id or pointer.run_id
    return (readable[0].origin_run_id or readable[0].run_id) if readable else None


def _trusted(trust: Verifier | None, data: bytes, sig: Mapping[str, str] | None) -> bool:
    if trust is None:
        return True
    try:
        trust.verify_bytes(data, sig, "run")
    except SignatureError:
        return False
    return True


# -- reading ------------------------------------------------------------------------
def read_stored(store: ObjectStore, version: int) -> bytes | None:
    """The stored bytes of ``version``'s manifest, bounded and unparsed; None when absent."""
    return read_bounded(store, layout.manifest_key(version), f"manifest of version {version}")


def read_bounded(
    store: ObjectStore, key: str, what: str, max_bytes: int = MAX_MANIFEST_BYTES
) -> bytes | None:
    """The object at ``key`` (a manifest, or a share record read like one), refused over
    ``max_bytes`` before anything parses it, and before more than ``max_bytes + 1``
    bytes of it are read; None when it is absent.
    """
    try:
        blob = get_or_none(store, key, max_bytes=max_bytes)
    except ObjectTooLargeError as exc:
        raise ManifestError(
            f"{what} at {store.url} is larger than the {max_bytes:,}-byte limit; "
            "refused without reading the rest"
        ) from exc
    return None if blob is None else blob.data


def lineage(target: Manifest, lookup: Callable[[int], Manifest]) -> list[Manifest]:
    """The target and its bases back to the keyframe, oldest first."""
    chain = [target]
    while chain[-1].kind == "delta":
        base_version = chain[-1].base_version
        if base_version is None:  # the manifest reader rejects this; kept for type narrowing
            raise ManifestError(f"delta version {chain[-1].version} has no base_version")
        chain.append(lookup(base_version))
        if len(chain) > MAX_CHAIN:
            raise ManifestError("delta chain does not end in a keyframe")
    chain.reverse()
    return chain


def safe_lookup(lookup: Callable[[int], Manifest]) -> Callable[[int], Manifest]:
    """Turn a missing base into a VerificationError that names the broken chain."""

    def wrapped(version: int) -> Manifest:
        try:
            return lookup(version)
        except NotFoundError as exc:
            raise VerificationError(
                f"version {version} is needed by a delta chain but its "
                "manifest is gone (retention must keep chains whole)"
            ) from exc

    return wrapped


@dataclass(frozen=True)
class _Read:
    manifest: Manifest
    data: bytes | None  # as stored, when the reader keeps bytes (the relay copies them)
    keyring: int = 0  # the verifier's generation its signature was checked under


class Manifests:
    """The manifests of one store: read, bounded, verified, pinned and cached. Thread-safe.

    ``verifier``: require signed manifests and a signed, unexpired LATEST.
    ``keep_bytes``: keep each manifest's stored bytes too (:meth:`stored_bytes`),
    for a caller that copies them byte for byte. ``run``: follow only this run
    (an ``origin_run_id``); refuse versions of any other, and versions that name
    no run. Without it, a reader that requires signatures follows the run of the
    first LATEST it reads.
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        verifier: Verifier | None = None,
        cache_size: int = 256,
        keep_bytes: bool = False,
        run: str | None = None,
    ) -> None:
        self.store = store
        self.verifier = verifier
        self._run, self._run_given = run, run is not None
        self._cache_size = require_int("cache_size", cache_size, minimum=0)
        self._keep_bytes = keep_bytes
        self._cache: OrderedDict[int, _Read] = OrderedDict()
        # digests pinned by a delta's manifest (firm: manifests are immutable) and by the
        # newest LATEST read (replaced by the next one)
        self._pins: dict[int, str] = {}
        self._latest_pin: tuple[int, str] | None = None
        self._latest_named = -1  # the version the newest LATEST read names
        self._latest_checked: Latest | None = None  # that pointer, as followed
        self._newest_followed = -1  # the newest version LATEST named whose manifest was read
        self._lock = threading.Lock()

    # -- LATEST, followed ---------------------------------------------------------------
    def latest(self) -> Latest | None:
        """The store's LATEST (None when it has none), checked before anyone follows it."""
        return self._follow(latest_pointer.read(self.store))

    def poll_latest(self, etag: str | None) -> tuple[Latest, str] | None:
        """LATEST if it changed since ``etag`` (a conditional GET: cheap when unchanged).

        With a verifier, an unchanged pointer is checked again too: it expires
        while it stays the same, and a reader already at its version (a worker
        polling) must see the freeze (SignatureError), not a quiet "nothing new".
        """
        found = latest_pointer.poll(self.store, etag)
        if found is not None:
            self._follow(found[0])
            return found
        with self._lock:
            unchanged = self._latest_checked
        if unchanged is not None and self.verifier is not None:
            latest_pointer.check_signed(unchanged, self.verifier)
        return None

    def _follow(self, pointer: Latest | None) -> Latest | None:
        """Check a LATEST (signed, if required; not backwards) and pin the manifest it names."""
        if pointer is None:
            return None
        if self.verifier is not None:
            latest_pointer.check_signed(pointer, self.verifier)
        self._check_run(pointer.origin_run_id, f"LATEST (v{pointer.version})")
        with self._lock:
            if pointer.version < self._newest_followed:
                raise VerificationError(
                    f"LATEST at {self.store.url} moved backwards from v{self._newest_followed} "
                    f"to v{pointer.version}: a rollback, not followed"
                )
            if self._run is None and self.verifier is not None:
                self._run = pointer.origin_run_id  # the run this reader follows from now on
            self._latest_named = pointer.version
            self._latest_checked = pointer
            if pointer.manifest_hash is not None:
                self._latest_pin = (pointer.version, pointer.manifest_hash)
        return pointer

    @property
    def run(self) -> str | None:
        """The run this reader follows (None: not yet known, or any run)."""
        return self._run

    def _check_run(self, origin: str | None, where: str) -> None:
        """Refuse what belongs to another run than the one this reader follows."""
        run = self._run
        if run is None or origin == run or (origin is None and not self._run_given):
            return  # a version that names no run predates runs: bound by nothing to check
        raise VerificationError(
            f"{where} at {self.store.url} "
            + ("names no run" if origin is None else f"belongs to run {origin!r}")
            + f", but this reader follows run {run!r}: another run's version (copied into "
            "this prefix, or two runs sharing it), not followed"
        )

    def resolve(self, version: int | str | None) -> int:
        """A version number: ``version`` itself, or LATEST's for None or ``"latest"``."""
        if version is None or version == "latest":
            pointer = self.latest()
            if pointer is None:
                raise NotFoundError(f"nothing is published at {self.store.url} (no LATEST)")
            return pointer.version
        if isinstance(version, str):
            if not (version.isascii() and version.isdigit()):  # isdigit() also takes '²'
                raise UsageError(f"version must be a number or 'latest', got {version!r}")
            version = int(version)
        return layout.check_version(version)

    def pin_from_latest(self, version: int) -> None:
        """Pin a version asked for by number from LATEST down its delta chain.

        LATEST pins the newest manifest and each delta its base, so an edited
        manifest anywhere on LATEST's chain is refused even when asked for by
        number. LATEST's own failures are not the caller's (a version by number
        must stay reachable when LATEST is broken or expired).

        When the newest LATEST read names ``version`` itself (a watcher fetching
        what its poll just found), that read pinned it already: LATEST is not read
        again (a round trip per version, 0.2 s on a 200 ms link, measured in
        benchmarks/wan_fleet.py).
        """
        with self._lock:
            if self._latest_named == version and self._latest_pin is not None:
                return
        with contextlib.suppress(WanrlError):
            pointer = self.latest()
            if pointer is not None and pointer.version > version:
                self.chain(pointer.version)

    # -- manifests ----------------------------------------------------------------------
    def versions(self) -> list[int]:
        """Every version with a committed manifest, ascending."""
        found = set()
        for info in self.store.list(layout.VERSIONS_DIR + "/"):
            v = layout.version_of_key(info.key)
            if v is not None and info.key == layout.manifest_key(v):
                found.add(v)
        return sorted(found)

    def get(self, version: int) -> Manifest:
        """The validated (and, with a verifier, signature-checked) manifest; cached.

        NotFoundError when the store has none for ``version``.
        """
        return self._entry(version).manifest

    def stored_bytes(self, version: int) -> bytes:
        """The manifest of ``version`` exactly as stored (verified like :meth:`get`)."""
        if not self._keep_bytes:
            raise UsageError("stored_bytes needs a Manifests made with keep_bytes=True")
        data = self._entry(version).data
        if data is None:  # pragma: no cover - every entry keeps bytes with keep_bytes
            raise UsageError(f"the bytes of version {version} were not kept")
        return data

    def chain(self, version: int) -> list[Manifest]:
        """``version`` and its bases back to the keyframe, oldest first; a missing base
        is a VerificationError naming the broken chain."""
        return lineage(self.get(version), safe_lookup(self.get))

    def is_cached(self, version: int) -> bool:
        with self._lock:
            return version in self._cache

    def retain(self, versions: Iterable[int]) -> None:
        """Forget every cached manifest but those of ``versions`` (the pins stay)."""
        keep = set(versions)
        with self._lock:
            for v in [v for v in self._cache if v not in keep]:
                del self._cache[v]

    def _entry(self, version: int) -> _Read:
        with self._lock:
            cached = self._cache.get(version)
            if cached is not None:
                self._cache.move_to_end(version)
        if cached is not None:
            try:
                return self._recheck(cached)
            except (ManifestError, SignatureError, VerificationError) as exc:
                log.info("cached manifest of version %d: %s; reading it again", version, exc)
                with self._lock:
                    self._cache.pop(version, None)
        entry = self._read(version)
        with self._lock:
            self._cache[version] = entry
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return entry

    def _read(self, version: int) -> _Read:
        """Read, bound, validate, verify and pin-check; a manifest that fails is read
        once more, so a body damaged on the way does not fail what a second read serves.

        Through a cache (a CDN), a manifest no pin covers is read from the origin (a
        stale copy would verify against nothing), and the second read of one that
        failed goes there too (``distrust``)."""
        with self._lock:
            pinned = version in self._pins or (self._latest_pin or (-1,))[0] == version
        source = self.store if pinned else self.store.origin
        for attempt in (0, 1):
            data = read_stored(source, version)
            if data is None:
                raise NotFoundError(f"version {version} does not exist at {self.store.url}")
            try:
                m = Manifest.from_json(data, expect_version=version)
                keyring = self._verify(m)
                self._check_run(m.origin_run_id, f"version {version}")
                self._check_pins(m)
                return _Read(m, data if self._keep_bytes else None, keyring)
            except (ManifestError, SignatureError, VerificationError) as exc:
                if attempt:
                    raise
                log.info("%s; reading the manifest of version %d once more", exc, version)
                self.store.distrust(layout.manifest_key(version), str(exc))
                source = self.store
        raise AssertionError("unreachable")  # pragma: no cover

    def _verify(self, m: Manifest) -> int:
        """Check ``m``'s signature, if required; the keyring generation it was checked under."""
        if self.verifier is None:
            return 0
        keyring = self.verifier.refresh()
        self.verifier.verify(m)
        return keyring

    def _recheck(self, entry: _Read) -> _Read:
        """A cached manifest, checked against what changed since it was read."""
        m = entry.manifest
        if self.verifier is not None and entry.keyring != self.verifier.refresh():
            entry = _Read(m, entry.data, self._verify(m))  # the keyring was reloaded
            with self._lock:
                if m.version in self._cache:
                    self._cache[m.version] = entry
        self._check_run(m.origin_run_id, f"version {m.version}")
        self._check_pins(m)
        return entry

    def _check_pins(self, m: Manifest) -> None:
        """Refuse a manifest whose digest is not the one LATEST or the next delta names;
        then record the base it pins, and that LATEST's version was followed."""
        with self._lock:
            pinned = self._pins.get(m.version)
            if self._latest_pin is not None and self._latest_pin[0] == m.version:
                pinned = pinned or self._latest_pin[1]
        if pinned is not None and pinned != m.digest:
            raise ManifestError(
                f"manifest of version {m.version} at {self.store.url} is not the one its "
                "successor or LATEST names (edited, or from another run)"
            )
        with self._lock:
            if m.base_version is not None and m.base_manifest_hash is not None:
                self._pins.setdefault(m.base_version, m.base_manifest_hash)
            if m.version == self._latest_named:
                self._newest_followed = max(self._newest_followed, m.version)


__all__ = [
    "Manifests",
    "check_claimable",
    "lineage",
    "read_bounded",
    "read_stored",
    "require_newer",
    "run_of",
    "safe_lookup",
]
