"""The staleness filters' metrics: items admitted and dropped, read at each scrape.

A filter counts under its own lock as it decides; :class:`StalenessMetrics`
reads its lifetime totals (:meth:`~wanrl_s3.StalenessFilter.totals`) when
Prometheus scrapes, so admitting an item costs nothing more. Label ``filter``
names each filter tracked (one or two per process: a queue's, a sampler's);
``at`` says where an item was dropped (``put``: too old on arrival; ``get``: too
old by the time it was taken).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..errors import UsageError
from .exposition import RegisteredMetrics

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

    from ..staleness import StalenessFilter


class StalenessMetrics(RegisteredMetrics):
    """The ``wanrl_s3_staleness_*`` metrics of the filters it tracks (one per process)::

    StalenessMetrics.of().track(filter, name="queue")
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self._lock = threading.Lock()
        self._filters: dict[str, StalenessFilter[Any]] = {}
        self.registry.register(_StalenessCollector(self))

    def track(self, staleness_filter: StalenessFilter[Any], name: str = "default") -> None:
        """Export ``staleness_filter``'s counts under ``filter=name`` (a second filter of
        the same name replaces the first: a restarted queue keeps its series)."""
        if not isinstance(name, str) or not name:
            raise UsageError(f"a staleness filter's name must be a non-empty string, got {name!r}")
        with self._lock:
            self._filters[name] = staleness_filter

    def filters(self) -> dict[str, StalenessFilter[Any]]:
        """The tracked filters by name (a copy: safe to read while another is tracked)."""
        with self._lock:
            return dict(self._filters)


class _StalenessCollector:
    def __init__(self, metrics: StalenessMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        core = self._metrics.prom.core
        admitted = core.CounterMetricFamily(
            "wanrl_s3_staleness_admitted",
            "Items admitted (inside the staleness budget), per filter",
            labels=["filter"],
        )
        dropped = core.CounterMetricFamily(
            "wanrl_s3_staleness_dropped",
            "Items dropped as too stale, per filter and where (put: on arrival; get: when taken)",
            labels=["filter", "at"],
        )
        pending = core.GaugeMetricFamily(
            "wanrl_s3_staleness_pending",
            "Items queued and not yet taken, per filter",
            labels=["filter"],
        )
        learner = core.GaugeMetricFamily(
            "wanrl_s3_staleness_learner_version",
            "The learner's version the filter judges against, per filter",
            labels=["filter"],
        )
        for name, found in sorted(self._metrics.filters().items()):
            totals = found.totals()
            admitted.add_metric([name], totals["admitted"])
            dropped.add_metric([name, "put"], totals["dropped_at_put"])
            dropped.add_metric([name, "get"], totals["dropped_at_get"])
            pending.add_metric([name], totals["pending"])
            learner.add_metric([name], found.learner_version)
        yield from (admitted, dropped, pending, learner)
