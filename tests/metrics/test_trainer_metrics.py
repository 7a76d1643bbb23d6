"""The trainer side's metrics through the public API: a TrainerPublisher observed by
TrainerMetrics, staleness filters tracked by StalenessMetrics, served by serve_metrics
and scraped over HTTP."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest
from prometheus_client import CollectorRegistry

from tests.metrics.scrape import scrape, value
from tests.trainer.weights import model, step
from wanrl_s3 import (
    MetricsServer,
    Publisher,
    StalenessConfig,
    StalenessFilter,
    StalenessMetrics,
    Tagged,
    TrainerMetrics,
    TrainerPublisher,
    serve_metrics,
)
from wanrl_s3.errors import PublicationFailedError, UsageError
from wanrl_s3.store import open_store

T = "wanrl_s3_trainer_"
S = "wanrl_s3_staleness_"
BAD = {"x" * 2000: np.zeros(2, np.float32)}  # a name no manifest may hold: fatal


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def server(registry: CollectorRegistry) -> Iterator[MetricsServer]:
    served = serve_metrics(0, addr="127.0.0.1", registry=registry)
    yield served
    served.close()


def test_publications_are_counted_by_outcome_with_their_seconds_bytes_and_density(
    registry: CollectorRegistry, server: MetricsServer
) -> None:
    metrics = TrainerMetrics(registry)
    store = open_store(f"memory://{uuid.uuid4().hex}")
    weights = model(big=100_000)
    with TrainerPublisher(Publisher(store), observer=metrics) as trainer:
        with pytest.raises(PublicationFailedError):
            trainer.submit(BAD, 0).result(60)
        full = trainer.submit(weights, 1).result(60)
        step(weights, 2)
        delta = trainer.submit(weights, 2).result(60)
    assert full.result is not None and delta.result is not None
    assert full.result.kind == "full" and delta.result.kind == "delta"
    with TrainerPublisher(Publisher(store), observer=metrics) as restarted:
        assert restarted.submit(weights, 2).result(60).skipped is not None  # the store holds it
    s = scrape(server.url)
    assert value(s, T + "publications_total", outcome="published") == 2
    assert value(s, T + "publications_total", outcome="skipped") == 1
    assert value(s, T + "publications_total", outcome="fatal") == 1
    assert value(s, T + "publications_total", outcome="failed") == 0
    assert value(s, T + "publish_seconds_count") == 2
    assert value(s, T + "publish_seconds_sum") == pytest.approx(full.seconds + delta.seconds)
    for result in (full.result, delta.result):
        assert value(s, T + "stored_bytes_count", kind=result.kind) == 1
        assert value(s, T + "stored_bytes_sum", kind=result.kind) == result.stored_bytes > 0
    assert value(s, T + "published_version") == 2
    assert delta.result.density is not None and 0 < delta.result.density < 0.1
    assert value(s, T + "delta_density") == pytest.approx(delta.result.density)


def test_staleness_counts_are_lifetime_totals_whatever_the_snapshots_reset(
    registry: CollectorRegistry, server: MetricsServer
) -> None:
    queue_filter: StalenessFilter[Tagged[str]] = StalenessFilter(StalenessConfig(3))
    sampler_filter: StalenessFilter[Tagged[str]] = StalenessFilter(StalenessConfig(4))
    metrics = StalenessMetrics(registry)
    metrics.track(queue_filter, name="queue")
    metrics.track(sampler_filter, name="sampler")
    queue_filter.advance(10)
    assert queue_filter.check_in(Tagged("a", 9)) and queue_filter.check_in(Tagged("b", 8))
    assert not queue_filter.check_in(Tagged("old", 2))  # too old on arrival
    queue_filter.snapshot(reset=True)  # a per-step window: the exported totals stay
    queue_filter.advance(12)
    assert queue_filter.check_out(Tagged("a", 9))
    assert not queue_filter.check_out(Tagged("b", 8))  # too old by the time it is taken
    sampler_filter.advance(5)
    kept = sampler_filter.select([Tagged("c", 0), Tagged("d", 1)])
    assert kept == [Tagged("d", 1)]  # 5 - 0 > S = 4: dropped
    s = scrape(server.url)
    assert value(s, S + "admitted_total", filter="queue") == 1
    assert value(s, S + "dropped_total", filter="queue", at="put") == 1
    assert value(s, S + "dropped_total", filter="queue", at="get") == 1
    assert value(s, S + "pending", filter="queue") == 0
    assert value(s, S + "learner_version", filter="queue") == 12
    assert value(s, S + "admitted_total", filter="sampler") == 1
    assert value(s, S + "dropped_total", filter="sampler", at="put") == 1
    assert queue_filter.totals() == {
        "generated": 3, "admitted": 1, "dropped_at_put": 1, "dropped_at_get": 1, "pending": 0,
    }  # fmt: skip


def test_one_metrics_object_per_registry(registry: CollectorRegistry) -> None:
    made = TrainerMetrics.of(registry)
    assert TrainerMetrics.of(registry) is made
    with pytest.raises(UsageError, match=r"already holds a TrainerMetrics: share it"):
        TrainerMetrics(registry)
    assert StalenessMetrics.of(registry) is not made  # another class: its own names
    with pytest.raises(UsageError, match=r"port must be an integer in 0\.\.65535"):
        serve_metrics(70000, registry=registry)
