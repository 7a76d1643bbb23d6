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
and the log says why once. With ``--host-cache-dir`` the staged files live there,
``--keep-versions`` of them (they are the host cache's), and are linked the same way.

Where ``--host-cache-dir`` is on another file system than DIR (a tmpfs such as
/dev/shm beside a DIR on disk), no hard link can cross: the worker says so once
at start, and every install is a copy. To install without one, put DIR on the
host cache's file system, or have the engine load the host cache's file itself: its
path is WANRL_S3_HOST_CACHE_PATH in CMD's environment (WANRL_S3_SHARE_PATH too, its
deprecated name).

With ``--metrics-port PORT`` it serves Prometheus metrics (docs/operations.md,
"Metrics"): installed version, versions behind LATEST, bytes and seconds per
download, verify and install, failures by kind, last error age, poll latency.

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
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ..cdn import CdnReadStore
from ..errors import StoreError, UsageError
from ..fetch.install_dir import DirectoryInstaller, make_dir
from ..fetch.subscriber import Snapshot, Subscriber
from ..fetch.watch import Failure, InstallResult, WatchConfig, Watcher, WatchObserver
from ..fetch.watch.observer import IGNORE
from ..fleet.status import StatusReporter
from ..format.layout import LATEST_KEY
from ..io.malloc import return_big_buffers
from ..metrics.worker import WorkerMetrics
from ..regions.config import RegionsConfig
from ..regions.failover import FailoverConfig, RegionFailover
from ..regions.probe import RegionChoice
from ..store import ObjectStore
from .cdn import add_cdn_args, cdn_reader
from .common import (
    add_read_concurrency_arg,
    add_region_arg,
    add_regions_arg,
    add_renamed_option,
    add_store_args,
    non_negative_int,
    positive_float,
    positive_int,
    store_to_read,
    subscriber_from_args,
)
from .metrics_args import add_metrics_args, metrics_from_args

log = logging.getLogger("wanrl_s3.worker")


def add_parser(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "worker", help="keep a directory at the newest version", description=__doc__
    )
    add_store_args(
        p,
        required=False,
        verify="install only versions signed by one of these keys: an unsigned or forged "
        "one is refused (logged, retried; nothing installed); a changed file is reloaded "
        "at the next read",
    )
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
    p.add_argument(
        "--out-dir",
        required=True,
        metavar="DIR",
        help="keep DIR/model.safetensors at the newest verified version (created if missing)",
    )
    p.add_argument(
        "--on-install",
        metavar="CMD",
        default=None,
        help="shell command run after each install, with WANRL_S3_VERSION and WANRL_S3_PATH "
        "in its environment (default: none)",
    )
    p.add_argument(
        "--worker-id",
        metavar="ID",
        default=None,
        help="the id in the fleet's status (default: hostname and a hash of --out-dir, "
        "so a restart is the same worker)",
    )
    p.add_argument(
        "--poll-interval-s",
        type=positive_float,
        default=10.0,
        metavar="S",
        help="seconds between two looks at LATEST (a conditional GET)",
    )
    p.add_argument(
        "--host-cache-dir",
        metavar="DIR",
        default=None,
        help="the host cache: a directory all the workers of this host use (a tmpfs such as "
        "/dev/shm/wanrl): each version is downloaded once per host (default: none, each "
        "worker downloads)",
    )
    add_renamed_option(p, "--share-dir", "--host-cache-dir")
    p.add_argument(
        "--keep-versions",
        type=positive_int,
        default=None,
        metavar="N",
        help="with --host-cache-dir: keep the files of the newest N versions there (default: 3)",
    )
    add_read_concurrency_arg(p)
    p.add_argument(
        "--exit-after",
        type=positive_int,
        default=None,
        metavar="N",
        help="stop after N installs, for scripts and tests (default: run until stopped)",
    )
    add_cdn_args(p)
    add_metrics_args(p, "worker")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return_big_buffers()  # freed download buffers go back (wanrl_s3.io.malloc)
    if args.keep_versions is not None and not args.host_cache_dir:
        raise UsageError("--keep-versions needs --host-cache-dir (DIR/.versions keeps none)")
    if args.max_lag_versions is not None and not args.regions:
        raise UsageError("--max-lag-versions needs --regions FILE (the regions to fall back to)")
    out_dir = Path(args.out_dir)
    make_dir(out_dir, "--out-dir")  # before any request: a bad DIR costs no network time
    if args.host_cache_dir:
        make_dir(Path(args.host_cache_dir), "--host-cache-dir")
    failover_config = (
        None
        if args.max_lag_versions is None
        else FailoverConfig(args.max_lag_versions, check_interval_s=args.poll_interval_s)
    )
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s wanrl-s3 worker: %(message)s"
    )
    with metrics_from_args(args, WorkerMetrics.of, log) as metrics:  # before any network time
        _watch(args, out_dir, failover_config, metrics or IGNORE)
    return 0


def _watch(
    args: argparse.Namespace,
    out_dir: Path,
    failover_config: FailoverConfig | None,
    observer: WatchObserver,
) -> None:
    """Keep ``out_dir`` at the newest version until stopped (the worker itself)."""
    worker_id = args.worker_id or _default_worker_id(out_dir)
    through_cdn = cdn_reader(args)
    store, regions, choice = store_to_read(args, max_lag_versions=args.max_lag_versions)
    reading = through_cdn(store)  # checked before the status object is written
    region = (args.region or "") if choice is None else choice.region
    reporter = StatusReporter(store, worker_id, region)
    _report(reporter.restore, round_trip_s=_round_trip_s(store))
    observer = _FailuresInStatus(reporter, observer)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    config = WatchConfig(
        poll_interval_s=args.poll_interval_s,
        host_cache_dir=args.host_cache_dir,
        keep_versions=args.keep_versions or 3,
    )
    with (
        subscriber_from_args(args, reading, concurrency=args.concurrency) as sub,
        DirectoryInstaller(sub, out_dir, config, observer=observer) as installer,
    ):
        _say_watching(worker_id, reading, region, installer)
        failover = None
        if regions is not None and choice is not None and failover_config is not None:
            failover = _failover(
                args, regions, choice, installer.watcher, reporter, failover_config
            )
        try:
            _serve(args, installer, reporter, failover, stop)
        finally:
            installer.close()  # its watcher stops before the failover's subscribers close
            if failover is not None:
                failover.close()
    log.info("%s stopped", worker_id)


class _FailuresInStatus(WatchObserver):
    """Tells the status each failure of the background work as it happens (kept in its
    stretches of failures until the next write), and every event to ``inner`` (metrics).

    The serving loop shows the current failure at most every half second and not
    while it installs; a failure that came and went in between would be lost."""

    def __init__(self, reporter: StatusReporter, inner: WatchObserver) -> None:
        self.reporter, self.inner = reporter, inner

    def started(self, watcher: Watcher) -> None:
        self.inner.started(watcher)

    def polled(self, seconds: float, latest_version: int | None) -> None:
        self.inner.polled(seconds, latest_version)

    def downloaded(self, snapshot: Snapshot) -> None:
        self.inner.downloaded(snapshot)

    def installed(self, result: InstallResult) -> None:
        self.inner.installed(result)

    def failed(self, failure: Failure) -> None:
        self.reporter.failed(failure.message, failure.at_s)
        self.inner.failed(failure)


def _say_watching(
    worker_id: str, store: ObjectStore, region: str, installer: DirectoryInstaller
) -> None:
    held = installer.found_version
    cdn = store.cdn_url if isinstance(store, CdnReadStore) else None
    log.info(
        "%s watching %s%s%s; %s",
        worker_id,
        store.url,
        f" through the CDN at {cdn}" if cdn else "",
        f" (region {region})" if region else "",
        "holding no version yet"
        if held is None
        else f"holding v{held} (found in {installer.path}, verified)",
    )


def _serve(
    args: argparse.Namespace,
    installer: DirectoryInstaller,
    reporter: StatusReporter,
    failover: RegionFailover | None,
    stop: threading.Event,
) -> None:
    """Install each version as it becomes ready, until stopped or --exit-after installs.

    Failures of the background work go into the status object as they happen
    (rate-limited by the reporter); one this loop cannot get past (a failed
    install, a dead thread, a directory that cannot be written) is written there
    too, then raised: the process exits.
    """
    installs, doing = 0, "watching"
    try:
        while not stop.is_set():
            installer.check()
            _report(reporter.heartbeat)
            if failover is not None:
                _check_region(failover, installer.watcher)
            _report_failures(reporter, installer.watcher, failover)
            ready = installer.wait_ready(timeout_s=0.5)
            if ready is None:
                continue
            doing = f"installing v{ready}"
            result = installer.install()
            doing = "watching"
            if result is None:
                continue
            installs += 1
            _after_install(args, installer, result, reporter)
            if args.exit_after is not None and installs >= args.exit_after:
                return
    except Exception as exc:
        _report(reporter.error, f"stopped while {doing}: {exc}")
        raise


def _check_region(failover: RegionFailover, watcher: Watcher) -> None:
    """A region check when due; a failure it records is told to the watcher's observer."""
    before = failover.failure
    failover.maybe_check()
    if failover.failure is not None and failover.failure is not before:
        watcher.observer.failed(failover.failure)


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
    args: argparse.Namespace,
    installer: DirectoryInstaller,
    result: InstallResult,
    reporter: StatusReporter,
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
            "WANRL_S3_PATH": str(installer.path),
        }
        if args.host_cache_dir:  # the host cache's own file: an engine may load it (no copy)
            cached = str(installer.watcher.staged_path(result.version))
            env["WANRL_S3_HOST_CACHE_PATH"] = env["WANRL_S3_SHARE_PATH"] = cached  # old name too
        # The user's own hook, as a shell command (like a git hook): pipes and && allowed.
        done = subprocess.run(args.on_install, shell=True, env=env, check=False)  # noqa: S602
        if done.returncode != 0:
            error = f"--on-install exited {done.returncode} after v{result.version}"
            log.warning("%s", error)
            watcher = installer.watcher
            watcher.observer.failed(Failure("on_install", error, watcher.clock.time()))
    _report(reporter.installed, result)
    if error:
        _report(reporter.error, error)
