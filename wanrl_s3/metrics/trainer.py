"""The trainer side's metrics: publications, what each cost, what each stored.

Labels: ``outcome`` (``published``, ``skipped``, ``failed``: an outage ridden
out, ``fatal``: the run stops) and ``kind`` (``full``, ``delta``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..format.manifest import KINDS
from ..trainer.observer import PublicationObserver
from .exposition import BYTES_BUCKETS, SECONDS_BUCKETS, RegisteredMetrics, gauge

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry
    from prometheus_client.metrics_core import Metric

    from ..trainer.publication import Publication

OUTCOMES = ("published", "skipped", "failed", "fatal")


class TrainerMetrics(RegisteredMetrics, PublicationObserver):
    """The ``wanrl_s3_trainer_*`` metrics of the publications it observes (one per process)::

        metrics = TrainerMetrics.of()  # this process's registry
        core = TrainerPublisher(Publisher(store), observer=metrics)
        serve_metrics(9400)

    Stored bytes and density come from the rank that commits (rank 0 of a
    :class:`~wanrl_s3.ShardedPublisher`); every rank counts its outcomes.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        super().__init__(registry)
        self._lock = threading.Lock()
        self._version: int | None = None
        self._density: float | None = None
        self.publications = self.counter(
            "wanrl_s3_trainer_publications",
            "Publications by outcome: " + ", ".join(OUTCOMES),
            ("outcome",),
            each=OUTCOMES,
        )
        self.publish_seconds = self.histogram(
            "wanrl_s3_trainer_publish_seconds",
            "Seconds of a committed publication: encode, upload, commit, LATEST (off the "
            "training step when it runs in the background)",
            SECONDS_BUCKETS,
        )
        self.stored_bytes = self.histogram(
            "wanrl_s3_trainer_stored_bytes",
            "Bytes stored per committed version, by kind (full, delta)",
            BYTES_BUCKETS,
            ("kind",),
        )
        for kind in KINDS:
            self.stored_bytes.labels(kind)
        self.registry.register(_TrainerGauges(self))

    def published(self, publication: Publication) -> None:
        """Count the outcome; for a committed version, observe its seconds and, on the rank that
        commits, keep its stored bytes, version and (a delta's) density."""
        if publication.skipped is not None:
            self.publications.labels("skipped").inc()
            return
        if publication.failed is not None:
            self.publications.labels("failed").inc()
            return
        self.publications.labels("published").inc()
        self.publish_seconds.observe(publication.seconds)
        result = publication.result
        if result is None:  # a rank that does not commit: its share is in the version
            return
        self.stored_bytes.labels(result.kind).observe(result.stored_bytes)
        with self._lock:
            self._version = result.version
            if result.kind == "delta" and result.density is not None:
                self._density = result.density

    def fatal(self, version: int, error: BaseException) -> None:
        """Count a publication that stopped the run (outcome ``fatal``)."""
        self.publications.labels("fatal").inc()

    def last(self) -> tuple[int | None, float | None]:
        """The newest committed version, and the density of the newest delta."""
        with self._lock:
            return self._version, self._density


class _TrainerGauges:
    def __init__(self, metrics: TrainerMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        version, density = self._metrics.last()
        prom = self._metrics.prom
        yield gauge(
            prom, "wanrl_s3_trainer_published_version", "The newest version committed", version
        )
        yield gauge(
            prom,
            "wanrl_s3_trainer_delta_density",
            "Fraction of the elements the newest delta changed from its base (0..1)",
            density,
        )
