"""`wanrl-s3 worker` processes against the SeaweedFS server: converge, survive kills, report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3.cli import main
from wanrl_s3.fetch.files import load_snapshot
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store
from wanrl_s3.testing import Fault, FaultProxy, Rule, worker_command
from wanrl_s3.testing.synthetic import nudge_state

MiB = 2**20


def model(seed: int, mib: float = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(mib * MiB) // 8
    return {
        f"layers.{i}.w": rng.integers(0, 2**16, n, np.uint16).view(ml_dtypes.bfloat16)
        for i in range(4)
    }


def nudge(state: dict[str, np.ndarray], seed: int) -> dict[str, np.ndarray]:
    return nudge_state(state, 0.01, seed=seed)


def start_worker(
    url: str, endpoint: str, out: Path, worker_id: str, *extra: str
) -> subprocess.Popen[str]:
    return subprocess.Popen(  # the worker creates ``out`` if missing
        worker_command(url, endpoint, str(out), worker_id, 0.1, *extra),
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ},
    )


def version_in(out: Path) -> int | None:
    path = out / "model.safetensors"
    return load_snapshot(path).version if path.exists() else None


def wait_for(predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


def test_workers_started_apart_converge_and_report(
    s3_url: str, s3_endpoint: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    pub = Publisher(store, PublishConfig(keyframe_every=3))
    state = model(1)
    pub.publish(state, 1)
    marker = tmp_path / "hook.log"
    hook = f"echo $WANRL_S3_VERSION >> {marker}"
    a = start_worker(s3_url, s3_endpoint, tmp_path / "a", "worker-a", "--on-install", hook)
    wait_for(lambda: version_in(tmp_path / "a") == 1)
    for v in (2, 3):
        state = nudge(state, v)
        pub.publish(state, v)
    b = start_worker(s3_url, s3_endpoint, tmp_path / "b", "worker-b")  # joins at v3
    for v in (4, 5):
        state = nudge(state, v)
        pub.publish(state, v)
    c = start_worker(s3_url, s3_endpoint, tmp_path / "c", "worker-c")  # joins at v5
    try:
        for d in "abc":
            wait_for(lambda d=d: version_in(tmp_path / d) == 5)
    finally:
        logs = [stop(p) for p in (a, b, c)]
    for d in "abc":
        snap = load_snapshot(tmp_path / d / "model.safetensors")
        assert all(snap.tensors[k].tobytes() == state[k].tobytes() for k in state)
    assert "installed v5" in logs[0] and "stopped" in logs[0]
    assert marker.read_text().split()[-1] == "5"  # the hook ran with the version
    assert main(["status", "--store", s3_url, "--endpoint-url", s3_endpoint, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["latest"] == 5 and report["lagging"] == []
    v5 = next(v for v in report["versions"] if v["version"] == 5)
    # v5's fleet is the workers running when it was published: b and c were still starting.
    assert v5["installed"] == v5["workers"] == 1 and v5["members"] == ["worker-a"]
    assert v5["t_bcast_s"] is not None and v5["t_bcast_s"] >= 0
    assert {w["installed_version"] for w in report["workers"]} == {5}


def test_worker_killed_mid_download_restarts_and_finishes(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    pub = Publisher(store, PublishConfig(delta="never"))
    pub.publish(model(1, mib=0.5), 1)
    out = tmp_path / "w"
    # v2's payload reaches the first worker at a trickle, so it is surely mid-download when
    # killed (straight from SeaweedFS, 96 MiB can land in the time it takes to send a signal)
    slow_v2 = Rule(Fault.TRICKLE, method="GET", key=r"/v/0*2/(?!manifest)")
    with FaultProxy(s3_endpoint, rules=[slow_v2], trickle_max_s=120.0) as proxy:
        w = start_worker(s3_url, proxy.url, out, "w1", "--concurrency", "2")
        wait_for(lambda: version_in(out) == 1)
        big = model(2, mib=96)
        pub.publish(big, 2)
        line = ""
        while "downloading v2" not in line:
            line = w.stderr.readline()
            assert line, "worker exited"
        wait_for(lambda: proxy.counts[Fault.TRICKLE] > 0)
        w.send_signal(signal.SIGKILL)
        w.wait()
    assert version_in(out) == 1  # the installed file is still whole and still v1
    w = start_worker(s3_url, s3_endpoint, out, "w1")
    try:
        wait_for(lambda: version_in(out) == 2, timeout_s=120)
    finally:
        stop(w)
    snap = load_snapshot(out / "model.safetensors")
    assert all(snap.tensors[k].tobytes() == big[k].tobytes() for k in big)
    # the staging folder goes on exit once it holds no version (no leftover, no lock)
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]


def test_worker_creates_a_missing_out_dir(s3_url: str, s3_endpoint: str, tmp_path: Path) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    Publisher(store, PublishConfig()).publish(model(1, mib=0.25), 1)
    out = tmp_path / "models" / "policy"  # as docs/operations.md writes it: nothing created first
    done = subprocess.run(
        worker_command(s3_url, s3_endpoint, str(out), "w-new", 0.1, "--exit-after", "1"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert version_in(out) == 1 and out.stat().st_mode & 0o777 == 0o755
    assert "holding no version yet" in done.stderr and "installed v1: downloaded" in done.stderr


def test_workers_with_a_host_cache_dir_download_each_version_once(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    pub = Publisher(store, PublishConfig())
    state = model(1)
    pub.publish(state, 1)
    cache = ("--host-cache-dir", str(tmp_path / "cache"))
    workers = [start_worker(s3_url, s3_endpoint, tmp_path / d, d, *cache) for d in "ab"]
    try:
        for v in (2, 3):
            for d in "ab":
                wait_for(lambda d=d, v=v: version_in(tmp_path / d) == v - 1)
            state = nudge(state, v)
            pub.publish(state, v)
        for d in "ab":
            wait_for(lambda d=d: version_in(tmp_path / d) == 3)
    finally:
        logs = [stop(p) for p in workers]
    for d in "ab":
        snap = load_snapshot(tmp_path / d / "model.safetensors")
        assert all(snap.tensors[k].tobytes() == state[k].tobytes() for k in state)
    for v in (1, 2, 3):  # each version: one worker downloaded it, the other mapped the file
        mapped = [log.count(f"v{v} ready: nothing downloaded") for log in logs]
        downloaded = [log.count(f"v{v} ready: downloaded") for log in logs]
        assert sorted(mapped) == [0, 1] and sorted(downloaded) == [0, 1], (v, logs)
    cached = tmp_path / "cache" / "000000000003.safetensors"
    assert cached.stat().st_mode & 0o777 == 0o644  # other users (an inference server) can read
    assert (tmp_path / "cache").stat().st_mode & 0o777 == 0o755
    assert not any("vNone" in log or "via (" in log for log in logs)
