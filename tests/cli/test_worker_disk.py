"""`wanrl-s3 worker --out-dir`: what it keeps on disk, and a restart that resumes.

A version is staged in DIR/.versions and installed by a hard link renamed over
model.safetensors; the staged name goes once installed. So the snapshots on
disk are the installed one at rest and two while the next one downloads. Disk
held counts files with a name and files the worker still maps (an unlinked
file keeps its blocks while mapped), both by inode.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import numpy as np
import pytest

from tests.cli.test_worker import model, nudge, start_worker, stop, version_in, wait_for
from tests.tmpfs import tmpfs
from wanrl_s3.cli import main
from wanrl_s3.io.safetensors_file import SafetensorsFile
from wanrl_s3.publish.publisher import PublishConfig, Publisher
from wanrl_s3.store import open_store

MiB = 2**20


def held_inodes(out: Path, pid: int) -> set[int]:
    """The snapshot files (by inode) under ``out`` that hold disk: named and not empty
    (a lock is empty), or mapped by process ``pid`` (deleted or not)."""
    named = set()
    for path in out.rglob("*"):
        try:
            st = path.stat()
        except FileNotFoundError:  # removed while we looked
            continue
        if path.is_file() and st.st_size > 0:
            named.add(st.st_ino)
    try:
        maps = Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return named
    mapped = {
        int(fields[4])
        for fields in (line.split(maxsplit=5) for line in maps.splitlines())
        if len(fields) == 6 and fields[5].startswith(str(out))
    }
    return named | mapped


def same(path: Path, state: dict[str, np.ndarray]) -> bool:
    f = SafetensorsFile(path)
    return set(f.specs) == set(state) and all(
        f.array(k).tobytes() == a.tobytes() for k, a in state.items()
    )


class Sampler:
    """The most snapshot files held at once, sampled while a worker runs."""

    def __init__(self, out: Path, pid: int) -> None:
        self.most, self._done = 0, threading.Event()
        self._thread = threading.Thread(target=self._run, args=(out, pid), daemon=True)
        self._thread.start()

    def _run(self, out: Path, pid: int) -> None:
        while not self._done.wait(0.005):
            self.most = max(self.most, len(held_inodes(out, pid)))

    def stop(self) -> int:
        self._done.set()
        self._thread.join()
        return self.most


def test_disk_holds_the_installed_version_and_one_staged_and_a_restart_resumes(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    pub = Publisher(store, PublishConfig(keyframe_every=50))
    state = model(1, mib=4)
    pub.publish(state, 1)
    out = tmp_path / "w"
    model_file = out / "model.safetensors"
    w = start_worker(s3_url, s3_endpoint, out, "w-disk")
    try:
        wait_for(lambda: version_in(out) == 1)
        sampler = Sampler(out, w.pid)
        reader = SafetensorsFile(model_file)  # an inference server mapping v1
        v1_bytes = {k: reader.array(k) for k in state}
        for v in (2, 3, 4, 5):
            state = nudge(state, v)
            pub.publish(state, v)
            wait_for(lambda v=v: version_in(out) == v)
            # at rest: model.safetensors is the only copy, and it is the only name it has
            wait_for(lambda: held_inodes(out, w.pid) == {model_file.stat().st_ino}, 10)
            assert model_file.stat().st_nlink == 1 and same(model_file, state)
        assert sampler.stop() <= 2  # at peak: the installed file and the one being built
        assert all(v1_bytes[k].tobytes() == a.tobytes() for k, a in model(1, mib=4).items())
    finally:
        log = stop(w)
    assert "by copy" not in log and "installed v5" in log
    # a killed worker's leftovers: a staged file already installed, a half-made temporary
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]  # tidied on exit
    (out / ".versions").mkdir()
    shutil.copy(model_file, out / ".versions" / "000000000005.safetensors")
    (out / ".model.safetensors.tmp-dead").write_bytes(b"x" * 4096)
    state = nudge(state, 6)
    pub.publish(state, 6)
    w = start_worker(s3_url, s3_endpoint, out, "w-disk")
    try:
        wait_for(lambda: version_in(out) == 6)
        wait_for(lambda: held_inodes(out, w.pid) == {model_file.stat().st_ino}, 10)
    finally:
        log = stop(w)
    assert "holding v5 (found in" in log  # model.safetensors verified, not downloaded again
    assert "installed v6: downloaded" in log and "(the payload of v6)" in log  # a delta from v5
    assert same(model_file, state) and model_file.stat().st_nlink == 1
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]


def test_a_host_cache_dir_on_another_file_system_installs_by_copy_and_says_so(
    s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    store = open_store(s3_url, endpoint_url=s3_endpoint)
    pub = Publisher(store, PublishConfig())
    state = model(2, mib=2)
    pub.publish(state, 1)
    out = tmp_path / "w"
    with tmpfs(tmp_path / "cache", size_bytes=32 * MiB) as cache:
        w = start_worker(s3_url, s3_endpoint, out, "w-copy", "--host-cache-dir", str(cache),
                         "--keep-versions", "1")  # fmt: skip
        try:
            wait_for(lambda: version_in(out) == 1)
            for v in (2, 3):
                state = nudge(state, v)
                pub.publish(state, v)
                wait_for(lambda v=v: version_in(out) == v)
        finally:
            log = stop(w)
        cached = sorted(p.name for p in cache.glob("*.safetensors"))
        assert cached == ["000000000003.safetensors"]  # --keep-versions 1
        assert (cache / cached[0]).stat().st_nlink == 1  # the cached file, not linked
    # said once, at start, with why and what to do; not again at each install
    assert log.count("installs copy each version") == 1 and "by copy (said once)" not in log
    assert "a hard link cannot cross file systems" in log and "on tmpfs at" in log
    assert same(out / "model.safetensors", state)
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]


def test_keep_versions_without_a_host_cache_dir_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["worker", "--store", f"file://{tmp_path}/s", "--out-dir", str(tmp_path / "w"),
            "--keep-versions", "2"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--keep-versions needs --host-cache-dir" in err


@pytest.mark.parametrize("in_the_way", ["000000000001.lock", "000000000001.safetensors"])
def test_a_directory_in_place_of_a_cached_file_stops_the_worker_with_one_line(
    s3_url: str, s3_endpoint: str, tmp_path: Path, in_the_way: str
) -> None:
    """Retrying cannot get past it: the worker exits 2 naming it, not a retry loop."""
    Publisher(open_store(s3_url, endpoint_url=s3_endpoint), PublishConfig()).publish(model(3), 1)
    (tmp_path / "cache" / in_the_way).mkdir(parents=True)
    w = start_worker(s3_url, s3_endpoint, tmp_path / "w", "w-dir", "--host-cache-dir",
                     str(tmp_path / "cache"))  # fmt: skip
    try:
        _, err = w.communicate(timeout=60)
    finally:
        w.kill()
    errors = [line for line in err.splitlines() if " wanrl-s3 worker: " not in line]
    assert w.returncode == 2 and len(errors) == 1, err
    assert errors[0].startswith("wanrl-s3: error: ") and in_the_way in errors[0]
    assert version_in(tmp_path / "w") is None
