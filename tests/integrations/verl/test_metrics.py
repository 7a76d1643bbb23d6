"""Prometheus metrics from verl: ``metrics_port`` on the engine's master rank serves the
trainer's publications; on the sampler and the queue it exports their staleness filters."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from tests.metrics.scrape import Samples, scrape, value
from tests.trainer.weights import model, step
from wanrl_s3 import Tagged, serve_metrics
from wanrl_s3.errors import UsageError
from wanrl_s3_verl.config import FilterSettings, QueueSettings

from .engines import new_engine, publish

T = "wanrl_s3_trainer_"
S = "wanrl_s3_staleness_"


def moved(after: Samples, before: Samples, name: str, **labels: str) -> float:
    """How much a counter moved between two scrapes (the process's registry is shared)."""
    return (value(after, name, **labels) or 0) - (value(before, name, **labels) or 0)


def test_the_master_serves_the_trainers_publications(engine_kwargs: dict[str, Any]) -> None:
    kwargs = {**engine_kwargs, "metrics_port": 0, "metrics_addr": "127.0.0.1"}
    trainer = new_engine(is_master=True, **kwargs)
    server = trainer.trainer.metrics_server
    assert server is not None and server.url.startswith("http://127.0.0.1:")
    try:
        before = scrape(server.url)
        weights = model(big=100_000)
        assert publish(trainer, weights, 1)["wanrl_s3/is_delta"] == 0.0
        step(weights, 2)
        delta = publish(trainer, weights, 2)
        assert delta["wanrl_s3/is_delta"] == 1.0
        after = scrape(server.url)
        assert moved(after, before, T + "publications_total", outcome="published") == 2
        assert moved(after, before, T + "stored_bytes_count", kind="delta") == 1
        assert (
            moved(after, before, T + "stored_bytes_sum", kind="delta")
            == delta["wanrl_s3/stored_bytes"]
        )
        assert value(after, T + "published_version") == 2
        assert value(after, T + "delta_density") == pytest.approx(delta["wanrl_s3/density"])
    finally:
        trainer.close()
        server.close()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_queue_and_the_sampler_of_one_process_share_one_endpoint() -> None:
    port = free_port()
    keys = {"staleness": 3, "metrics_port": port, "metrics_addr": "127.0.0.1"}
    queue = QueueSettings.from_mapping(keys).staleness_filter("queue")
    sampler = FilterSettings.from_mapping(keys).staleness_filter("sampler")  # same port: shared
    server = serve_metrics(port, addr="127.0.0.1")  # the one they started
    try:
        queue.advance(10)
        assert queue.offer(Tagged("fresh", 9)) and not queue.offer(Tagged("old", 1))
        assert sampler.offer(Tagged("any", 0))
        samples = scrape(server.url)
        assert value(samples, S + "admitted_total", filter="queue") == 1
        assert value(samples, S + "dropped_total", filter="queue", at="put") == 1
        assert value(samples, S + "admitted_total", filter="sampler") == 1
    finally:
        server.close()
    with pytest.raises(UsageError, match=r"wanrl_s3\.message_queue\.metrics_port must be"):
        QueueSettings.from_mapping({"metrics_port": -1})
