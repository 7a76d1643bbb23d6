"""LATEST: the one owner of reading, polling and advancing the pointer readers poll.

LATEST names the newest committed version (docs/format.md). Every module that
touches it goes through here, so there is one policy. It claims nothing: a
version is claimed by creating its manifest only if absent, and the rule for
which versions may be claimed is :mod:`wanrl_s3.format.manifests`'s, as is
following LATEST (its digest pin, never backwards).

- **Readers** (through :class:`~wanrl_s3.format.manifests.Manifests`: the
  subscriber, the probe, the relay reading a primary) get a :class:`Latest` or
  ``None`` when the store has none; a pointer that is not a valid LATEST raises
  :class:`~wanrl_s3.errors.ManifestError` (exit 3). A reader never guesses a
  version from a corrupt pointer.
- **Writers** (the publisher and the relay committing to a replica) move LATEST
  only forwards, by compare-and-swap on the ETag they read. A corrupt pointer is
  treated as "no version" (and logged): it is overwritten by the next commit,
  because the manifest being committed was verified and the manifests, not the
  pointer, are the truth. Refusing would freeze the run until a person deleted it.
- A pointer that does not parse is read again (twice at most) before it is
  called corrupt: a body damaged in transit must not make a writer treat a
  newer pointer as "no version", nor a reader fail a pull that a second read
  would serve. A pointer corrupt as stored is reported once until it is repaired.
- A compare-and-swap whose response was lost is resolved by reading LATEST back:
  if it names the version being committed, by the same run, the move succeeded.
- A publisher that signs also signs LATEST, with an expiry (``expires_at``): a
  reader that requires signatures refuses an unsigned, forged or expired pointer
  (:func:`check_signed`), so whoever can write the bucket can neither roll the
  fleet back to an older signed version for long nor freeze it unseen.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import (
    ManifestError,
    NotFoundError,
    PreconditionFailedError,
    SignatureError,
    StoreError,
)
from ..store import Blob, ObjectStore, compare_and_swap, get_or_none
from . import layout
from .manifest import (
    DIGEST_RE,
    KINDS,
    RUN_ID_RE,
    Fields,
    Manifest,
    canonical_json,
    format_iso,
    load_bounded_json,
    parse_iso,
    parse_origin,
    parse_signature,
)

if TYPE_CHECKING:
    from .signing import Signer, Verifier

log = logging.getLogger(__name__)
_WARNED: set[str] = set()  # stores whose corrupt LATEST was reported and not yet repaired
REREADS = 2  # extra reads of a pointer that did not parse, before it is called corrupt

LATEST_FORMAT = "wanrl-s3/latest"
SCHEMA_VERSION = 1
MAX_LATEST_BYTES = 64 * 1024
_FIELDS = (
    "format",
    "schema_version",
    "version",
    "run_id",
    "origin_run_id",
    "kind",
    "keyframe_version",
    "manifest",
    "published_at",
    "manifest_hash",
    "expires_at",
    "signature",
)


@dataclass(frozen=True, kw_only=True)
class Latest:
    """The pointer readers poll: which version is newest, and what kind it is."""

    version: int
    run_id: str
    kind: str
    keyframe_version: int
    published_at_s: float
    manifest_hash: str | None = None  # the named manifest's digest (absent in older stores)
    expires_at_s: float | None = None  # signed pointers only: refuse it after this time
    signature: Mapping[str, str] | None = None
    origin_run_id: str | None = None  # the run the version belongs to (see Manifest)

    def signing_bytes(self) -> bytes:
        """The canonical pointer without its signature: what the signature covers."""
        return canonical_json(self._body())

    def signed(self, signer: Signer) -> Latest:
        return replace(self, signature=signer.sign(self.signing_bytes()))

    def to_json(self) -> bytes:
        body = self._body()
        if self.signature is not None:
            body["signature"] = dict(self.signature)
        return json.dumps(body).encode()

    def _body(self) -> dict[str, Any]:
        return {
            "format": LATEST_FORMAT,
            "schema_version": SCHEMA_VERSION,
            "version": self.version,
            "run_id": self.run_id,
            **({"origin_run_id": self.origin_run_id} if self.origin_run_id else {}),
            "kind": self.kind,
            "keyframe_version": self.keyframe_version,
            "manifest": layout.manifest_key(self.version),
            "published_at": format_iso(self.published_at_s),
            **({"manifest_hash": self.manifest_hash} if self.manifest_hash else {}),
            **(
                {"expires_at": format_iso(self.expires_at_s)}
                if self.expires_at_s is not None
                else {}
            ),
        }

    @classmethod
    def from_json(cls, data: bytes) -> Latest:
        """Parse and check every field; raises ManifestError naming the field."""
        f = Fields(load_bounded_json(data, "LATEST", MAX_LATEST_BYTES), "LATEST", _FIELDS)
        if f.get("format") != LATEST_FORMAT:
            raise f.fail("format", f"must be {LATEST_FORMAT!r}")
        version = f.get_int("version", 0, layout.MAX_VERSION)
        keyframe = f.get_int("keyframe_version", 0, layout.MAX_VERSION)
        if f.get("manifest") != layout.manifest_key(version):
            raise f.fail("manifest", f"must be {layout.manifest_key(version)!r}")
        published = _time(f, "published_at")
        expires = None if f.raw.get("expires_at") is None else _time(f, "expires_at")
        return cls(
            version=version,
            run_id=f.get_str("run_id", RUN_ID_RE),
            kind=f.get_str("kind", choices=KINDS),
            keyframe_version=keyframe,
            published_at_s=published,
            manifest_hash=(
                None
                if f.raw.get("manifest_hash") is None
                else f.get_str("manifest_hash", DIGEST_RE, max_len=64)
            ),
            expires_at_s=expires,
            signature=parse_signature(f),
            origin_run_id=parse_origin(f),
        )

    @classmethod
    def of(
        cls,
        manifest: Manifest,
        published_at_s: float | None = None,
        expires_in_s: float | None = None,
    ) -> Latest:
        """The pointer that names ``manifest`` (unsigned; see :meth:`signed`)."""
        now_s = time.time() if published_at_s is None else published_at_s
        return cls(
            version=manifest.version,
            run_id=manifest.run_id,
            kind=manifest.kind,
            keyframe_version=manifest.keyframe_version or manifest.version,
            published_at_s=now_s,
            manifest_hash=manifest.digest,
            expires_at_s=None if expires_in_s is None else now_s + expires_in_s,
            origin_run_id=manifest.origin_run_id,
        )


def _time(f: Fields, name: str) -> float:
    try:
        return parse_iso(f.get_str(name, max_len=40))
    except ValueError:
        raise f.fail(name, "must be an ISO-8601 UTC time") from None


def check_signed(pointer: Latest, verifier: Verifier, now_s: float | None = None) -> None:
    """Refuse an unsigned, forged or expired LATEST (SignatureError, exit 3)."""
    verifier.verify_bytes(
        pointer.signing_bytes(), pointer.signature, f"LATEST (v{pointer.version})"
    )
    now_s = time.time() if now_s is None else now_s
    if pointer.expires_at_s is not None and now_s > pointer.expires_at_s:
        raise SignatureError(
            f"LATEST (v{pointer.version}) expired {now_s - pointer.expires_at_s:,.0f} s ago: "
            "no fresher signed pointer was published; the publisher has stopped, or an old "
            "LATEST is being replayed (pass --version N to pull a version by number)"
        )


# -- readers ------------------------------------------------------------------------
def read(store: ObjectStore) -> Latest | None:
    """The store's LATEST, or None when it has none. A corrupt pointer raises ManifestError."""
    blob = get_or_none(store, layout.LATEST_KEY)
    return None if blob is None else _load(store, blob)[0]


def poll(store: ObjectStore, etag: str | None) -> tuple[Latest, str] | None:
    """LATEST and its ETag if it changed since ``etag`` (a conditional GET), else None."""
    try:
        blob = store.get_if_changed(layout.LATEST_KEY, etag)
    except NotFoundError:
        return None
    return None if blob is None else _load(store, blob)


def _load(store: ObjectStore, blob: Blob) -> tuple[Latest, str]:
    """The pointer in ``blob`` and its ETag; re-read when it does not parse (see above).

    Raises ManifestError naming the store when every read gives a corrupt pointer.
    """
    for attempt in range(REREADS + 1):
        try:
            pointer = Latest.from_json(blob.data)
        except ManifestError as exc:
            again = get_or_none(store, layout.LATEST_KEY) if attempt < REREADS else None
            if again is None:
                raise ManifestError(f"{store.url}: {exc}") from exc
            blob = again
        else:
            _WARNED.discard(store.url)  # repaired (or never broken): report the next one
            return pointer, blob.etag
    raise AssertionError("unreachable")  # pragma: no cover


# -- writers ------------------------------------------------------------------------
def committed_version(store: ObjectStore) -> tuple[int, str | None]:
    """What a writer compares against: (LATEST's version or -1, its ETag or None).

    -1 when there is no pointer or it is corrupt (logged), so that the next
    commit repairs it; see the module docstring.
    """
    blob = get_or_none(store, layout.LATEST_KEY)
    if blob is None:
        return -1, None
    try:
        pointer, etag = _load(store, blob)
    except ManifestError as exc:
        if store.url not in _WARNED:  # once until repaired, not once per read
            _WARNED.add(store.url)
            log.warning("LATEST is corrupt (%s); the next commit overwrites it", exc)
        stored = get_or_none(store, layout.LATEST_KEY)
        return -1, None if stored is None else stored.etag
    return pointer.version, etag


def advance(
    store: ObjectStore,
    manifest: Manifest,
    attempts: int = 20,
    *,
    pointer: Latest | None = None,
) -> bool:
    """Compare-and-swap LATEST forwards to ``manifest``'s version; True if it now names it.

    False if LATEST already points past it, or at it for another run (it never
    moves backwards). The publisher and the relay both commit through this;
    ``pointer`` is the (signed) pointer to write, by default an unsigned one.
    """
    pointer = pointer or Latest.of(manifest)
    for _ in range(attempts):
        current, etag = committed_version(store)
        if current > manifest.version:
            return False
        if current == manifest.version:
            return _names(store, pointer)  # ours, if a lost response hid our own success
        try:
            compare_and_swap(store, layout.LATEST_KEY, etag, pointer.to_json())
            return True
        except PreconditionFailedError:
            continue  # moved under us (or our own write whose response was lost): re-read
    raise StoreError(
        f"could not move LATEST to {manifest.version} at {store.url} after "
        f"{attempts} attempts: too many concurrent publishers"
    )


def restore(store: ObjectStore, pointer: Latest, attempts: int = 20) -> bool:
    """Make LATEST exactly ``pointer`` unless it names a newer version; True if it is now.

    The relay's commit in a replica: the primary's pointer (signed, if it is),
    moved forwards like :func:`advance`, and also put back in place of a pointer
    for the same version that differs (edited, or copied from a primary since
    repaired), which :func:`advance` takes as already done. By compare-and-swap.
    """
    data = pointer.to_json()
    for _ in range(attempts):
        blob = get_or_none(store, layout.LATEST_KEY)
        if blob is not None and blob.data == data:
            return True
        current, etag = committed_version(store) if blob is not None else (-1, None)
        if current > pointer.version:
            return False
        try:
            compare_and_swap(store, layout.LATEST_KEY, etag, data)
            return True
        except PreconditionFailedError:
            continue  # moved under us, or our own write whose response was lost: re-read
    raise StoreError(
        f"could not set LATEST to v{pointer.version} at {store.url} after {attempts} attempts"
    )


def _names(store: ObjectStore, pointer: Latest) -> bool:
    try:
        found = read(store)
    except ManifestError:
        return False
    return found is not None and (found.version, found.run_id) == (pointer.version, pointer.run_id)


__all__ = [
    "LATEST_FORMAT",
    "Latest",
    "advance",
    "check_signed",
    "committed_version",
    "poll",
    "read",
    "restore",
]
