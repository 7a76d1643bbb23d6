"""The relay's metrics: the primary's version, each replica's, what copying cost, failures.

Labels: ``region`` (the replica regions of the regions file, and ``primary`` for
a failure to read the primary's LATEST), ``how`` (``server_side`` or
``streamed``) and ``kind`` (:data:`~.exposition.ERROR_KINDS`): a few values each.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..regions.relay_observer import RelayObserver
from .exposition import (
    REQUEST_BUCKETS,
    SECONDS_BUCKETS,
    LastFailure,
    RegisteredMetrics,
    error_kind,
    gauge,
)

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

    from ..regions.relay import RelayedVersion


class RelayMetrics(RegisteredMetrics, RelayObserver):
    """The ``wanrl_s3_relay_*`` metrics of the relay it observes (one per process)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self._lock = threading.Lock()
        self._primary: int | None = None
        self._replicas: dict[str, int] = {}
        self.last_failure = LastFailure()
        self.copied_bytes = self.counter(
            "wanrl_s3_relay_copied_bytes",
            "Payload bytes committed in a replica, by region and how (server_side, streamed)",
            ("region", "how"),
        )
        self.copy_seconds = self.histogram(
            "wanrl_s3_relay_copy_seconds",
            "Seconds to commit one version in one replica (payload, then manifest)",
            SECONDS_BUCKETS,
            ("region",),
        )
        self.poll_seconds = self.histogram(
            "wanrl_s3_relay_poll_seconds",
            "Seconds of one conditional read of the primary's LATEST",
            REQUEST_BUCKETS,
        )
        self.failures = self.counter(
            "wanrl_s3_relay_failures",
            "Failures, by region (primary: reading its LATEST) and kind of error",
            ("region", "kind"),
        )
        self.registry.register(_RelayGauges(self))

    # -- the relay's hooks ---------------------------------------------------------------
    def polled(self, seconds: float, latest_version: int | None) -> None:
        """Observe the read in ``wanrl_s3_relay_poll_seconds``; keep the version it named."""
        self.poll_seconds.observe(seconds)
        if latest_version is not None:
            with self._lock:
                self._primary = latest_version

    def synced(self, region: str, version: int) -> None:
        """Keep ``region``'s version for the replica's version gauge."""
        with self._lock:
            self._replicas[region] = version

    def relayed(self, done: RelayedVersion) -> None:
        """Count the bytes copied into the replica, by region and how (server_side, streamed),
        and observe the seconds the commit took."""
        how = "server_side" if done.server_side else "streamed"
        self.copied_bytes.labels(done.region, how).inc(done.copied_bytes)
        self.copy_seconds.labels(done.region).observe(done.seconds)

    def failed(self, region: str, error: BaseException) -> None:
        """Count the failure by region and kind of error, and stamp the last failure's time."""
        self.failures.labels(region, error_kind(error)).inc()
        self.last_failure.record()

    def versions(self) -> tuple[int | None, dict[str, int]]:
        """The primary's LATEST version and each replica's, as last seen."""
        with self._lock:
            return self._primary, dict(self._replicas)


class _RelayGauges:
    """The gauges, from what the relay last reported."""

    def __init__(self, metrics: RelayMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        m = self._metrics
        primary, replicas = m.versions()
        core = m.prom.core
        yield gauge(
            m.prom,
            "wanrl_s3_relay_primary_version",
            "The version the primary's LATEST names",
            primary,
        )
        version = core.GaugeMetricFamily(
            "wanrl_s3_relay_replica_version",
            "The version each replica's LATEST is at",
            labels=["region"],
        )
        behind = core.GaugeMetricFamily(
            "wanrl_s3_relay_versions_behind",
            "Versions each replica's LATEST is behind the primary's",
            labels=["region"],
        )
        for region, at in sorted(replicas.items()):
            version.add_metric([region], at)
            if primary is not None:
                behind.add_metric([region], max(0, primary - at))
        yield version
        yield behind
        yield gauge(
            m.prom,
            "wanrl_s3_relay_last_error_age_seconds",
            "Seconds since the newest failure (no sample before the first)",
            m.last_failure.age_s(),
        )
