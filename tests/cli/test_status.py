"""`wanrl-s3 status` on a real S3 bucket: header, legend, recorded figures, expiry, pruning."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace

import numpy as np
import pytest

from wanrl_s3 import (
    FailureSpan,
    InstallResult,
    PublishConfig,
    Publisher,
    Subscriber,
    WorkerStatus,
    open_store,
)
from wanrl_s3.cli import main
from wanrl_s3.fleet.broadcast_times import record_key
from wanrl_s3.format import layout


def status_object(worker_id: str, updated_at_s: float, version: int | None, published_s: float):
    installs = ()
    if version is not None:
        installs = (
            InstallResult(
                version=version, tensors=1, path=(version,), downloaded_bytes=10,
                published_at_s=published_s, seen_at_s=published_s + 0.2,
                ready_at_s=published_s + 1.0, installed_at_s=published_s + 1.5,
                download_s=0.5, verify_s=0.1, apply_s=0.1,
            ).to_dict(),
        )  # fmt: skip
    return WorkerStatus(
        worker_id=worker_id,
        installed_version=version,
        installs=installs,
        started_at_s=published_s - 100,
        updated_at_s=updated_at_s,
    ).to_json()


def test_status_explains_itself_records_and_prunes(
    s3_url: str, s3_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    Publisher(store, PublishConfig()).publish({"w": np.zeros(4, np.float32)}, 1)
    with Subscriber(store) as sub:
        at = sub.manifest(1).created_at_s
    now = time.time()
    store.put_bytes(layout.worker_status_key("fresh"), status_object("fresh", now, 1, at))
    store.put_bytes(layout.worker_status_key("gone"), status_object("gone", now - 3600, None, at))
    argv = ["status", "--store", s3_url, "--endpoint-url", s3_endpoint]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "1 worker, 1 expired; latest v1" in out
    assert "seen s: median time from the commit" in out and "* = recorded" in out
    header = next(line for line in out.splitlines() if "worker" in line and "region" in line)
    assert header.split()[:5] == ["worker", "region", "version", "status", "s"]
    assert any(line.split()[:1] == ["gone"] and "EXPIRED" in line for line in out.splitlines())
    assert "LAGGING" not in out
    assert store.exists(record_key(1, 0.9))  # the fresh worker measured v1: recorded
    assert main([*argv, "--prune"]) == 0
    out = capsys.readouterr().out
    v1 = next(line for line in out.splitlines() if line.split()[:2] == ["1", "1/1"])
    assert "*" in v1  # read back from its record
    assert not store.exists(layout.worker_status_key("gone"))
    assert main([*argv, "--fraction", "1.5"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_status_shows_failures_that_ended_before_it_was_read(
    s3_url: str, s3_endpoint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """An outage of the bucket ended and an install cleared ``last_error``: the stretches
    of failures the worker kept are what tells the operator it happened."""
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    Publisher(store, PublishConfig()).publish({"w": np.zeros(4, np.float32)}, 1)
    with Subscriber(store) as sub:
        at = sub.manifest(1).created_at_s
    now = time.time()
    spans = (
        FailureSpan(now - 300, now - 290, 4, "reading LATEST failed: reset", now - 289),
        FailureSpan(now - 40.0, now - 33.5, 3, "reading LATEST failed: 500", now - 32.0),
    )
    status = WorkerStatus.from_json(status_object("w1", now, 1, at))
    store.put_bytes(layout.worker_status_key("w1"), replace(status, failures=spans).to_json())
    argv = ["status", "--store", s3_url, "--endpoint-url", s3_endpoint, "--no-record"]
    assert main(argv) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["w1"])
    assert "failures: 7 failures in 2 stretches, the last 8.0 s long, ended " in row
    ago = re.search(r"ended (\d+) s ago: ", row)
    assert ago and 32 <= int(ago.group(1)) < 32 + 60  # however slow this machine is today
    assert row.endswith("reading LATEST failed: 500") and "last error" not in row
    assert main([*argv, "--json"]) == 0
    (worker,) = json.loads(capsys.readouterr().out)["workers"]
    assert [FailureSpan.from_dict(f) for f in worker["failures"]] == list(spans)
