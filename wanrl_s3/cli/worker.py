"""``wanrl-s3 worker``: keep a directory holding the newest verified version.

For inference engines outside the trainer's cluster: DIR/model.safetensors is
always a whole, verified version (renamed into place, readable by other users:
0644 in a 0755 DIR, created if missing), and CMD runs
after each install, e.g. a call to the server's reload-weights endpoint, with
WANRL_S3_VERSION and WANRL_S3_PATH in its environment. One log line per
install; SIGTERM or Ctrl-C stops it cleanly (exit 0).

What it cannot use (a corrupt, unsigned or forged version, an unreadable
LATEST, a store that does not answer) it refuses and keeps running: it logs
one line, writes the error into its status object (``last_error``, at most
every 10 s while it lasts) and tries again with backoff; the next install
clears it. It exits only when it cannot go on: DIR cannot be written (exit 2,
or the code of the error), or a background thread died (exit 1), after
writing the reason into its status object.

Disk: a version is downloaded into DIR/.versions (a delta straight from the
installed file into the new one), verified, then hard-linked beside
model.safetensors and renamed over it, and its staged name removed: one
snapshot on disk at rest, two while the next one downloads. A reader that
still maps the old model.safetensors keeps its pages. Where no hard link can
be made (another file system, a file system without links) the file is copied,
and the log says why once. With ``--share-dir`` the staged files live there,
``--keep-versions`` of them (they are the share's), and are linked the same way.

With ``--regions FILE`` the worker reads from one region: ``--region NAME``,
or (``auto``) the one measured fastest at start-up. Versions that its region
shows before replication has copied all of them are waited for, never read
in part. With ``--max-lag-versions N`` it reads from another region while its
own lags the primary by more than N versions, and says so in its log and its
status object.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import LocalIOError, StoreError, UsageError, WanrlError
from ..fetch.files import RUN_ID_KEY, VERSION_KEY, local_snapshot
from ..fetch.node_share import NodeShare
from ..fetch.subscriber import Snapshot, Subscriber
from ..fetch.watch import Failure, InstallResult, WatchConfig, Watcher
from ..fleet.status import StatusReporter
from ..format.layout import LATEST_KEY
from ..io.malloc import return_big_buffers
from ..io.safetensors_file import write_file
from ..regions.config import RegionsConfig
from ..regions.failover import FailoverConfig, RegionFailover
from ..regions.probe import RegionChoice
from ..store import ObjectStore
from .common import (
    add_region_arg,
    add_regions_arg,
    add_store_args,
    non_negative_int,
    positive_float,
    positive_int,
    store_to_read,
    subscriber_from_args,
)

MODEL_FILE = "model.safetensors"
STAGE_DIR = ".versions"  # where versions are downloaded without --share-dir
DIR_MODE = 0o755  # an inference server running as another user must read what we write
log = logging.getLogger("wanrl_s3.worker")


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "worker", help="keep a directory at the newest version", description=__doc__
    )
    add_store_args(p, required=False)
    add_regions_arg(p, "read from one of its regions")
    add_region_arg(p, "a label recorded in the status object")
    p.add_argument(
        "--max-lag-versions",
        type=non_negative_int,
        default=None,
        metavar="N",
        help="with --regions: read from another region while this one lags the "
        "primary by more than N versions (default: never)",
    )
    p.add_argument("--out-dir", required=True, metavar="DIR")
    p.add_argument(
        "--on-install", metavar="CMD", default=None, help="shell command run after each install"
    )
    p.add_argument(
        "--worker-id",
        default=None,
        help="the id in the fleet's status (default: hostname and a hash of --out-dir, "
        "so a restart is the same worker)",
    )
    p.add_argument("--poll-interval-s", type=positive_float, default=10.0)
    p.add_argument(
        "--share-dir",
        metavar="DIR",
        default=None,
        help="a directory the workers of this host share (a tmpfs such as /dev/shm/wanrl): "
        "each version is downloaded once per host",
    )
    p.add_argument(
        "--keep-versions",
        type=positive_int,
        default=None,
        metavar="N",
        help="with --share-dir: keep the files of the newest N versions there (default 3)",
    )
    p.add_argument("--concurrency", type=positive_int, default=16)
    p.add_argument(
        "--exit-after",
        type=positive_int,
        default=None,
        metavar="N",
        help="stop after N installs (for scripts and tests)",
    )
    p.set_defaults(func=run)


@dataclass
class _Installer:
    """Puts a verified version at DIR/model.safetensors, atomically, without copying it
    when its staged file can be hard-linked (see the module's docstring)."""

    out_dir: Path
    watcher: Watcher
    private_stage: bool  # DIR/.versions: only this worker uses it; staged names go once installed
    said_copy: bool = False

    def __call__(self, snap: Snapshot) -> None:
        staged = self.watcher.staged_path(snap.version)
        why_not = None if staged is None else _link_into_place(staged, self.out_dir / MODEL_FILE)
        if staged is None or why_not is not None:
            if why_not is not None and not self.said_copy:
                log.warning("installing v%d by copy (said once): %s", snap.version, why_not)
                self.said_copy = True
            _write_file(self.out_dir, snap)  # a tensor resident at a time
        if staged is not None and self.private_stage:
            for name in (staged, staged.with_suffix(".lock")):
                name.unlink(missing_ok=True)


def _link_into_place(staged: Path, target: Path) -> str | None:
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


def _clean_stage(out_dir: Path, stage: Path, start: Snapshot | None) -> None:
    """At start-up: what a killed worker left in DIR/.versions for versions it already
    installed (or older), and temporary files beside model.safetensors."""
    for leftover in out_dir.glob(f".{MODEL_FILE}.tmp-*"):
        leftover.unlink(missing_ok=True)
    if start is not None and stage.is_dir():
        NodeShare(stage, keep_versions=1).prune(start.version + 1)


def _tidy_stage(stage: Path) -> None:
    """On the way out: DIR/.versions keeps only a staged version (the restart installs it
    without downloading), and goes when it holds none."""
    try:
        for entry in stage.iterdir():
            if entry.suffix == ".lock" or ".tmp-" in entry.name:
                entry.unlink(missing_ok=True)
        stage.rmdir()
    except OSError:  # not empty (a staged version), or already gone
        pass


def _write_file(out_dir: Path, snap: Snapshot) -> None:
    manifest = snap.manifest
    if manifest is None:  # a Watcher's snapshots always carry their manifest
        raise UsageError(f"version {snap.version} came without its manifest")
    meta = {VERSION_KEY: str(snap.version), RUN_ID_KEY: manifest.run_id}
    write_file(out_dir / MODEL_FILE, snap.tensors, meta)  # a tensor resident at a time


def _make_dir(flag: str, path: Path) -> None:
    """Create ``path`` (and its parents) if missing, readable by other users."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{flag} {path} is not a directory")
    if path.is_dir():
        return
    try:
        path.mkdir(parents=True)
        path.chmod(DIR_MODE)
    except OSError as exc:
        raise UsageError(f"cannot create {flag} {path}: {exc.strerror or exc}") from exc


def _start_from(sub: Subscriber, path: Path) -> Snapshot | None:
    """The version already in DIR, if it verifies; otherwise start from scratch."""
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


def run(args: argparse.Namespace) -> int:
    return_big_buffers()  # freed download buffers go back (wanrl_s3.io.malloc)
    out_dir = Path(args.out_dir)
    _make_dir("--out-dir", out_dir)
    if args.share_dir:
        _make_dir("--share-dir", Path(args.share_dir))
    if args.keep_versions is not None and not args.share_dir:
        raise UsageError("--keep-versions needs --share-dir (DIR/.versions keeps none)")
    if args.max_lag_versions is not None and not args.regions:
        raise UsageError("--max-lag-versions needs --regions FILE (the regions to fall back to)")
    failover_config = (
        None
        if args.max_lag_versions is None
        else FailoverConfig(args.max_lag_versions, check_interval_s=args.poll_interval_s)
    )
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s wanrl-s3 worker: %(message)s"
    )
    worker_id = args.worker_id or _default_worker_id(out_dir)
    store, regions, choice = store_to_read(args, max_lag_versions=args.max_lag_versions)
    region = (args.region or "") if choice is None else choice.region
    reporter = StatusReporter(store, worker_id, region)
    _report(reporter.resume, round_trip_s=_round_trip_s(store))
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    with subscriber_from_args(args, store, concurrency=args.concurrency) as sub:
        start = _start_from(sub, out_dir / MODEL_FILE)
        # versions land in files (in --share-dir, else a folder of --out-dir), not in anonymous
        # memory: a delta is applied from the old file into the new one, a tensor at a time
        stage_dir = args.share_dir or str(out_dir / STAGE_DIR)
        if not args.share_dir:
            _clean_stage(out_dir, Path(stage_dir), start)
        config = WatchConfig(
            poll_interval_s=args.poll_interval_s,
            share_dir=stage_dir,
            keep_versions=(args.keep_versions or 3) if args.share_dir else 1,
        )
        with Watcher(sub, config, start_from=start) as watcher:
            held = None if start is None else start.version
            # the watcher holds it until the next install; a reference kept here would keep
            # the file mapped (its blocks on disk) after model.safetensors is renamed over
            del start
            log.info(
                "%s watching %s%s; %s",
                worker_id,
                store.url,
                f" (region {region})" if region else "",
                "holding no version yet"
                if held is None
                else f"holding v{held} (found in {out_dir / MODEL_FILE}, verified)",
            )
            failover = None
            if regions is not None and choice is not None and failover_config is not None:
                failover = _failover(args, regions, choice, watcher, reporter, failover_config)
            try:
                _serve(args, out_dir, watcher, reporter, failover, stop)
            finally:
                watcher.stop()
                if failover is not None:
                    failover.close()
                if not args.share_dir:
                    _tidy_stage(Path(stage_dir))
    log.info("%s stopped", worker_id)
    return 0


def _serve(
    args: argparse.Namespace,
    out_dir: Path,
    watcher: Watcher,
    reporter: StatusReporter,
    failover: RegionFailover | None,
    stop: threading.Event,
) -> None:
    """Install each version as it becomes ready, until stopped or --exit-after installs.

    Failures of the background work go into the status object as they happen
    (rate-limited by the reporter); one this loop cannot get past (a failed
    install, a dead thread) is written there too, then raised: the process exits.
    """
    installs, doing = 0, "watching"
    installer = _Installer(out_dir, watcher, private_stage=not args.share_dir)
    try:
        while not stop.is_set():
            watcher.check_alive()
            _check_stage(out_dir, watcher.failure)
            _report(reporter.heartbeat)
            if failover is not None:
                failover.maybe_check()
            _report_failures(reporter, watcher, failover)
            if watcher.wait_ready(timeout_s=0.5) is None:
                continue
            doing = f"installing v{watcher.ready_version}"
            result = _install(watcher, out_dir, installer)
            doing = "watching"
            if result is None:
                continue
            installs += 1
            _after_install(args, out_dir, result, reporter)
            if args.exit_after is not None and installs >= args.exit_after:
                return
    except Exception as exc:
        _report(reporter.error, f"stopped while {doing}: {exc}")
        raise


def _check_stage(out_dir: Path, failure: Failure | None) -> None:
    """Exit 2 (raise) when versions cannot be staged: DIR is gone, or the disk is full,
    read-only or not ours. Retrying unchanged cannot help, and nothing would install."""
    if failure is None:
        return
    if not out_dir.is_dir():  # versions are staged inside it
        raise UsageError(f"cannot write {out_dir / MODEL_FILE}: {out_dir} is gone "
                         f"({failure.message})")  # fmt: skip
    cause = failure.cause
    if isinstance(cause, LocalIOError):
        raise LocalIOError(cause.errno, f"cannot stage a version for {out_dir / MODEL_FILE}: "
                           f"{cause}") from cause  # fmt: skip


def _report_failures(
    reporter: StatusReporter, watcher: Watcher, failover: RegionFailover | None
) -> None:
    """The newest current failure of the background work into the status (rate-limited)."""
    found: list[Failure] = [
        f for f in (watcher.failure, failover.failure if failover else None) if f is not None
    ]
    newest = max(found, key=lambda f: f.at_s, default=None)
    if newest is None:
        _report(reporter.failing, None)
    else:
        _report(reporter.failing, newest.message, newest.at_s)


def _install(watcher: Watcher, out_dir: Path, installer: _Installer) -> InstallResult | None:
    """Install the ready version into DIR; an OSError the writer let through is exit 2."""
    try:
        return watcher.install(sink=installer)
    except WanrlError:
        raise
    except OSError as exc:
        raise UsageError(f"cannot write {out_dir / MODEL_FILE}: {exc.strerror or exc}") from exc


def _failover(
    args: argparse.Namespace,
    regions: RegionsConfig,
    choice: RegionChoice,
    watcher: Watcher,
    reporter: StatusReporter,
    config: FailoverConfig,
) -> RegionFailover:
    def subscriber_for(name: str) -> Subscriber:
        return subscriber_from_args(args, regions.store(name), concurrency=args.concurrency)

    return RegionFailover(
        regions,
        choice.region,
        watcher,
        subscriber_for,
        config,
        order=choice.order,
        on_switch=lambda *a: _report(reporter.region_changed, *a),
    )


def _default_worker_id(out_dir: Path) -> str:
    """hostname-<hash of the absolute --out-dir>: stable across restarts, one per directory."""
    digest = hashlib.sha256(str(out_dir.resolve()).encode()).hexdigest()[:8]
    return f"{socket.gethostname()}-{digest}"


def _round_trip_s(store: ObjectStore, tries: int = 3) -> float | None:
    """The quickest of a few HEADs of LATEST: this worker's round trip, for the planner."""
    best = None
    for _ in range(tries):
        start = time.perf_counter()
        try:
            store.head(LATEST_KEY)
        except StoreError:
            return best
        took = time.perf_counter() - start
        best = took if best is None else min(best, took)
    return best


def _report(write: Callable[..., object], *args: object, **kwargs: object) -> None:
    """Write the status object, best effort: it lives in the start-up region's bucket,
    which may be the region that is down while the worker reads from another."""
    try:
        write(*args, **kwargs)
    except StoreError as exc:
        log.warning("status object not written: %s", exc)


def _after_install(
    args: argparse.Namespace, out_dir: Path, result: InstallResult, reporter: StatusReporter
) -> None:
    log.info(
        "installed v%d: %s; %.2f s download + %.2f s verify + %.2f s write; "
        "%.1f s after it was published",
        result.version,
        result.source,
        result.download_s,
        result.verify_s,
        result.apply_s,
        result.total_s,
    )
    error = None
    if args.on_install:
        env = {
            **os.environ,
            "WANRL_S3_VERSION": str(result.version),
            "WANRL_S3_PATH": str(out_dir / MODEL_FILE),
        }
        # The user's own hook, as a shell command (like a git hook): pipes and && allowed.
        done = subprocess.run(args.on_install, shell=True, env=env, check=False)  # noqa: S602
        if done.returncode != 0:
            error = f"--on-install exited {done.returncode} after v{result.version}"
            log.warning("%s", error)
    _report(reporter.installed, result)
    if error:
        _report(reporter.error, error)
