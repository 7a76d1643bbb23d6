"""Share records are read like manifests; the balanced assignment is the same on every rank."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from wanrl_s3.errors import ManifestError, UsageError
from wanrl_s3.format.manifest import Manifest, ObjectRef, Segment, TensorEntry
from wanrl_s3.publish.assign import ShareSelector
from wanrl_s3.publish.merge import merge
from wanrl_s3.publish.share_record import ShareRecord, abort_json, parse_abort, rank_of

HASH = "ab" * 32


def record(rank: int = 1, publish_id: str = "c0ffee", key: str | None = None) -> ShareRecord:
    key = key or f"{publish_id}/000000.bin"
    share = Manifest(
        run_id="job",
        version=4,
        created_at_s=0.0,
        kind="full",
        keyframe_version=4,
        tensors=(TensorEntry(f"w{rank}", "F32", (2,), HASH, "raw", (Segment(key, 0, 8),), HASH),),
        objects=(ObjectRef(key, 8),),
    )
    return ShareRecord(
        run_id="job", version=4, rank=rank, ranks=2, assign="own", publish_id=publish_id,
        share=share,
    )  # fmt: skip


def test_a_record_round_trips() -> None:
    r = record()
    assert ShareRecord.from_json(r.to_json(), version=4, run_id="job", rank=1) == r
    empty = ShareRecord(run_id="job", version=4, rank=0, ranks=2, assign="own",
                        publish_id="aa", share=None)  # fmt: skip
    assert ShareRecord.from_json(empty.to_json(), version=4, run_id="job", rank=0) == empty


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(rank=0), "field 'rank' is 0, but the record is stored as 1"),
        (lambda d: d.update(version=5), "field 'version' is 5"),
        (lambda d: d.update(ranks=0), "field 'ranks' must be between"),
        (lambda d: d.update(extra=1), "unknown field 'extra'"),
        (lambda d: d["share"].update(run_id="other"), "names run 'other'"),
        (lambda d: d["share"]["tensors"][0]["segments"][0].update(offset=4), "out of range"),
        (
            lambda d: d["share"].update(signature={"alg": "a", "key_id": "b", "value": "c"}),
            "must not be signed",
        ),
    ],
)
def test_a_malformed_record_is_a_manifest_error_naming_the_field(
    edit: Callable[[dict[str, Any]], None], message: str
) -> None:
    d = json.loads(record().to_json())
    edit(d)
    with pytest.raises(ManifestError, match=message):
        ShareRecord.from_json(json.dumps(d).encode(), version=4, run_id="job", rank=1)


def test_a_record_may_name_only_objects_under_its_own_publish_id() -> None:
    data = record(key="other/000000.bin").to_json()
    with pytest.raises(ManifestError, match="outside publish id 'c0ffee'"):
        ShareRecord.from_json(data, version=4, run_id="job", rank=1)


def test_a_deeply_nested_record_is_refused_before_it_is_parsed() -> None:
    with pytest.raises(ManifestError, match="nests deeper"):
        ShareRecord.from_json(b"[" * 100_000, version=4, run_id="job", rank=1)


def test_abort_markers_and_record_names() -> None:
    assert parse_abort(abort_json(3, "x" * 10_000)).startswith("rank 3: xxx")
    with pytest.raises(ManifestError):
        parse_abort(b'{"format": "wanrl-s3/share-abort", "rank": -1, "reason": "r"}')
    assert [rank_of(n) for n in ("000003.json", "abort.json", "3.json")] == [3, None, None]


def test_merge_refuses_two_shares_with_one_publish_id() -> None:
    with pytest.raises(UsageError, match="same publish id"):
        merge([record(0), record(1)], metadata={}, created_at_s=0.0)
    merged = merge([record(0, "aa"), record(1, "bb")], metadata={"k": "v"}, created_at_s=0.0)
    assert [t.name for t in merged.validate().tensors] == ["w0", "w1"]


def test_balanced_assignment_is_the_same_on_every_rank_and_near_even() -> None:
    rng = np.random.default_rng(0)
    sizes = rng.integers(1, 5000, 200)
    stream = [(f"t{i}", np.zeros(int(n), np.float32)) for i, n in enumerate(sizes)]
    picked = [
        [name for name, _ in ShareSelector(r, 4, "balanced").select(iter(stream))] for r in range(4)
    ]
    names = [name for share in picked for name in share]
    assert sorted(names) == sorted(name for name, _ in stream)  # disjoint and complete
    loads = [sum(int(sizes[int(n[1:])]) * 4 for n in share) for share in picked]
    assert max(loads) - min(loads) <= 4 * int(sizes.max())


def test_torch_and_numpy_tensors_balance_alike() -> None:
    torch = pytest.importorskip("torch")
    shapes = [(3, 5), (70,), (), (8, 8)]
    numpy_sel, torch_sel = ShareSelector(0, 2, "balanced"), ShareSelector(0, 2, "balanced")
    a = [numpy_sel.owner("x", np.zeros(s, np.float32)) for s in shapes]
    b = [torch_sel.owner("x", torch.zeros(s, dtype=torch.float32)) for s in shapes]
    assert a == b and numpy_sel.stream_hash() == torch_sel.stream_hash()
