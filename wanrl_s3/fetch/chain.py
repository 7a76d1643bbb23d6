"""Which versions to download to reach a target: pure functions over manifests.

A delta version names its base; following base pointers from the target ends
at a full version (the keyframe). A reader at version ``have`` can take the
deltas after ``have`` if ``have`` is on that chain, or start over from the
keyframe. For each tensor, the recipe is the last step where it is stored raw
(or the reader's own copy) followed by the XOR deltas after it; the cost of a
path is the stored bytes of exactly those entries, so the planner and the
downloader count the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import VerificationError
from ..format.manifest import Manifest, TensorEntry
from ..format.manifests import lineage

HAVE = -1  # step index meaning "the reader's own copy at the starting version"


@dataclass(frozen=True)
class Recipe:
    """How to build one tensor of the target: a start, then deltas applied in order."""

    name: str
    start_step: int  # index into FetchPlan.steps, or HAVE
    start: TensorEntry | None  # the raw entry read at start_step (None when HAVE)
    deltas: tuple[tuple[int, TensorEntry], ...]  # (step index, xor-delta entry), in order

    @property
    def download_bytes(self) -> int:
        raw = 0 if self.start is None else self.start.stored_bytes
        return raw + sum(e.stored_bytes for _, e in self.deltas)


@dataclass(frozen=True)
class FetchPlan:
    steps: tuple[Manifest, ...]  # versions whose payload is read, oldest first
    have_version: int | None  # the reader's version the path starts from, if any
    recipes: tuple[Recipe, ...]

    @property
    def target(self) -> Manifest:
        return self.steps[-1]

    @property
    def download_bytes(self) -> int:
        return sum(r.download_bytes for r in self.recipes)

    @property
    def objects(self) -> dict[str, int]:
        """Every payload object the plan reads (its store key) and its size per the manifest."""
        sizes = [{o.key: o.size for o in m.objects} for m in self.steps]
        out: dict[str, int] = {}
        for r in self.recipes:
            reads = r.deltas if r.start is None else ((r.start_step, r.start), *r.deltas)
            for step, entry in reads:
                for seg in entry.segments:
                    out[self.steps[step].payload_key(seg.key)] = sizes[step][seg.key]
        return out


def recipes(steps: list[Manifest], from_have: bool) -> tuple[Recipe, ...]:
    """Per target tensor: where its bits start and which deltas follow."""
    out = []
    for entry in steps[-1].tensors:
        deltas: list[tuple[int, TensorEntry]] = []
        start_step, start = HAVE, None
        for i in range(len(steps) - 1, -1, -1):
            e = steps[i].by_name.get(entry.name)
            if e is None:
                raise VerificationError(
                    f"tensor {entry.name!r} is missing from version "
                    f"{steps[i].version} but a later delta needs it"
                )
            if e.encoding != "xor-delta":  # a whole copy (raw, or coded in byte planes)
                start_step, start = i, e
                break
            deltas.append((i, e))
        if start is None and not from_have:
            raise VerificationError(f"tensor {entry.name!r} has no raw copy on its chain")
        deltas.reverse()
        out.append(Recipe(entry.name, start_step, start, tuple(deltas)))
    return tuple(out)


def plan_fetch(
    target: Manifest, lookup: Callable[[int], Manifest], have_version: int | None
) -> FetchPlan:
    """The cheaper of: deltas after ``have_version``, or keyframe plus deltas."""
    chain = lineage(target, lookup)
    keyframe_plan = FetchPlan(tuple(chain), None, recipes(chain, from_have=False))
    if have_version is None:
        return keyframe_plan
    versions = [m.version for m in chain]
    if have_version not in versions:
        return keyframe_plan
    after = chain[versions.index(have_version) + 1 :]
    if not after:  # already at the target: nothing to download, only a copy to check
        return FetchPlan(
            (target,), have_version, tuple(Recipe(t.name, HAVE, None, ()) for t in target.tensors)
        )
    have_plan = FetchPlan(tuple(after), have_version, recipes(after, from_have=True))
    if have_plan.download_bytes <= keyframe_plan.download_bytes:
        return have_plan
    return keyframe_plan
