"""Keep a directory holding the newest verified version, as one .safetensors file.

For inference engines outside the trainer's process: ``DIR/model.safetensors``
is always a whole, verified version, readable by other users (0644 in a 0755
directory, created if missing). :class:`DirectoryInstaller` runs a
:class:`~wanrl_s3.fetch.watch.Watcher` whose versions land in files, and
installs each by a rename; ``wanrl-s3 worker`` is this plus a status object,
a hook and region failover.

Disk: a version is downloaded into ``DIR/.versions`` (a delta straight from
the installed file into the new one, a tensor at a time), verified, then
hard-linked beside ``model.safetensors`` and renamed over it, and its staged
name removed: one snapshot on disk at rest, two while the next one downloads.
A reader that still maps the old file keeps its pages. Where no hard link can
be made (another file system, a file system without links) the file is copied
instead, and the log says why once. With ``WatchConfig.host_cache_dir`` the staged
files live there, ``keep_versions`` of them (they are the host cache's), and are
linked the same way. A host cache on another file system than the directory (the
usual tmpfs ``/dev/shm`` beside a directory on disk) can never be linked from:
that is said once, at start, with the two ways to install without a copy (the
directory on the host cache's file system, or the engine reading its file,
:meth:`~wanrl_s3.Watcher.staged_path`). A directory that disappears, or a disk too full to stage
a version, is an error the caller sees (:meth:`DirectoryInstaller.check`):
retrying unchanged cannot help.
"""

from __future__ import annotations

import logging
import os
import secrets
from dataclasses import replace
from pathlib import Path

from ..errors import LocalIOError, UsageError, WanrlError
from ..io.safetensors_file import write_file
from ..store import SYSTEM_CLOCK, Clock
from .files import RUN_ID_KEY, VERSION_KEY, local_snapshot
from .host_cache import HostCache
from .subscriber import Snapshot, Subscriber
from .watch import InstallResult, WatchConfig, Watcher, WatchObserver
from .watch.observer import IGNORE

MODEL_FILE = "model.safetensors"
STAGE_DIR = ".versions"  # where versions are staged without a host_cache_dir
DIR_MODE = 0o755  # an inference server running as another user must read what we write
log = logging.getLogger(__name__)


class DirectoryInstaller:
    """Keeps ``directory/model.safetensors`` at the newest verified version, atomically.

    Start it (or use it as a context manager), then call :meth:`wait_ready` and
    :meth:`install` as :class:`Watcher`'s; :meth:`check` raises when the
    directory can no longer be written. ``config`` is the watcher's; without a
    ``host_cache_dir`` versions are staged in ``directory/.versions`` and its
    ``keep_versions`` does not apply (a staged version goes once installed).
    ``observer`` is the watcher's (:class:`wanrl_s3.WorkerMetrics`, say)::

        with Subscriber(store) as sub, DirectoryInstaller(sub, "/srv/policy") as installer:
            while serving:
                installer.check()
                if installer.wait_ready(timeout_s=1.0) is not None:
                    result = installer.install()  # now in /srv/policy/model.safetensors
    """

    def __init__(
        self,
        subscriber: Subscriber,
        directory: str | os.PathLike[str],
        config: WatchConfig | None = None,
        *,
        clock: Clock = SYSTEM_CLOCK,
        observer: WatchObserver = IGNORE,
    ) -> None:
        given = config or WatchConfig()
        if given.reuse_installed:
            raise UsageError(
                "DirectoryInstaller installs files: drop reuse_installed (it is for an engine "
                "that holds versions in memory)"
            )
        self.directory = Path(directory)
        self.path = self.directory / MODEL_FILE
        self._private_stage = given.host_cache_dir is None
        stage = given.host_cache_dir or str(self.directory / STAGE_DIR)
        keep = 1 if self._private_stage else given.keep_versions
        self.config = replace(given, host_cache_dir=stage, keep_versions=keep)
        self.found_version: int | None = None  # the version found in place at start, verified
        self._sub, self._clock, self._observer = subscriber, clock, observer
        self._watcher: Watcher | None = None
        self._said_copy = False

    @property
    def stage_dir(self) -> Path:
        """Where versions are staged before install: the host cache given, or a private one
        inside the install directory."""
        return Path(str(self.config.host_cache_dir))

    @property
    def watcher(self) -> Watcher:
        """The watcher behind it (for a region failover or a status object); once started."""
        if self._watcher is None:
            raise UsageError("start the DirectoryInstaller (or enter it) before using it")
        return self._watcher

    def start(self) -> DirectoryInstaller:
        """Create the directories, adopt a verified version in place, and start watching."""
        if self._watcher is not None:
            raise UsageError(f"the DirectoryInstaller of {self.directory} is already started")
        make_dir(self.directory, "install directory")
        if not self._private_stage:
            make_dir(self.stage_dir, "host_cache_dir")
            self._said_copy = _say_if_apart(self.stage_dir, self.directory)
        found = _verified_in_place(self._sub, self.path)
        self.found_version = None if found is None else found.version
        if self._private_stage:
            _clean_stage(self.path, self.stage_dir, found)
        # the watcher holds ``found`` until the next install; no other reference may stay,
        # or the file would stay mapped (its blocks on disk) after it is renamed over
        self._watcher = Watcher(
            self._sub, self.config, clock=self._clock, start_from=found, observer=self._observer
        )
        self._watcher.start()
        return self

    def close(self) -> None:
        """Stop watching; a private staging directory keeps only a version not yet installed.
        Closing twice is harmless."""
        if self._watcher is not None:
            self._watcher.stop()
        if self._private_stage:
            _tidy_stage(self.stage_dir)

    def __enter__(self) -> DirectoryInstaller:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    def wait_ready(self, timeout_s: float | None = None) -> int | None:
        """Block until a version newer than the installed one is ready (or time out)."""
        return self.watcher.wait_ready(timeout_s)

    def install(self) -> InstallResult | None:
        """Put the newest ready version in place; None at once if nothing new is ready."""
        try:
            return self.watcher.install(sink=self._put)
        except WanrlError:
            raise
        except OSError as exc:
            raise LocalIOError.wrap(f"cannot write {self.path}", exc) from exc

    def check(self) -> None:
        """Raise when nothing can install: a watcher thread died (RuntimeError), the
        directory is gone (UsageError), or the disk refuses to stage a version
        (LocalIOError: full, read-only, not ours)."""
        self.watcher.check_alive()
        failure = self.watcher.failure
        if failure is None:
            return
        if not self.directory.is_dir():  # versions are staged inside it
            gone = f"{self.directory} is gone ({failure.message})"
            raise UsageError(f"cannot write {self.path}: {gone}")
        cause = failure.cause
        if isinstance(cause, LocalIOError):
            why = f"cannot stage a version for {self.path}: {cause}"
            raise LocalIOError(cause.errno, why) from cause

    def _put(self, snap: Snapshot) -> None:
        """Link the staged file into place, or copy it where no link can be made."""
        staged = self.watcher.staged_path(snap.version)
        why_not = None if staged is None else link_into_place(staged, self.path)
        if staged is None or why_not is not None:
            if why_not is not None and not self._said_copy:
                log.warning("installing v%d by copy (said once): %s", snap.version, why_not)
                self._said_copy = True
            _write_copy(self.path, snap)
        if staged is not None and self._private_stage:
            for name in (staged, staged.with_suffix(".lock")):
                name.unlink(missing_ok=True)


def link_into_place(staged: Path, target: Path) -> str | None:
    """Hard-link ``staged`` beside ``target`` and rename it over ``target``; None when done,
    else why no link could be made (nothing changed then).

    A file that is renamed over keeps its inode for whoever still maps it. ``staged``
    is never written after its download verified, so the link is that verified file.
    """
    tmp = target.with_name(f".{target.name}.tmp-{secrets.token_hex(6)}")
    try:
        os.link(staged, tmp)
    except OSError as exc:
        return f"cannot hard-link {staged} into {target.parent}: {exc.strerror or exc}"
    try:
        os.replace(tmp, target)
    except OSError:
        tmp.unlink(missing_ok=True)
        raise
    return None


def _say_if_apart(cache: Path, directory: Path) -> bool:
    """Say once, at start, that ``cache`` and ``directory`` are on different file systems
    (so every install is a copy), and what to do about it; True if said."""
    if cache.stat().st_dev == directory.stat().st_dev:
        return False
    log.warning(
        "installs copy each version into %s (no hard link): the host cache %s is on %s and %s is "
        "on %s, and a hard link cannot cross file systems; to install without a copy, put %s "
        "on the host cache's file system, or have the engine load the cached file itself",
        directory / MODEL_FILE,
        cache,
        file_system(cache),
        directory,
        file_system(directory),
        directory,
    )
    return True


def file_system(path: Path) -> str:
    """The file system holding ``path``, for a person: "tmpfs at /dev/shm"."""
    mount = path.resolve()
    device = mount.stat().st_dev
    while mount.parent != mount and mount.parent.stat().st_dev == device:
        mount = mount.parent
    kind = None
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 3 and fields[1] == str(mount):
                kind = fields[2]  # the last one listed is the one on top
    except OSError:  # not Linux: the mount point alone says enough
        pass
    return f"{kind or 'the file system'} at {mount}"


def make_dir(path: Path, what: str) -> None:
    """Create ``path`` (and its parents) if missing, readable by other users."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{what} {path} is not a directory")
    if path.is_dir():
        return
    try:
        path.mkdir(parents=True)
        path.chmod(DIR_MODE)
    except OSError as exc:
        raise UsageError(f"cannot create {what} {path}: {exc.strerror or exc}") from exc


def _verified_in_place(sub: Subscriber, path: Path) -> Snapshot | None:
    """The version already at ``path``, if it verifies; otherwise start from scratch."""
    if not path.exists():
        return None
    try:
        snap = local_snapshot(path, sub)  # a file of ours, or identified by its hashes
        if snap is None:
            log.info("%s holds no published version: starting from scratch", path)
            return None
        sub.verify_local(snap)
        return snap
    except WanrlError as exc:
        log.warning("ignoring %s: %s", path, exc)
        return None


def _clean_stage(target: Path, stage: Path, found: Snapshot | None) -> None:
    """At start: what a killed installer left in the staging directory for versions it
    already installed (or older), and temporary files beside ``target``."""
    for leftover in target.parent.glob(f".{target.name}.tmp-*"):
        leftover.unlink(missing_ok=True)
    if found is not None and stage.is_dir():
        HostCache(stage, keep_versions=1).prune(found.version + 1)


def _tidy_stage(stage: Path) -> None:
    """On the way out: the staging directory keeps only a staged version (a restart
    installs it without downloading), and goes when it holds none."""
    try:
        for entry in stage.iterdir():
            if entry.suffix == ".lock" or ".tmp-" in entry.name:
                entry.unlink(missing_ok=True)
        stage.rmdir()
    except OSError:  # not empty (a staged version), or already gone
        pass


def _write_copy(target: Path, snap: Snapshot) -> None:
    manifest = snap.manifest
    if manifest is None:  # a Watcher's snapshots always carry their manifest
        raise UsageError(f"version {snap.version} came without its manifest")
    meta = {VERSION_KEY: str(snap.version), RUN_ID_KEY: manifest.run_id}
    write_file(target, snap.tensors, meta)  # a tensor resident at a time
