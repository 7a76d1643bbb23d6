"""Snapshot: handing tensors to a consumer that copies them elsewhere (an engine's device).

Resident sizes come from /proc/self/smaps_rollup for 16 MiB tensors, far above
anything else the test allocates meanwhile.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from wanrl_s3 import Snapshot, load_snapshot
from wanrl_s3.fetch.files import VERSION_KEY
from wanrl_s3.io.safetensors_file import write_file

MiB = 2**20


def resident_bytes() -> int:
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        if key == "Rss":
            return int(value.split()[0]) * 1024
    raise AssertionError("no Rss line in smaps_rollup")


def staged(tmp_path: Path) -> tuple[Snapshot, dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    tensors = {f"t{i}": rng.integers(0, 255, 16 * MiB, np.uint8) for i in range(2)}
    path = write_file(tmp_path / "v7.safetensors", tensors, metadata={VERSION_KEY: "7"})
    return load_snapshot(path), tensors


@pytest.mark.parametrize("release_pages", [True, False])
def test_items_gives_a_staged_tensors_pages_back_once_the_next_is_asked_for(
    tmp_path: Path, release_pages: bool
) -> None:
    snap, expected = staged(tmp_path)
    sums = {name: int(a.sum(dtype=np.int64)) for name, a in expected.items()}
    before = resident_bytes()
    for name, arr in snap.items(release_pages=release_pages):
        # the consumer's copy touches every page (a sum allocates nothing of that size)
        assert int(arr.sum(dtype=np.int64)) == sums[name]
    grown = resident_bytes() - before
    if release_pages:
        assert grown < 8 * MiB  # at most parts of one tensor's pages left
    else:
        assert grown >= 30 * MiB  # both tensors' pages stay mapped in
    for name, arr in snap.items():  # released pages read back from the file
        assert np.array_equal(arr, expected[name])


def test_tensors_in_ordinary_memory_are_left_alone() -> None:
    data = {"a": np.arange(1000, dtype=np.float32)}
    snap = Snapshot(1, data)
    assert [(n, a.tolist()) for n, a in snap.items(release_pages=True)] == [
        ("a", data["a"].tolist())
    ]
