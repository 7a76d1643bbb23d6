"""DirectoryInstaller: versions installed into a directory from Python, with no CLI.

Only the public API is used (``wanrl_s3`` and ``wanrl_s3.testing``), as a user
would: two versions land in ``DIR/model.safetensors``, the second as a delta
from the first, each renamed into place whole while a reader keeps the old
one; a restart adopts the installed file, and a file someone altered is
never adopted.
"""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

from wanrl_s3 import (
    DirectoryInstaller,
    InstallResult,
    PublishConfig,
    Publisher,
    SafetensorsFile,
    Subscriber,
    UsageError,
    WatchConfig,
    load_snapshot,
    open_store,
)
from wanrl_s3.testing import nudge_state

FAST = WatchConfig(poll_interval_s=0.02, retry_backoff_s=0.05)


def model(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        f"layers.{i}.w": rng.integers(0, 2**16, 16_384, np.uint16).view(ml_dtypes.bfloat16)
        for i in range(4)
    }


def holds(path: Path, state: dict[str, np.ndarray]) -> bool:
    tensors = load_snapshot(path).tensors
    return set(tensors) == set(state) and all(
        tensors[k].tobytes() == a.tobytes() for k, a in state.items()
    )


def install_next(installer: DirectoryInstaller) -> InstallResult:
    assert installer.wait_ready(timeout_s=30) is not None, installer.watcher.last_error
    result = installer.install()
    assert result is not None
    return result


def test_two_versions_are_installed_into_a_directory_without_the_cli(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/bucket")
    pub = Publisher(store, PublishConfig(keyframe_every=10))
    v1 = model(1)
    pub.publish(v1, 1)
    out = tmp_path / "models" / "policy"  # created by the installer
    with Subscriber(store) as sub, DirectoryInstaller(sub, out, FAST) as installer:
        assert installer.found_version is None
        first = install_next(installer)
        assert first.version == 1 and holds(installer.path, v1)
        reader = SafetensorsFile(installer.path)  # an inference server still mapping v1
        mapped = {k: reader.array(k) for k in v1}
        v2 = nudge_state(v1, 0.01, seed=2)
        pub.publish(v2, 2)
        second = install_next(installer)
        assert second.version == 2 and second.path == (2,)  # a delta from the installed v1
        assert holds(installer.path, v2) and installer.watcher.installed_version == 2
        assert all(mapped[k].tobytes() == a.tobytes() for k, a in v1.items())
        assert installer.path.stat().st_nlink == 1  # the staged name went: one copy on disk
    assert sorted(p.name for p in out.iterdir()) == ["model.safetensors"]  # staging tidied
    assert out.stat().st_mode & 0o777 == 0o755
    assert installer.path.stat().st_mode & 0o777 == 0o644  # readable by another user


def test_a_restart_adopts_the_installed_version_and_continues_by_delta(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/bucket")
    pub = Publisher(store, PublishConfig(keyframe_every=10))
    state = model(3)
    pub.publish(state, 1)
    out = tmp_path / "policy"
    with Subscriber(store) as sub:
        with DirectoryInstaller(sub, out, FAST) as installer:
            install_next(installer)
        state = nudge_state(state, 0.01, seed=4)
        pub.publish(state, 2)
        with DirectoryInstaller(sub, out, FAST) as installer:
            assert installer.found_version == 1  # verified in place, not downloaded again
            result = install_next(installer)
            assert result.version == 2 and result.path == (2,)
    assert holds(out / "model.safetensors", state)


def test_an_altered_file_in_place_is_not_adopted_and_is_replaced_whole(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/bucket")
    state = model(5)
    Publisher(store, PublishConfig()).publish(state, 1)
    out = tmp_path / "policy"
    with Subscriber(store) as sub:
        with DirectoryInstaller(sub, out, FAST) as installer:
            install_next(installer)
        data = bytearray(installer.path.read_bytes())
        data[-1] ^= 0x01  # the last byte of the last tensor
        installer.path.write_bytes(bytes(data))
        with DirectoryInstaller(sub, out, FAST) as installer:
            assert installer.found_version is None
            result = install_next(installer)
    assert result.version == 1 and result.path == (1,) and holds(out / "model.safetensors", state)


def test_misuse_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    store = open_store(f"file://{tmp_path}/bucket")
    with Subscriber(store) as sub:
        installer = DirectoryInstaller(sub, tmp_path / "policy")
        with pytest.raises(UsageError, match="start the DirectoryInstaller"):
            installer.install()
        with pytest.raises(UsageError, match="reuse_installed"):
            DirectoryInstaller(sub, tmp_path / "policy", WatchConfig(reuse_installed=True))
    assert not (tmp_path / "policy").exists()
