"""`wanrl-s3 worker` when things go wrong: it keeps running, logs, and says so in its status.

Real `wanrl-s3 worker` processes against the SeaweedFS server: a corrupt payload, a
deeply nested LATEST, an out dir that disappears. The status object
(workers/<id>.json) must show the failure within seconds, clear it on the next
install, and the worker must exit with one line and its exit code only when it
cannot go on.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from tests.cli.test_worker import model, nudge, start_worker, stop, version_in, wait_for
from wanrl_s3.cli import main
from wanrl_s3.fleet.status import WorkerStatus
from wanrl_s3.format import layout
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import ObjectStore, open_store


@pytest.fixture
def store(s3_url: str, s3_endpoint: str) -> ObjectStore:
    return open_store(s3_url, endpoint_url=s3_endpoint)


def status_of(store: ObjectStore, worker_id: str) -> WorkerStatus | None:
    key = layout.worker_status_key(worker_id)
    return WorkerStatus.from_json(store.get_bytes(key)) if store.exists(key) else None


def error_of(store: ObjectStore, worker_id: str) -> str:
    status = status_of(store, worker_id)
    return "" if status is None else status.last_error or ""


def flip_a_byte(store: ObjectStore, version: int) -> None:
    key = next(
        o.key for o in store.list(layout.version_dir(version) + "/") if o.key.endswith(".bin")
    )
    data = bytearray(store.get_bytes(key))
    data[len(data) // 2] ^= 0x40
    store.put_bytes(key, bytes(data))


def test_a_corrupt_payload_shows_in_the_status_and_clears_on_the_next_install(
    s3_url: str, s3_endpoint: str, store: ObjectStore, tmp_path: Path
) -> None:
    pub = Publisher(store, PublishConfig(keyframe_every=10))
    state = model(1)
    pub.publish(state, 1)
    state = nudge(state, 2)
    pub.publish(state, 2)  # a delta on v1
    flip_a_byte(store, 2)
    out = tmp_path / "models" / "policy"  # does not exist yet: the worker creates it
    started_s = time.time()
    w = start_worker(s3_url, s3_endpoint, out, "w-corrupt")
    try:
        wait_for(lambda: "v2" in error_of(store, "w-corrupt"), timeout_s=20)
        status = status_of(store, "w-corrupt")
        assert status is not None and status.installed_version is None
        assert status.updated_at_s >= started_s and status.last_error_at_s is not None
        assert status.last_error_at_s >= started_s
        assert "does not match" in (status.last_error or "")
        assert w.poll() is None  # still running
        state = nudge(state, 3)
        Publisher(store, PublishConfig(delta="never")).publish(state, 3)  # a good keyframe
        wait_for(lambda: version_in(out) == 3)
        wait_for(
            lambda: (
                (status_of(store, "w-corrupt") or WorkerStatus(worker_id="")).installed_version == 3
            )
        )
    finally:
        log = stop(w)
    status = status_of(store, "w-corrupt")
    assert status is not None and status.last_error is None and status.last_error_at_s is None
    snap_file = out / "model.safetensors"
    assert snap_file.stat().st_mode & 0o777 == 0o644  # an inference server may run as another user
    assert out.stat().st_mode & 0o777 == 0o755
    assert "does not match" in log  # the failure is in the log too, one line each
    assert "Traceback" not in log and "None" not in log and "via (" not in log


def holding_v1(
    s3_url: str, endpoint: str, store: ObjectStore, out: Path, worker_id: str
) -> tuple[Publisher, dict[str, np.ndarray], subprocess.Popen[str]]:
    """A publisher that has published v1, and a worker process that has installed it."""
    pub = Publisher(store, PublishConfig())
    state = model(len(worker_id))
    pub.publish(state, 1)
    w = start_worker(s3_url, endpoint, out, worker_id)
    try:
        wait_for(lambda: version_in(out) == 1)
    except BaseException:
        w.kill()
        w.communicate()
        raise
    return pub, state, w


@pytest.mark.slow  # the watcher-level twin is in tests/fetch/test_watch_liveness.py
def test_a_deeply_nested_latest_is_reported_then_the_repaired_store_is_followed(
    s3_url: str, s3_endpoint: str, store: ObjectStore, tmp_path: Path
) -> None:
    out = tmp_path / "w"
    pub, state, w = holding_v1(s3_url, s3_endpoint, store, out, "w-nested")
    try:
        store.put_bytes(layout.LATEST_KEY, b"[" * 30_000 + b"]" * 30_000)
        wait_for(lambda: "LATEST" in error_of(store, "w-nested"), timeout_s=20)
        assert "nests deeper" in error_of(store, "w-nested")
        time.sleep(2)  # a few seconds of a broken pointer
        state = nudge(state, 2)
        pub.publish(state, 2)  # repairs LATEST
        wait_for(lambda: version_in(out) == 2)
        wait_for(lambda: not error_of(store, "w-nested"))
    finally:
        log = stop(w)
    assert "nests deeper" in log and "RecursionError" not in log and "Traceback" not in log


def test_a_worker_that_cannot_install_exits_with_one_line(
    s3_url: str, s3_endpoint: str, store: ObjectStore, tmp_path: Path
) -> None:
    out = tmp_path / "w"
    pub, state, w = holding_v1(s3_url, s3_endpoint, store, out, "w-gone")
    try:
        shutil.rmtree(out)  # the inference server's directory is gone
        pub.publish(nudge(state, 2), 2)
        _, err = w.communicate(timeout=30)
    finally:
        if w.poll() is None:
            w.send_signal(signal.SIGKILL)
    assert w.returncode == 2, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("wanrl-s3: error: ") and str(out) in last
    assert "Traceback" not in err
    assert "v2" in error_of(store, "w-gone")  # the status says why it stopped


def test_a_path_that_is_a_file_is_refused_as_out_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    assert main(["worker", "--store", "memory://x", "--out-dir", str(not_a_dir)]) == 2
    err = capsys.readouterr().err
    assert "not a directory" in err and len(err.strip().splitlines()) == 1
