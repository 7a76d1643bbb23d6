"""The host cache: the processes of one host fetch each version once, through one directory.

Eight rollout processes on one 8-GPU host would otherwise each download every
version over the host's one WAN link (eight times the traffic, eight times the
egress bill) and each keep their own copy in RAM. With a host cache, the first
process that wants version v takes an exclusive lock on ``<dir>/<v>.lock``
(``flock``), pulls v into ``<dir>/<v>.safetensors`` with
:func:`~wanrl_s3.pull_to_file` (written beside the name, renamed into place
only after every tensor verified), and releases the lock. The others wait for
the lock, find the file, check it against the manifest's hashes and map it; a
process that finds the file already in place checks it without locking.

- The kernel drops a lock when its holder dies, so a killed downloader's place is
  taken by the next waiter; its half-written ``.tmp-`` file is never read.
- On a tmpfs (``/dev/shm``, the default in the integrations) the mapped pages are
  the same memory in every process: one copy of the policy per host, not per GPU.
- Files of versions older than the newest ``keep_versions`` are deleted; a process
  still mapping one keeps its pages until it lets go.

Trust: every process on the host that can write the directory can write the
cached files, but none can make another install them unchecked: readers
verify each tensor's BLAKE3 against the manifest (which signatures cover) and
replace a file that fails.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import FetchCancelled, LocalIOError, UsageError, VerificationError
from ..format import layout
from .files import load_snapshot, pull_to_file
from .subscriber import Snapshot, Subscriber

log = logging.getLogger(__name__)
SUFFIX = ".safetensors"


class HostCache:
    """Fetch versions through one directory that all the processes of one host use."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        keep_versions: int = 3,
        wait_poll_s: float = 0.05,
    ) -> None:
        if keep_versions < 1:
            raise UsageError(f"keep_versions must be at least 1, got {keep_versions}")
        if wait_poll_s <= 0:
            raise UsageError(f"wait_poll_s must be positive, got {wait_poll_s}")
        self.directory = Path(directory)
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"cannot use {self.directory} as a host cache: {exc}") from exc
        self.keep_versions = keep_versions
        self.wait_poll_s = wait_poll_s

    def path(self, version: int) -> Path:
        """The file that holds ``version`` in this share (it may not exist yet); raises UsageError
        for a version number out of range."""
        return self.directory / f"{layout.check_version(version):012d}{SUFFIX}"

    def fetch(
        self,
        sub: Subscriber,
        version: int,
        *,
        have: Snapshot | None = None,
        cancel: threading.Event | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> Snapshot:
        """Version ``version``, verified: from the cached file, or downloaded into it.

        ``have`` is this process's current copy, for a delta download when it is
        this process's turn. Raises FetchCancelled if ``cancel`` is set while it
        waits for another process's download or during its own.
        """
        path = self.path(version)
        # a file in place never changes (it is only ever replaced whole), so checking it needs
        # no lock: readers verify side by side, and only a download is one at a time
        snap = self._open_verified(sub, path, version)
        if snap is None:
            with self._locked(path.with_suffix(".lock"), cancel):
                snap = self._open_verified(sub, path, version)  # done while we waited?
                if snap is None:  # absent or bad: download, replacing a bad file whole
                    _remove_leftovers(path)
                    fetched = pull_to_file(
                        sub, path, version, have=have, progress=progress, cancel=cancel
                    )
                    # map the committed file copy-on-write: the writer's mapping is shared,
                    # and a caller writing into its tensors must not change other processes'
                    snap = dataclasses.replace(fetched, tensors=_map(path).tensors)
        self.prune(version)
        return snap

    def _open_verified(self, sub: Subscriber, path: Path, version: int) -> Snapshot | None:
        """The cached file as a Snapshot if it exists and verifies, else None.

        Something other than a file under that name (a directory) is not ours to
        remove, and no retry gets past it: a LocalIOError naming it.
        """
        if not path.exists():
            return None
        _require_file(path, f"version {version}'s file")
        start = time.monotonic()
        try:
            snap = _map(path)
            if snap.version != version:
                raise VerificationError(f"{path} holds version {snap.version}, not {version}")
            manifest = sub.verify_local(snap)
        except (UsageError, VerificationError) as exc:  # not ours, cut short or altered
            log.warning("the cached file %s will be downloaded again: %s", path, exc)
            return None
        return Snapshot(version, snap.tensors, manifest, verify_s=time.monotonic() - start)

    @contextlib.contextmanager
    def _locked(self, lock_path: Path, cancel: threading.Event | None) -> Iterator[None]:
        """Hold ``lock_path`` exclusively; poll so that ``cancel`` can end the wait."""
        waiting = cancel or threading.Event()
        try:  # a directory in its place is no lock, and no retry gets past it
            lock = open(lock_path, "a+b")  # noqa: SIM115 - closed by the with below
        except OSError as exc:
            raise LocalIOError.wrap(f"cannot open the lock {lock_path}", exc) from exc
        with lock:
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if waiting.wait(self.wait_poll_s):
                        raise FetchCancelled(f"gave up waiting for {lock_path}") from None
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def prune(self, newest: int) -> None:
        """Delete the files (and locks, and leftovers) of versions below the kept window
        ending at ``newest``."""
        cutoff = newest - self.keep_versions + 1
        for entry in self.directory.iterdir():
            stem = entry.name.lstrip(".").split(".", 1)[0]
            if stem.isascii() and stem.isdigit() and len(stem) == 12 and int(stem) < cutoff:
                _unlink_file(entry)


def _require_file(path: Path, what: str) -> None:
    if not path.is_file():
        raise LocalIOError(
            errno.EISDIR if path.is_dir() else errno.EEXIST,
            f"{what} {path} is in the way: it is not a file; remove it (a host cache holds "
            "only the files it makes)",
        )


def _unlink_file(path: Path) -> None:
    """Delete a file of ours; anything else under such a name (a directory) stays."""
    if not path.is_dir():
        path.unlink(missing_ok=True)


def _remove_leftovers(path: Path) -> None:
    """Delete temporary files of ``path`` a killed download left (the lock holder is the
    only writer of its version, so any such file is dead)."""
    for leftover in path.parent.glob(f".{path.name}.tmp-*"):
        _unlink_file(leftover)


def _map(path: Path) -> Snapshot:
    return load_snapshot(path, copy_on_write=True)
