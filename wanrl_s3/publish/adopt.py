"""Adopting: a restarted publisher continues its run from the newest version its store holds.

A restarted trainer, or a one-shot ``wanrl-s3 publish``, must not send a full
keyframe for every version just because this process has never published: the
store already holds the last version's bits. :func:`adopt_newest` adopts them
(verified, from the store or from a local copy the caller names) as the
publisher's delta base, so the next publication is a delta again, and says which
version a new publication must be newer than. The CLI's ``publish`` and the
trainer core (:class:`~wanrl_s3.TrainerPublisher`, which the verl adapter drives)
both adopt through here.

A base is adopted only if the readers will trust it: a publisher that signs,
or is given the readers' keyring, adopts a newest version only when every
manifest of its chain is signed by a key it trusts (the keyring, else its own
key). Otherwise (unsigned, a revoked key, a key some bucket writer holds) the
next publication is a keyframe, so no verifying reader ever needs a base it
refuses. The publisher also carries on the adopted version's run
(``origin_run_id``), the run every reader of the store follows.

Reading the store is the reader's job, so this module uses the Subscriber: the
only place on the trainer side where data flows back from a store. Its
manifests, LATEST and the claim rule are the manifest owner's
(:mod:`wanrl_s3.format.manifests`), as for the publisher.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ManifestError, SignatureError, UsageError, VerificationError
from ..fetch.subscriber import Snapshot, Subscriber
from ..format import latest
from ..format.manifest import Manifest
from ..format.manifests import require_newer, run_of
from ..store import ObjectStore

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from typing import TypeAlias

    from ..format.signing import Verifier
    from .publisher import Publisher
    from .shard import ShardedPublisher

    Adopter: TypeAlias = Publisher | ShardedPublisher


@dataclass(frozen=True, kw_only=True)
class AdoptionPoint:
    """The newest committed version of a store, as a publisher continues from it."""

    version: int
    keyframe_version: int
    since_keyframe: int  # deltas between ``keyframe_version`` and ``version``
    run_id: str
    manifest_hash: str  # the newest manifest's digest, which the next delta pins
    origin_run_id: str  # the run the store's versions belong to
    adopted: bool = False  # whether adopt_newest took the version as the publisher's delta base

    @property
    def base_key(self) -> tuple[int, str]:
        """(version, manifest digest): what names this version as a delta base exactly."""
        return self.version, self.manifest_hash

    @property
    def next_version(self) -> int:
        """The smallest version a new publication may claim."""
        return self.version + 1


def adoption_point(sub: Subscriber) -> AdoptionPoint | None:
    """Where the store behind ``sub`` stands (manifests only); None when it is empty."""
    latest = sub.manifests.latest()
    if latest is None:
        return None
    chain = sub.manifests.chain(latest.version)
    manifest = chain[-1]
    return AdoptionPoint(
        version=manifest.version,
        keyframe_version=manifest.keyframe_version or manifest.version,
        since_keyframe=len(chain) - 1,
        run_id=manifest.run_id,
        manifest_hash=manifest.digest,
        origin_run_id=manifest.origin_run_id or manifest.run_id,
    )


def adopt_newest(
    publisher: Publisher,
    *,
    base: Snapshot | None = None,
    verifier: Verifier | None = None,
    publishing: int | None = None,
) -> AdoptionPoint | None:
    """Adopt the newest version of ``publisher``'s primary store as its delta base.

    ``publishing``: the version about to be published. When the store's newest is
    already at or past it (another publisher won the race since the caller looked),
    that is a VersionConflictError (exit 4), not a stale base (exit 2).

    ``base``: a local copy of that version (a pulled file), checked against its
    manifest instead of downloading it; it must hold the newest version. Returns
    None (and adopts nothing) when the store is empty. ``verifier``: the keys the
    readers trust (a signing publisher's default: its own key); a version whose
    chain they do not all sign is not adopted (``adopted`` is False), and the next
    publication is a keyframe. Every adopted byte is verified against the
    manifest's hashes first.
    """
    with Subscriber(publisher.store) as sub:
        point = adoption_point(sub)
        if point is None:
            if base is not None:
                raise UsageError(f"the store {publisher.store.url} has no versions yet to adopt")
            return None
        if not trusted(sub, point, publisher, verifier):
            return point
        if publishing is not None:
            require_newer(publishing, point.version, publisher.store.url)
        if base is not None and base.version != point.version:
            raise UsageError(
                f"the local copy holds v{base.version} but the newest version is "
                f"v{point.version}; pull it first"
            )
        if base is not None:
            sub.verify_local(base)
            tensors: Mapping[str, np.ndarray] | None = base.tensors
        else:
            tensors = base_tensors(sub, point)
    return point if tensors is None else take(publisher, point, tensors, borrow=base is not None)


def trusted(
    sub: Subscriber, point: AdoptionPoint, publisher: Adopter, verifier: Verifier | None
) -> bool:
    """Whether the readers trust ``point`` as a base (the keys: ``verifier``, else the
    publisher's own); sets the publisher's run to the one it continues either way."""
    trust = verifier or (None if publisher.signer is None else publisher.signer.verifier())
    untrusted = _untrusted(sub.manifests.chain(point.version), trust)
    if untrusted is not None:
        publisher.origin_run_id = run_of(publisher.store, trust)
        log.warning(
            "v%d is not a base the readers trust (%s): the next publication is a "
            "keyframe, so that no reader that requires signatures needs a base it refuses",
            point.version,
            untrusted,
        )
        return False
    publisher.origin_run_id = point.origin_run_id
    return True


def base_tensors(
    sub: Subscriber, point: AdoptionPoint, names: Collection[str] | None = None
) -> dict[str, np.ndarray] | None:
    """``point``'s tensors (those of ``names`` it holds, else all), verified; None when they
    do not verify (damaged in the store: no base to diff against)."""
    try:
        if names is None:
            return dict(sub.fetch(point.version).tensors)
        return sub.fetch_named(point.version, names)
    except VerificationError as exc:
        log.warning("v%d does not verify (%s): the next publication is a keyframe",
                    point.version, exc)  # fmt: skip
        return None


def take(
    publisher: Adopter,
    point: AdoptionPoint,
    tensors: Mapping[str, np.ndarray],
    *,
    borrow: bool = False,
) -> AdoptionPoint:
    """Hand ``tensors`` (verified, of ``point``) to ``publisher`` as its delta base."""
    publisher.adopt_base(
        point.version,
        tensors,
        keyframe_version=point.keyframe_version,
        since_keyframe=min(point.since_keyframe, publisher.config.keyframe_every),
        borrow=borrow,
        manifest_hash=point.manifest_hash,
        copy=False,  # fetched for the publisher (or borrowed): handed over, never copied
    )
    return replace(point, adopted=True)


def _untrusted(chain: list[Manifest], trust: Verifier | None) -> str | None:
    """Why readers that trust ``trust``'s keys would refuse ``chain`` as a base (None: they
    would not). Without keys (a publisher that neither signs nor has the readers' keyring)
    nothing is judged: its readers require no signature."""
    if trust is None:
        return None
    try:
        for m in chain:
            trust.verify(m)
    except SignatureError as exc:
        return str(exc)
    return None


def check_signing(store: ObjectStore, signing: bool, *, unsigned_ok: bool, fix: str) -> None:
    """Refuse an unsigned publication onto a run whose versions are signed.

    Its verifying readers would refuse it and every version after it until the
    next signed keyframe, each of them looping on "LATEST is not signed". A
    caller that means it says so (``unsigned_ok``). ``fix``: how the caller's
    user signs, or says so (the CLI's flags, the library's arguments). A corrupt
    LATEST tells nothing.
    """
    if signing or unsigned_ok:
        return
    try:
        pointer = latest.read(store)
    except ManifestError:
        return
    if pointer is not None and pointer.signature is not None:
        raise UsageError(
            f"{store.url} holds a signed run (LATEST v{pointer.version} is signed by key "
            f"{pointer.signature.get('key_id')}): {fix} (readers that verify signatures "
            "will refuse an unsigned version)"
        )


__all__ = ["AdoptionPoint", "adopt_newest", "adoption_point", "check_signing"]
