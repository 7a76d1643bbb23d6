"""Resuming: continue a run from the newest version its store holds.

A restarted trainer, or a one-shot ``wanrl-s3 publish``, must not send a full
keyframe for every version just because this process has never published: the
store already holds the last version's bits. :func:`resume` adopts them
(verified, from the store or from a local copy the caller names) as the
publisher's delta base, so the next publication is a delta again, and says which
version a new publication must be newer than. The CLI's ``publish`` and the verl
trainer side both resume through here.

Reading the store is the reader's job, so this module uses the Subscriber: the
only place on the trainer side where data flows back from a store. Its
manifests, LATEST and the claim rule are the manifest owner's
(:mod:`wanrl_s3.format.manifests`), as for the publisher.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import UsageError, VerificationError
from ..fetch.subscriber import Snapshot, Subscriber
from ..format.manifests import require_newer

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from ..format.signing import Verifier
    from .publisher import Publisher


@dataclass(frozen=True, kw_only=True)
class ResumePoint:
    """The newest committed version of a store, as a publisher continues from it."""

    version: int
    keyframe_version: int
    since_keyframe: int  # deltas between ``keyframe_version`` and ``version``
    run_id: str
    manifest_hash: str  # the newest manifest's digest, which the next delta pins

    @property
    def next_version(self) -> int:
        """The smallest version a new publication may claim."""
        return self.version + 1


def resume_point(sub: Subscriber) -> ResumePoint | None:
    """Where the store behind ``sub`` stands (manifests only); None when it is empty."""
    latest = sub.manifests.latest()
    if latest is None:
        return None
    chain = sub.manifests.chain(latest.version)
    manifest = chain[-1]
    return ResumePoint(
        version=manifest.version,
        keyframe_version=manifest.keyframe_version or manifest.version,
        since_keyframe=len(chain) - 1,
        run_id=manifest.run_id,
        manifest_hash=manifest.digest,
    )


def resume(
    publisher: Publisher,
    *,
    base: Snapshot | None = None,
    verifier: Verifier | None = None,
    publishing: int | None = None,
) -> ResumePoint | None:
    """Adopt the newest version of ``publisher``'s primary store as its delta base.

    ``publishing``: the version about to be published. When the store's newest is
    already at or past it (another publisher won the race since the caller looked),
    that is a VersionConflictError (exit 4), not a stale base (exit 2).

    ``base``: a local copy of that version (a pulled file), checked against its
    manifest instead of downloading it; it must hold the newest version. Returns
    None (and adopts nothing) when the store is empty. A publisher that signs
    adopts no unsigned base, so its first publication is a keyframe. Every
    adopted byte is verified against the manifest's hashes first.
    """
    with Subscriber(publisher.store, verifier=verifier) as sub:
        point = resume_point(sub)
        if point is None:
            if base is not None:
                raise UsageError(f"the store {publisher.store.url} has no versions yet to resume")
            return None
        if publisher.signer is not None and sub.manifests.get(point.version).signature is None:
            log.info(
                "v%d is not signed: the first signed publication goes out as a keyframe, "
                "so that readers that require signatures never need an unsigned base",
                point.version,
            )
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
            snapshot = base
        else:
            try:
                snapshot = sub.fetch(point.version)
            except VerificationError as exc:  # damaged in the store: no base to diff against
                log.warning("v%d does not verify (%s): the next publication is a keyframe",
                            point.version, exc)  # fmt: skip
                return point
    publisher.adopt_base(
        point.version,
        snapshot.tensors,
        keyframe_version=point.keyframe_version,
        since_keyframe=min(point.since_keyframe, publisher.config.keyframe_every),
        borrow=base is not None,
        manifest_hash=point.manifest_hash,
    )
    return point


__all__ = ["ResumePoint", "resume", "resume_point"]
