"""A worker's metrics: what it holds, how far behind LATEST, what each version cost.

:class:`WorkerMetrics` is the observer of a :class:`~wanrl_s3.Watcher` (or a
:class:`~wanrl_s3.DirectoryInstaller`, which passes it on): counters and
histograms move as the watcher reports, and the gauges read the watcher when
Prometheus scrapes, so they are never stale.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..fetch.watch import Failure, InstallResult, WatchObserver
from .exposition import (
    BYTES_BUCKETS,
    REQUEST_BUCKETS,
    SECONDS_BUCKETS,
    LastFailure,
    RegisteredMetrics,
    gauge,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

    from ..fetch.subscriber import Snapshot
    from ..fetch.watch import Watcher

#: The kinds of failure a worker counts: the watcher's (poll: reading LATEST;
#: visibility: a version still not whole past the grace; download: download, verify
#: or decode; thread: a background thread ended), a region check's, and the
#: ``--on-install`` hook's.
FAILURE_KINDS = ("poll", "visibility", "download", "thread", "region", "on_install")


class WorkerMetrics(RegisteredMetrics, WatchObserver):
    """The ``wanrl_s3_worker_*`` metrics of the watcher it observes (one per process)::

    metrics = WorkerMetrics()  # this process's registry
    with DirectoryInstaller(sub, "/srv/policy", observer=metrics) as installer:
        serve_metrics(9400)
        ...
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self._watcher: Watcher | None = None
        self._lock = threading.Lock()
        self.last_failure = LastFailure()
        self.download_bytes = self.histogram(
            "wanrl_s3_worker_download_bytes",
            "Bytes downloaded per version made ready (deltas and keyframe together); "
            "versions found on this host already are not counted",
            BYTES_BUCKETS,
        )
        self.download_seconds = self.histogram(
            "wanrl_s3_worker_download_seconds",
            "Seconds from the first request of a version to its last byte",
            SECONDS_BUCKETS,
        )
        self.verify_seconds = self.histogram(
            "wanrl_s3_worker_verify_seconds",
            "Seconds of hash checks and decoding left once a version's last byte arrived",
            SECONDS_BUCKETS,
        )
        self.install_seconds = self.histogram(
            "wanrl_s3_worker_install_seconds",
            "Seconds of the local install of a version (the only pause)",
            SECONDS_BUCKETS,
        )
        self.poll_seconds = self.histogram(
            "wanrl_s3_worker_poll_seconds",
            "Seconds of one conditional read of LATEST",
            REQUEST_BUCKETS,
        )
        self.failures = self.counter(
            "wanrl_s3_worker_failures",
            "Failures, by kind: " + ", ".join(FAILURE_KINDS),
            ("kind",),
            each=FAILURE_KINDS,
        )
        self.registry.register(_WorkerGauges(self))

    # -- the watcher's hooks ----------------------------------------------------------
    def started(self, watcher: Watcher) -> None:
        """Keep ``watcher``: the gauges read its versions and failures at each scrape."""
        with self._lock:
            self._watcher = watcher

    def polled(self, seconds: float, latest_version: int | None) -> None:
        """Observe the read of LATEST in ``wanrl_s3_worker_poll_seconds``."""
        self.poll_seconds.observe(seconds)

    def downloaded(self, snapshot: Snapshot) -> None:
        """Observe the verify seconds and, for bytes this process fetched (not a version another
        process of the host fetched into the share), the bytes and download seconds."""
        if snapshot.path:  # bytes moved: not a copy another process of the host fetched
            self.download_bytes.observe(snapshot.downloaded_bytes)
            self.download_seconds.observe(snapshot.download_s)
        self.verify_seconds.observe(snapshot.verify_s)

    def installed(self, result: InstallResult) -> None:
        """Observe the install's pause (``apply_s``) in ``wanrl_s3_worker_install_seconds``."""
        self.install_seconds.observe(result.apply_s)

    def failed(self, failure: Failure) -> None:
        """Count the failure by kind (``failure.what``) and stamp the last failure's time."""
        self.failures.labels(failure.what).inc()
        self.last_failure.record(failure.at_s)

    @property
    def watcher(self) -> Watcher | None:
        """The watcher observed, or None before it starts."""
        with self._lock:
            return self._watcher


class _WorkerGauges:
    """The gauges read from the watcher at each scrape."""

    def __init__(self, metrics: WorkerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        watcher = m.watcher
        installed = None if watcher is None else watcher.installed_version
        latest = None if watcher is None else watcher.latest_version
        held = -1 if installed is None else installed
        behind = None if latest is None else max(0, latest - held)
        failing = None if watcher is None else float(watcher.failure is not None)
        prom = m.prom
        yield gauge(prom, "wanrl_s3_worker_installed_version", "The version installed", installed)
        yield gauge(
            prom,
            "wanrl_s3_worker_latest_version",
            "The version LATEST named at the last poll",
            latest,
        )
        yield gauge(
            prom,
            "wanrl_s3_worker_versions_behind",
            "Versions between the installed one and LATEST's (LATEST + 1 while none is installed)",
            behind,
        )
        yield gauge(
            prom,
            "wanrl_s3_worker_failing",
            "1 while the background work is failing (until its next success), else 0",
            failing,
        )
        yield gauge(
            prom,
            "wanrl_s3_worker_last_error_age_seconds",
            "Seconds since the newest failure of any kind (no sample before the first)",
            m.last_failure.age_s(),
        )
