"""HostCache: the processes of one host download each version once and map one copy."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3 import FetchCancelled, Subscriber
from wanrl_s3.errors import LocalIOError, UsageError
from wanrl_s3.fetch.host_cache import HostCache
from wanrl_s3.fetch.watch import WatchConfig, Watcher
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store
from wanrl_s3.testing.synthetic import nudge_state

MiB = 2**20

# One "rollout process": fetch v1, then v2 with v1 as its base; report what it moved.
_PROCESS = """
import json, sys
from wanrl_s3.format.hashing import digest
from wanrl_s3.errors import UsageError
from wanrl_s3.fetch.host_cache import HostCache
from wanrl_s3.store import open_store
from wanrl_s3.fetch.subscriber import Subscriber
url, endpoint, host_cache_dir = sys.argv[1:4]
cache = HostCache(host_cache_dir)
report = {}
with Subscriber(open_store(url, endpoint_url=endpoint)) as sub:
    have = None
    for version in (1, 2):
        have = cache.fetch(sub, version, have=have)
        report[version] = {
            "downloaded": have.downloaded_bytes,
            "digests": {k: digest(a.reshape(-1).view("uint8")) for k, a in have.items()},
        }
print(json.dumps(report))
"""

# Holds a version's lock until killed: a downloader that dies mid-download.
_HOLDER = """
import fcntl, sys, time
lock = open(sys.argv[1], "a+b")
fcntl.flock(lock, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(600)
"""


def model(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = MiB // 2
    return {
        f"layers.{i}.w": rng.integers(0, 2**16, n, np.uint16).view(ml_dtypes.bfloat16)
        for i in range(4)
    }


@pytest.fixture
def published(s3_url: str, s3_endpoint: str) -> tuple[str, dict[int, dict[str, np.ndarray]]]:
    """v1 full and v2 a 1 % delta of it, on SeaweedFS."""
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    v1 = model(1)
    versions = {1: v1, 2: nudge_state(v1, 0.01, seed=2)}
    publisher = Publisher(store, PublishConfig(delta="auto"))
    for version, tensors in versions.items():
        publisher.publish(tensors, version)
    return s3_url, versions


def subscriber(url: str, endpoint: str) -> Subscriber:
    return Subscriber(open_store(url, endpoint_url=endpoint))


def same(tensors: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> bool:
    return tensors.keys() == expected.keys() and all(
        tensors[k].tobytes() == expected[k].tobytes() for k in expected
    )


def test_processes_of_one_host_download_each_version_once(
    published: tuple, s3_endpoint: str, tmp_path: Path
) -> None:
    url, versions = published
    argv = [sys.executable, "-c", _PROCESS, url, s3_endpoint, str(tmp_path / "cache")]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(3)]
    reports = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    with subscriber(url, s3_endpoint) as sub:
        for version in ("1", "2"):
            downloaders = [r[version]["downloaded"] for r in reports if r[version]["downloaded"]]
            assert len(downloaders) == 1, (version, reports)
            published_hashes = {t.name: t.hash for t in sub.manifest(int(version)).tensors}
            assert all(r[version]["digests"] == published_hashes for r in reports)
    # the delta moved a fraction of the full version
    assert downloaders[0] < 0.1 * sum(a.nbytes for a in versions[2].values())


def test_a_killed_downloader_is_replaced_by_a_waiter(
    published: tuple, s3_endpoint: str, tmp_path: Path
) -> None:
    url, versions = published
    cache = HostCache(tmp_path / "cache")
    lock = cache.path(1).with_suffix(".lock")
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(lock)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
    result: dict[str, object] = {}
    with subscriber(url, s3_endpoint) as sub:
        waiter = threading.Thread(target=lambda: result.update(snap=cache.fetch(sub, 1)))
        waiter.start()
        time.sleep(0.5)
        assert waiter.is_alive() and not cache.path(1).exists()  # waiting, not downloading
        os.kill(holder.pid, signal.SIGKILL)
        holder.wait()
        waiter.join(60)
    snap = result["snap"]
    assert same(snap.tensors, versions[1]) and snap.downloaded_bytes > 0  # type: ignore[attr-defined]


def test_cancel_ends_the_wait_for_another_process(
    published: tuple, s3_endpoint: str, tmp_path: Path
) -> None:
    url, _ = published
    cache = HostCache(tmp_path / "cache")
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    with (
        open(cache.path(1).with_suffix(".lock"), "a+b") as other,  # another process's download
        subscriber(url, s3_endpoint) as sub,
    ):
        fcntl.flock(other, fcntl.LOCK_EX)
        with pytest.raises(FetchCancelled):
            cache.fetch(sub, 1, cancel=cancel)


def test_a_damaged_cached_file_is_replaced_not_installed(
    published: tuple, s3_endpoint: str, tmp_path: Path
) -> None:
    url, versions = published
    with subscriber(url, s3_endpoint) as sub:
        HostCache(tmp_path / "cache").fetch(sub, 1)
        path = HostCache(tmp_path / "cache").path(1)
        with open(path, "r+b") as f:  # flip the last byte of the last tensor
            f.seek(-1, os.SEEK_END)
            last = f.read(1)[0]
            f.seek(-1, os.SEEK_END)
            f.write(bytes([last ^ 1]))
        snap = HostCache(tmp_path / "cache").fetch(sub, 1)
    assert same(snap.tensors, versions[1]) and snap.downloaded_bytes > 0


def test_a_reader_maps_the_file_and_its_writes_stay_private(
    published: tuple, s3_endpoint: str, tmp_path: Path
) -> None:
    url, versions = published
    with subscriber(url, s3_endpoint) as sub:
        first = HostCache(tmp_path / "cache").fetch(sub, 1)
        second = HostCache(tmp_path / "cache").fetch(sub, 1)
        assert second.downloaded_bytes == 0 and second.manifest is not None
        name = next(iter(versions[1]))
        first.tensors[name].view(np.uint16)[:10] ^= 0xFFFF  # an engine scribbling on its copy
        assert same(second.tensors, versions[1])
        sub.verify_local(HostCache(tmp_path / "cache").fetch(sub, 1))  # the file is intact


def test_versions_older_than_the_window_are_removed(
    published: tuple, s3_endpoint: str, tmp_path: Path
) -> None:
    url, versions = published
    store = open_store(url, endpoint_url=s3_endpoint)
    Publisher(store, PublishConfig(delta="never")).publish(model(3), 3)
    cache = HostCache(tmp_path / "cache", keep_versions=2)
    with subscriber(url, s3_endpoint) as sub:
        held = [cache.fetch(sub, v) for v in (1, 2, 3)]
    left = sorted(p.name for p in (tmp_path / "cache").iterdir())
    kept = [f"00000000000{v}.{kind}" for v in (2, 3) for kind in ("lock", "safetensors")]
    assert left == kept
    assert same(held[0].tensors, versions[1])  # a mapping outlives its deleted file


def test_watchers_sharing_a_directory_download_once(
    published: tuple, s3_endpoint: str, tmp_path: Path
) -> None:
    url, versions = published
    config = WatchConfig(poll_interval_s=0.05, host_cache_dir=str(tmp_path / "cache"))
    subs = [subscriber(url, s3_endpoint) for _ in range(2)]
    watchers = [Watcher(sub, config).start() for sub in subs]
    snaps: list = []
    try:
        assert all(w.wait_ready(60) == 2 for w in watchers)
        results = [w.install(sink=snaps.append) for w in watchers]
    finally:
        for w, sub in zip(watchers, subs, strict=True):
            w.stop()
            sub.close()
    assert len(snaps) == 2 and all(same(s.tensors, versions[2]) for s in snaps)
    assert sorted(bool(r and r.downloaded_bytes) for r in results) == [False, True]


def test_a_bad_directory_is_a_usage_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")

    with pytest.raises(UsageError, match="host cache"):
        HostCache(tmp_path / "file" / "cache")
    with pytest.raises(UsageError, match="keep_versions"):
        HostCache(tmp_path / "ok", keep_versions=0)


@pytest.mark.parametrize("in_the_way", ["000000000001.lock", "000000000001.safetensors"])
def test_a_directory_in_place_of_a_cached_file_is_a_local_io_error(
    published: tuple, s3_endpoint: str, tmp_path: Path, in_the_way: str
) -> None:
    """Not ours to remove, and no retry gets past it: an error naming it, not a retry loop."""
    url, _ = published
    (tmp_path / "cache" / in_the_way).mkdir(parents=True)
    with subscriber(url, s3_endpoint) as sub, pytest.raises(LocalIOError) as caught:
        HostCache(tmp_path / "cache").fetch(sub, 1)
    assert in_the_way in str(caught.value) and (tmp_path / "cache" / in_the_way).is_dir()


def test_pruning_leaves_what_is_not_a_file_alone(
    published: tuple, s3_endpoint: str, tmp_path: Path
) -> None:
    cache = HostCache(tmp_path / "cache", keep_versions=1)
    for odd in ("000000000001.lock", ".000000000002.safetensors.tmp-x", "00000000000².lock"):
        (tmp_path / "cache" / odd).mkdir()
    url, versions = published
    with subscriber(url, s3_endpoint) as sub:
        assert same(cache.fetch(sub, 2).tensors, versions[2])
    assert (tmp_path / "cache" / "000000000001.lock").is_dir()
