"""A real, tiny tmpfs for the tests that need a full or read-only file system.

Mounting needs root (or CAP_SYS_ADMIN); where that is refused the test is
skipped with the reason, never faked.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(path: Path, *, size_bytes: int = 2**20, read_only: bool = False) -> Iterator[Path]:
    """Mount a ``size_bytes`` tmpfs on ``path`` (created) for the block; unmounted after."""
    path.mkdir(parents=True, exist_ok=True)
    options = f"size={size_bytes}" + (",ro" if read_only else "")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)
