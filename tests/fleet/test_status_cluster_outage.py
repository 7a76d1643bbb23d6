"""A worker reading a SeaweedFS cluster whose filer crashes: the outage shows in `wanrl-s3 status`.

While the filer is down the worker cannot read LATEST nor write its status object;
once it is back the worker installs the next version, which clears ``last_error``.
What tells the operator that the outage happened is the stretch of failures the
worker kept and wrote once it could: this test reads it the way an operator does,
with ``wanrl-s3 status`` (table and ``--json``), from a real `wanrl-s3 worker`
process on a real cluster (a master, three volume servers keeping two copies, a
filer, the S3 gateway; :func:`wanrl_s3.testing.local_seaweed_cluster`).
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.cli.test_worker import model, nudge, version_in, wait_for
from tests.metrics.scrape import scrape
from wanrl_s3 import FailureSpan, PublishConfig, Publisher, open_store, read_statuses
from wanrl_s3.cli import main
from wanrl_s3.fetch.files import load_snapshot
from wanrl_s3.testing import free_port, local_seaweed_cluster, make_bucket, worker_command

BOUND_S = 120.0  # generous: this machine is shared and loaded


def failures_counted(metrics_url: str) -> float:
    """The worker's ``wanrl_s3_worker_failures_total``, all kinds summed."""
    samples = scrape(metrics_url)
    return sum(v for (name, _), v in samples.items() if name == "wanrl_s3_worker_failures_total")


def test_a_filer_crash_under_a_running_worker_shows_as_a_stretch_in_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with local_seaweed_cluster() as cluster:
        endpoint = cluster.endpoint_url
        url = f"s3://{make_bucket(endpoint)}/run"
        publisher = Publisher(open_store(url, endpoint_url=endpoint), PublishConfig())
        first = model(1)
        publisher.publish(first, 1)
        out, log, port = tmp_path / "out", tmp_path / "worker.log", free_port()
        metrics = f"http://127.0.0.1:{port}/metrics"
        argv = worker_command(url, endpoint, str(out), "w1", 0.1, "--metrics-port", str(port),
                              "--metrics-addr", "127.0.0.1")  # fmt: skip
        with log.open("w") as err:
            proc = subprocess.Popen(argv, stderr=err)
        try:
            wait_for(lambda: version_in(out) == 1, BOUND_S)
            before = failures_counted(metrics)
            down_at = time.time()
            cluster.kill("filer")
            wait_for(lambda: failures_counted(metrics) > before, BOUND_S)  # it saw the outage
            cluster.start("filer")
            back_at = time.time()
            second = nudge(first, 2)
            publisher.publish(second, 2)
            wait_for(lambda: version_in(out) == 2, BOUND_S)
            store = open_store(url, endpoint_url=endpoint)
            wait_for(lambda: any(s.failures for s in read_statuses(store)), BOUND_S)
            argv = ["status", "--store", url, "--endpoint-url", endpoint, "--no-record"]
            assert main(argv) == 0
            table = capsys.readouterr().out
            assert main([*argv, "--json"]) == 0
            shown = json.loads(capsys.readouterr().out)
        finally:
            proc.send_signal(signal.SIGTERM)
            code = proc.wait(timeout=60)
        installed = load_snapshot(out / "model.safetensors")
    assert code == 0 and "Traceback" not in log.read_text()
    assert installed.version == 2  # bit-exact: the second version, whole
    assert {k: np.asarray(v).tobytes() for k, v in installed.tensors.items()} == {
        k: v.tobytes() for k, v in second.items()
    }
    (worker,) = shown["workers"]
    assert worker["installed_version"] == 2 and worker["last_error"] is None  # cleared
    spans = [FailureSpan.from_dict(f) for f in worker["failures"]]
    during = [s for s in spans if s.overlaps(down_at, back_at)]
    assert during and all(s.ended_at_s is not None for s in during)  # over, and kept
    assert sum(s.count for s in during) >= 1
    row = next(line for line in table.splitlines() if line.split()[:1] == ["w1"])
    assert re.search(r"failures: \d+ failures? in \d+ stretch(es)?, the last ", row), row
    assert not list(out.glob("*.tmp-*"))  # nothing partly installed
