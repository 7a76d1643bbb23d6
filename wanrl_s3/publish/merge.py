"""R share records -> one version manifest (pure: no I/O).

The committing rank merges only shares that agree: the same ranks count and
assignment mode, the same tensor stream (balanced mode), no tensor name in two
shares, and one delta base. Shares encoded whole (a rank that held no base of its
own, or tensors whose delta did not pay) may sit beside delta shares: a delta
version may hold whole tensors. Every refusal is a UsageError that names the
ranks, raised before anything is committed.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence

from ..errors import UsageError
from ..format.manifest import Manifest
from .share_record import ShareRecord


def merge(
    records: Sequence[ShareRecord],
    *,
    metadata: Mapping[str, str],
    created_at_s: float,
) -> Manifest:
    """The manifest of the version the records' shares make together (not yet validated)."""
    first = records[0]
    _check_agree(records)
    _check_names_disjoint(records)
    shares = [r.share for r in records if r.share is not None]
    if not shares:
        raise UsageError(f"nothing to publish for v{first.version}: no rank had a tensor")
    base = _common_base(records)
    return Manifest(
        run_id=first.run_id,
        version=first.version,
        created_at_s=created_at_s,
        kind="full" if base is None else "delta",
        tensors=tuple(itertools.chain.from_iterable(s.tensors for s in shares)),
        objects=tuple(itertools.chain.from_iterable(s.objects for s in shares)),
        base_version=None if base is None else base.base_version,
        keyframe_version=first.version if base is None else base.keyframe_version,
        metadata=dict(metadata),
        base_manifest_hash=None if base is None else base.base_manifest_hash,
    )


def _check_agree(records: Sequence[ShareRecord]) -> None:
    first = records[0]
    for r in records[1:]:
        for what, mine, theirs in (
            ("ranks", first.ranks, r.ranks),
            ("assign", first.assign, r.assign),
        ):
            if mine != theirs:
                raise UsageError(
                    f"v{first.version}: rank {first.rank} has {what}={mine!r} but rank "
                    f"{r.rank} has {what}={theirs!r}: every rank must pass the same {what}="
                )
        if r.stream_hash != first.stream_hash:
            raise UsageError(
                f"v{first.version}: ranks {first.rank} and {r.rank} saw different tensor "
                "streams; assign='balanced' needs every rank to see every tensor in the same "
                "order (use assign='own' when each rank sees only its shards)"
            )
    if len({r.publish_id for r in records}) != len(records):
        raise UsageError(f"v{first.version}: two shares name the same publish id")


def _check_names_disjoint(records: Sequence[ShareRecord]) -> None:
    owner: dict[str, int] = {}
    for r in records:
        for t in () if r.share is None else r.share.tensors:
            other = owner.setdefault(t.name, r.rank)
            if other != r.rank:
                raise UsageError(
                    f"v{r.version}: tensor {t.name!r} is in the shares of rank {other} and rank "
                    f"{r.rank}; shares must be disjoint (with assign='own' each rank must pass "
                    "only the tensors it alone publishes)"
                )


def _common_base(records: Sequence[ShareRecord]) -> Manifest | None:
    """A delta share (its lineage is the version's), or None when every share is whole."""
    deltas = [(r.rank, r.share) for r in records if r.share is not None and r.share.kind == "delta"]
    if not deltas:
        return None
    rank, first = deltas[0]
    for other_rank, other in deltas[1:]:
        if _lineage(first) != _lineage(other):
            raise UsageError(
                f"v{first.version}: rank {rank} encoded against v{first.base_version} but "
                f"rank {other_rank} against v{other.base_version} (or another manifest of it); "
                "the version is refused and every rank's next share goes out whole"
            )
    return first


def _lineage(share: Manifest) -> tuple[int | None, int | None, str | None]:
    return share.base_version, share.keyframe_version, share.base_manifest_hash
