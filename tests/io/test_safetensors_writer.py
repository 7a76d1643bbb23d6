"""Writing .safetensors files where the disk says no: one error, no leftovers, the old file kept.

The writer reserves the file's blocks before it maps it, so a full disk, a
read-only file system or a path that cannot be a file is a
:class:`~wanrl_s3.errors.LocalIOError` (or a UsageError) before any byte is
written through the map; without the reservation a full disk is a SIGBUS that
kills the process. Full and read-only disks are real tmpfs mounts.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from tests.tmpfs import tmpfs
from wanrl_s3.errors import LocalIOError, UsageError
from wanrl_s3.io.safetensors_file import (
    SafetensorsFile,
    SafetensorsWriter,
    TensorSpec,
    write_file,
)

KiB = 2**10


def tensors(nbytes: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w": rng.integers(0, 255, nbytes, np.uint8), "b": np.arange(16, dtype=np.float32)}


def leftovers(directory: Path) -> list[str]:
    return [p.name for p in directory.iterdir() if ".tmp-" in p.name]


@pytest.fixture
def tiny(tmp_path: Path):
    with tmpfs(tmp_path / "tiny", size_bytes=1024 * KiB) as mount:
        yield mount


@pytest.mark.parametrize("posix_fallocate", [True, False], ids=["fallocate", "zeros"])
def test_a_full_disk_is_one_error_and_the_old_file_stays(
    tiny: Path, monkeypatch: pytest.MonkeyPatch, posix_fallocate: bool
) -> None:
    if not posix_fallocate:  # platforms and file systems without it: zeros written out
        monkeypatch.delattr(os, "posix_fallocate", raising=False)
    target = tiny / "model.safetensors"
    old = tensors(600 * KiB, seed=1)
    write_file(target, old)
    with pytest.raises(LocalIOError) as caught:
        write_file(target, tensors(600 * KiB, seed=2))  # two copies do not fit in 1 MiB
    assert caught.value.errno == errno.ENOSPC and caught.value.exit_code == 2
    assert str(target) in str(caught.value) and "No space left" in str(caught.value)
    assert leftovers(tiny) == []
    assert {n: a.tobytes() for n, a in SafetensorsFile(target).items()} == {
        n: a.tobytes() for n, a in old.items()
    }


def test_a_read_only_file_system_is_one_error(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", read_only=True) as mount:
        with pytest.raises(LocalIOError) as caught:
            write_file(mount / "model.safetensors", tensors(KiB))
        assert caught.value.errno == errno.EROFS
        assert os.listdir(mount) == []


@pytest.mark.parametrize(
    "make_target, message",
    [
        (lambda tmp: tmp, "is a directory"),
        (lambda tmp: "", "empty"),
        (lambda tmp: tmp / "missing" / "x.safetensors", "not a directory"),
    ],
    ids=["a-directory", "empty", "missing-parent"],
)
def test_a_target_that_cannot_be_a_file_is_a_usage_error(
    tmp_path: Path, make_target: object, message: str
) -> None:
    before = sorted(os.listdir(tmp_path))
    with pytest.raises(UsageError, match=message):
        write_file(make_target(tmp_path), tensors(KiB))  # type: ignore[operator]
    assert sorted(os.listdir(tmp_path)) == before


def test_proc_refuses_the_file_and_nothing_is_left(tmp_path: Path) -> None:
    with pytest.raises(LocalIOError, match="cannot create a file in /proc"):
        write_file("/proc/model.safetensors", tensors(KiB))


def test_the_blocks_are_reserved_before_anything_is_mapped(tmp_path: Path) -> None:
    """Not a sparse file: its blocks exist before the first byte is written through the map."""
    specs = [TensorSpec("w", "U8", (256 * KiB,))]
    with SafetensorsWriter(tmp_path / "m.safetensors", specs) as writer:
        (tmp,) = [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
        assert os.stat(tmp).st_blocks * 512 >= writer.total_bytes
        writer.abort()
