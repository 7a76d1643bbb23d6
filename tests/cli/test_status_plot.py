"""`wanrl-s3 status --plot FILE.png` on a real (moto) bucket with a few workers' status objects.

What the plot holds is tested on the series it is drawn from (tests/fleet/test_timeline.py);
here: the command writes a PNG matplotlib reads back, and keeps its report whatever happens
to the plot.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.cli.test_status import status_object
from tests.regions.support import new_bucket_url
from wanrl_s3 import PublishConfig, Publisher, Subscriber, WorkerStatus, open_store
from wanrl_s3.cli import main
from wanrl_s3.format import layout

image = pytest.importorskip("matplotlib.image")


def test_status_plot_writes_a_png_and_keeps_the_report(
    s3_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    s3_url = new_bucket_url(s3_endpoint)  # a bucket of its own on the S3 server
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    pub = Publisher(store, PublishConfig())
    for v in (1, 2):
        pub.publish({"w": np.full(4, v, np.float32)}, v)
    with Subscriber(store) as sub:
        at = {v: sub.manifest(v).created_at_s for v in (1, 2)}
    now = time.time()
    for worker_id, region, version in (("a", "eu", 2), ("b", "eu", 1), ("c", "us", 2)):
        status = WorkerStatus.from_json(status_object(worker_id, now, version, at[version]))
        status = replace(status, region=region)
        if worker_id == "b":
            status = status.with_error("download of v2 failed: hash mismatch", at[2] + 1)
        store.put_bytes(layout.worker_status_key(worker_id), status.to_json())
    argv = ["status", "--store", s3_url, "--endpoint-url", s3_endpoint]
    png = tmp_path / "plots" / "fleet.png"  # a folder that does not exist yet
    assert main([*argv, "--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert f"plot written to {png}" in out and "3 workers; latest v2" in out
    pixels = image.imread(png)
    assert pixels.ndim == 3 and pixels.shape[0] > 400 and pixels.shape[1] > 600
    assert pixels[..., :3].std() > 0.05  # something is drawn on it
    assert main([*argv, "--json", "--plot", str(png)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["latest"] == 2 and "plot written" in captured.err
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main([*argv, "--plot", str(blocker / "x.png")]) == 2
    captured = capsys.readouterr()
    assert "3 workers; latest v2" in captured.out  # the report came first
    assert "cannot write plot" in captured.err and captured.err.count("\n") == 1
