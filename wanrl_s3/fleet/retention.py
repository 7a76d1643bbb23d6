"""Garbage collection that keeps every delta chain whole (invariant 4).

What is kept: counted from the version LATEST serves (not from the newest
manifest: a publisher killed between its manifest and LATEST leaves a newer,
unserved version), the ``keep_versions`` newest versions up to and including
the served one, every committed version newer than it (LATEST may still move
there), and for each of them its whole lineage back to its keyframe, so a
worker at any retained version, or at none, can still reach the newest one.
The version LATEST names is never deleted. Everything else goes, manifest
first (so no reader discovers a version that is being removed), then its payload.

What else is collected: payload objects that no manifest references (a
publish that crashed before its manifest, or lost the race for its version)
and multipart uploads never completed, once they are older than
``grace_s``: a publish still in progress looks exactly like a crashed one
until then.

What is left alone: a manifest gc cannot read (junk, damaged, or written by a
newer format) is no version to it, and is reported, never deleted, with
everything in its directory: only a person can tell junk from a version gc does
not understand. One such manifest does not stop the rest of the store from
being collected. A retained delta chain that runs into one (or into a manifest
that is gone) keeps every version up to its root, since what else the chain
needs cannot be known.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from ..errors import NotFoundError, VerificationError
from ..format import latest, layout
from ..format.manifest import Manifest
from ..format.manifests import Manifests, lineage, safe_lookup
from ..store import ObjectStore
from ..units import require_int, require_non_negative


@dataclass(frozen=True)
class RetentionPolicy:
    keep_versions: int = 20
    grace_s: float = 3600.0

    def __post_init__(self) -> None:
        require_int("keep_versions", self.keep_versions)
        require_non_negative("grace_s", self.grace_s)


@dataclass
class GcReport:
    kept_versions: list[int] = field(default_factory=list)
    deleted_versions: list[int] = field(default_factory=list)
    deleted_objects: int = 0
    deleted_bytes: int = 0
    orphan_objects: int = 0
    aborted_uploads: int = 0
    dry_run: bool = False
    unreadable_versions: dict[int, str] = field(default_factory=dict)  # left alone: why


def retained(
    versions: Iterable[int],
    lookup: Callable[[int], Manifest],
    keep_versions: int,
    served: int | None = None,
) -> set[int]:
    """The versions to keep, and every version their chains need.

    ``served``: the version LATEST names (None: unknown, count from the newest).
    """
    ordered = sorted(versions)
    if served is None:
        roots = ordered[-keep_versions:]
    else:
        at_or_below = [v for v in ordered if v <= served]
        roots = at_or_below[-keep_versions:] + [v for v in ordered if v > served]
    keep: set[int] = set()
    for v in roots:
        try:
            keep.update(m.version for m in lineage(lookup(v), safe_lookup(lookup)))
        except VerificationError:  # a base unreadable or gone: what else it needs is unknown
            keep.update(w for w in ordered if w <= v)
    return keep


def _read_all(reader: Manifests, versions: list[int]) -> tuple[dict[int, Manifest], dict[int, str]]:
    """The manifest of each version, and the versions whose manifest cannot be read (why)."""
    readable: dict[int, Manifest] = {}
    unreadable: dict[int, str] = {}
    for v in versions:
        try:
            readable[v] = reader.get(v)
        except NotFoundError:
            continue  # deleted since the listing
        except VerificationError as exc:
            unreadable[v] = str(exc)
    return readable, unreadable


def _lookup(manifests: dict[int, Manifest]) -> Callable[[int], Manifest]:
    def get(version: int) -> Manifest:
        found = manifests.get(version)
        if found is None:
            raise NotFoundError(f"version {version} is not readable")
        return found

    return get


def _served(store: ObjectStore) -> int | None:
    """LATEST's version, or None when there is none or it is corrupt (gc then counts
    from the newest manifest, as readers cannot be served from a corrupt pointer)."""
    version, _ = latest.committed_version(store)
    return None if version < 0 else version


def collect(
    store: ObjectStore,
    policy: RetentionPolicy | None = None,
    *,
    dry_run: bool = False,
    now_s: float | None = None,
) -> GcReport:
    policy = policy or RetentionPolicy()
    now_s = time.time() if now_s is None else now_s
    report = GcReport(dry_run=dry_run)
    objects = store.list(layout.VERSIONS_DIR + "/")
    reader = Manifests(store)
    manifests, report.unreadable_versions = _read_all(reader, reader.versions())
    versions = sorted(manifests)
    served = _served(store)
    keep = (
        retained(versions, _lookup(manifests), policy.keep_versions, served) if versions else set()
    )
    report.kept_versions = sorted(keep)
    report.deleted_versions = sorted(set(versions) - keep)
    referenced = {m.payload_key(r.key) for m in manifests.values() for r in m.objects}
    doomed = [layout.manifest_key(v) for v in report.deleted_versions]
    for o in objects:
        version = layout.version_of_key(o.key)
        if version is None or o.key == layout.manifest_key(version):
            continue
        if version in report.unreadable_versions:
            continue  # left alone with its manifest (see the module docstring)
        if version in manifests and version not in keep:
            doomed.append(o.key)  # payload of a version being deleted
        elif o.key not in referenced and now_s - o.last_modified_s > policy.grace_s:
            doomed.append(o.key)  # nobody references it and it is old: a crashed publish
            report.orphan_objects += 1
    sizes = {o.key: o.size for o in objects}
    report.deleted_objects = len(doomed)
    report.deleted_bytes = sum(sizes.get(k, 0) for k in doomed)
    if not dry_run:
        store.delete(doomed)  # manifests come first in the list, payload after
    for upload in store.pending_uploads(layout.VERSIONS_DIR + "/"):
        if now_s - upload.initiated_s > policy.grace_s:
            report.aborted_uploads += 1
            if not dry_run:
                store.abort_upload(upload)
    return report
