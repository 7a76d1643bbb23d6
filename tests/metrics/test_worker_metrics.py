"""A running `wanrl-s3 worker --metrics-port` scraped over HTTP and parsed by prometheus-client.

A real worker process against the moto server: after it installs a version the
scrape says which, how far behind LATEST, and what the download cost; after an
injected failure (a flipped payload byte) the failure is counted by kind.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_worker import model, nudge, start_worker, stop, version_in, wait_for
from tests.cli.test_worker_failures import flip_a_byte
from tests.metrics.scrape import metrics_url, scrape_until, value
from tests.regions.support import new_bucket_url
from wanrl_s3.cli import main
from wanrl_s3.metrics.worker import FAILURE_KINDS
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store

W = "wanrl_s3_worker_"


def test_a_running_worker_exports_its_version_its_costs_and_its_failures(
    s3_endpoint: str, tmp_path: Path
) -> None:
    s3_url = new_bucket_url(s3_endpoint)  # a bucket of its own on the S3 server
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    pub = Publisher(store, PublishConfig(keyframe_every=10))
    state = model(1)
    first = pub.publish(state, 1)
    out = tmp_path / "w"
    flags = ("--metrics-port", "0", "--metrics-addr", "127.0.0.1")
    proc = start_worker(s3_url, s3_endpoint, out, "w-metrics", *flags)
    lines: list[str] = []
    try:
        url = metrics_url(proc, lines)
        wait_for(lambda: version_in(out) == 1)
        s = scrape_until(url, lambda s: value(s, W + "install_seconds_count") == 1)
        assert value(s, W + "installed_version") == 1 == value(s, W + "latest_version")
        assert value(s, W + "versions_behind") == 0
        assert value(s, W + "download_bytes_count") == 1
        assert value(s, W + "download_bytes_sum") == first.stored_bytes > 0  # a keyframe, whole
        assert value(s, W + "download_seconds_count") == value(s, W + "verify_seconds_count") == 1
        assert (value(s, W + "poll_seconds_count") or 0) >= 1
        assert all(value(s, W + "failures_total", kind=k) == 0 for k in FAILURE_KINDS)
        assert value(s, W + "failing") == 0
        assert value(s, W + "last_error_age_seconds") is None  # no failure yet: no sample
        assert (value(s, "process_resident_memory_bytes") or 0) > 0  # the process collector

        state = nudge(state, 2)
        pub.publish(state, 2)
        flip_a_byte(store, 2)  # v2 never verifies: the download fails, and is retried
        s = scrape_until(url, lambda s: (value(s, W + "failures_total", kind="download") or 0) >= 1)
        assert value(s, W + "failing") == 1
        assert 0 <= (value(s, W + "last_error_age_seconds") or -1) < 60
        assert value(s, W + "latest_version") == 2 and value(s, W + "versions_behind") == 1
        assert value(s, W + "installed_version") == 1  # the corrupt version is not installed
        assert value(s, W + "failures_total", kind="poll") == 0
    finally:
        err = "".join(lines) + stop(proc)
    assert "metrics at http://127.0.0.1:" in err


def test_metrics_flags_fail_in_one_line_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["worker", "--store", f"file://{tmp_path}/b/r", "--out-dir", str(tmp_path / "w")]
    assert main([*argv, "--metrics-addr", "127.0.0.1"]) == 2
    assert "--metrics-addr needs --metrics-port" in capsys.readouterr().err
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main([*argv, "--metrics-port", str(port), "--metrics-addr", "127.0.0.1"]) == 2
    err = capsys.readouterr().err
    assert f"cannot serve metrics on 127.0.0.1:{port}" in err and err.count("\n") == 1
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # not installed
    assert main([*argv, "--metrics-port", "0"]) == 2
    err = capsys.readouterr().err
    assert "needs prometheus-client: pip install 'wanrl-s3[metrics]'" in err
    assert err.count("\n") == 1


def test_without_metrics_nothing_imports_prometheus_client() -> None:
    code = (
        "import sys, wanrl_s3, wanrl_s3.cli.app, wanrl_s3.cli.worker, wanrl_s3.cli.relay\n"
        "wanrl_s3.WorkerMetrics, wanrl_s3.TrainerMetrics, wanrl_s3.DirectoryInstaller\n"
        "print('prometheus_client' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "False"
