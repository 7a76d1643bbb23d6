"""A file the trainer wrote itself (no wanrl-s3 metadata) is a delta base all the same.

`pull --have`, `publish --base` and a worker's starting file identify the version
they hold by their tensors' BLAKE3 hashes against the manifests, and fall back to
a full download only when no version matches.
"""

from __future__ import annotations

import json
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from safetensors.torch import save_file

from wanrl_s3.testing import nudge_state

from .test_cli import cli, read  # noqa: F401  (the cli fixture)


def policy(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        f"layer{i}.weight": (rng.standard_normal((256, 64)) * 0.02).astype(ml_dtypes.bfloat16)
        for i in range(4)
    }


def trainer_file(path: Path, state: dict[str, np.ndarray]) -> Path:
    """Written by safetensors from torch tensors, as a trainer would: no wanrl-s3 metadata."""
    torch = pytest.importorskip("torch")
    tensors = {
        k: torch.from_numpy(v.view(np.uint16).copy()).view(torch.bfloat16) for k, v in state.items()
    }
    save_file(tensors, str(path))
    return path


def test_pull_and_publish_identify_a_trainers_own_file(cli, url: str, tmp_path: Path) -> None:  # noqa: F811
    v1 = policy(1)
    v2 = nudge_state(v1, 0.01, seed=2)
    f1 = trainer_file(tmp_path / "trainer-v1.safetensors", v1)
    f2 = trainer_file(tmp_path / "trainer-v2.safetensors", v2)
    assert cli("publish", str(f1), "--store", url, "--version", "1")[0] == 0
    code, out, err = cli(
        "publish", str(f2), "--store", url, "--version", "2", "--base", str(f1), "--json"
    )
    assert code == 0, err
    assert json.loads(out)["kind"] == "delta" and "downloading" not in err
    pulled = tmp_path / "pulled.safetensors"
    code, out, err = cli("pull", "--store", url, "--out", str(pulled), "--have", str(f1), "--json")
    assert code == 0, err
    summary = json.loads(out)
    assert summary["version"] == 2 and summary["path"] == [2]  # only the delta moved
    assert read(pulled) == {k: v.tobytes() for k, v in v2.items()}


def test_a_file_of_no_published_version_pulls_in_full(cli, url: str, tmp_path: Path) -> None:  # noqa: F811
    f1 = trainer_file(tmp_path / "v1.safetensors", policy(1))
    other = trainer_file(tmp_path / "other.safetensors", policy(9))
    assert cli("publish", str(f1), "--store", url, "--version", "1")[0] == 0
    pulled = tmp_path / "pulled.safetensors"
    code, out, err = cli(
        "pull", "--store", url, "--out", str(pulled), "--have", str(other), "--json"
    )
    assert code == 0 and "holds no published version: pulled in full" in err
    assert json.loads(out)["path"] == [1]
