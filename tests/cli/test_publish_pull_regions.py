"""`publish --regions` in the file's mode; `pull --regions` from one region, waiting out
replication."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.regions.support import FakeReplicator, model, same, three_regions, write_regions
from wanrl_s3.cli import main
from wanrl_s3.fetch.files import load_snapshot
from wanrl_s3.format import layout
from wanrl_s3.io.safetensors_file import write_file
from wanrl_s3.regions.config import RegionsConfig


def _publish(s3_endpoint: str, tmp_path: Path, mode: str, seed: int) -> tuple[RegionsConfig, Path]:
    """Regions on the SeaweedFS server, their file, and v1 published with `publish --regions`."""
    regions = three_regions(s3_endpoint, mode)
    path = write_regions(tmp_path / "regions.toml", regions)
    src = write_file(tmp_path / "m.safetensors", model(seed))
    assert main(["publish", str(src), "--regions", str(path), "--version", "1"]) == 0
    return regions, path


def test_fanout_publish_then_pull_from_the_fastest_region(
    s3_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    regions, path = _publish(s3_endpoint, tmp_path, "fanout", 1)
    out = capsys.readouterr().out
    assert all(r.url in out for r in regions.regions)
    for r in regions.regions:
        assert r.store().exists(layout.manifest_key(1))
    got = tmp_path / "got.safetensors"
    assert main(["pull", "--regions", str(path), "--out", str(got)]) == 0
    assert "read from region " in capsys.readouterr().err
    assert same(load_snapshot(got).tensors, model(1))


def test_replicate_mode_publishes_the_primary_and_pull_waits_for_replication(
    s3_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    regions, path = _publish(s3_endpoint, tmp_path, "replicate", 2)
    primary, replica = regions.store("use1"), regions.store("euw1")
    assert [r.store().exists(layout.LATEST_KEY) for r in regions.regions] == [True, False, False]
    replicator = FakeReplicator(primary, replica, random.Random(0), adversarial=True)
    steps = replicator.steps()
    next(steps), next(steps)  # LATEST and the manifest, not the payload
    got = tmp_path / "got.safetensors"
    argv = ["pull", "--regions", str(path), "--region", "euw1", "--out", str(got)]
    assert main([*argv, "--visible-timeout-s", "0.3"]) == 2
    err = capsys.readouterr().err
    # one line: the region chosen and the wait are said only after a success
    assert err.startswith("wanrl-s3: error: v1 is still not whole") and err.count("\n") == 1
    assert not got.exists()
    for _ in steps:
        pass
    assert main(argv) == 0
    assert same(load_snapshot(got).tensors, model(2))


def test_region_without_regions_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        main(
            [
                "pull",
                "--store",
                "memory://x",
                "--region",
                "euw1",
                "--out",
                str(tmp_path / "o.safetensors"),
            ]
        )
        == 2
    )
    assert "give --regions too" in capsys.readouterr().err
    assert (
        main(
            [
                "worker",
                "--store",
                "memory://x",
                "--max-lag-versions",
                "2",
                "--out-dir",
                str(tmp_path),
            ]
        )
        == 2
    )
    assert "--max-lag-versions needs --regions" in capsys.readouterr().err
