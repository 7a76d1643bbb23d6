"""`wanrl-s3 worker --regions`: a worker whose region stalls falls back, and says so."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

from tests.regions.support import (
    SMALL,
    FakeReplicator,
    model,
    nudge,
    same,
    three_regions,
    wait_for,
    write_regions,
)
from wanrl_s3.fetch.files import load_snapshot
from wanrl_s3.fleet.status import WorkerStatus
from wanrl_s3.format import layout
from wanrl_s3.publish.publisher import Publisher


def test_worker_falls_back_from_a_stalled_region_and_reports_it(
    s3_endpoint: str, tmp_path: Path
) -> None:
    regions = three_regions(s3_endpoint, "replicate")
    path = write_regions(tmp_path / "regions.toml", regions)
    primary, home = regions.store("use1"), regions.store("euw1")
    pub = Publisher(primary, SMALL)
    state = model(1)
    pub.publish(state, 1)
    FakeReplicator(primary, home, random.Random(0)).run()
    out = tmp_path / "w"
    out.mkdir()
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "wanrl_s3.cli",
            "worker",
            "--regions",
            str(path),
            "--region",
            "euw1",
            "--max-lag-versions",
            "1",
            "--out-dir",
            str(out),
            "--worker-id",
            "w1",
            "--poll-interval-s",
            "0.1",
        ],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )

    def installed() -> int | None:
        model_file = out / "model.safetensors"
        return load_snapshot(model_file).version if model_file.exists() else None

    try:
        wait_for(lambda: installed() == 1)
        for v in (2, 3):  # euw1's replication has stalled
            state = nudge(state, v)
            pub.publish(state, v)
        wait_for(lambda: installed() == 3)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert "(region euw1)" in err
    assert (
        "region euw1 lags the primary use1 by 2 versions (limit 1): reading from region use1" in err
    )
    assert same(load_snapshot(out / "model.safetensors").tensors, state)
    status = WorkerStatus.from_json(home.get_bytes(layout.worker_status_key("w1")))
    assert status.region == "use1" and status.installed_version == 3
    assert status.fallback is not None and "lags the primary" in status.fallback
