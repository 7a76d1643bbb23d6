"""The MessageQueue adapter around verl's real MessageQueue actor (num_cpus=0, on CPU).

Producer and consumer sit in different Ray actors, as verl's rollouter and
trainer do; the samples are opaque bytes the adapter never opens.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import ray

from wanrl_s3.errors import UsageError
from wanrl_s3_verl.clock import CLOCK_NAME, ClockTicker, create_clock, find_clock
from wanrl_s3_verl.config import QueueSettings
from wanrl_s3_verl.fully_async_main import install_queue_filter
from wanrl_s3_verl.message_queue import StalenessMessageQueueClient, generating_under


@ray.remote(num_cpus=0)
class Rollouter:
    """Stands in for verl's FullyAsyncRollouter: it only ever calls put_sample."""

    async def set_message_queue_client(self, client: Any) -> None:
        self.client = client

    async def put(self, sample: Any, version: int | None = None) -> bool:
        return bool(await self.client.put_sample(sample=sample, version=version))

    async def put_under(self, sample: bytes, version: int) -> bool:
        with generating_under(version):  # the version at the start of generation
            return bool(await self.client.put_sample(sample=sample))


@ray.remote(num_cpus=0)
class Trainer:
    """Stands in for verl's FullyAsyncTrainer: get_sample, then its own unpickling."""

    async def set_message_queue_client(self, client: Any) -> None:
        self.client = client

    async def get(self) -> Any:
        return await self.client.get_sample()

    def metrics(self) -> dict[str, float]:
        return dict(self.client.staleness_metrics())


def tick(ticker: ClockTicker, version: int) -> None:
    """The backend's tick (fire and forget), then a read from here: it has landed."""
    ticker.tick(version)
    assert ray.get(find_clock(ticker.name).read.remote()) == version


def get(client: StalenessMessageQueueClient) -> Any:
    return asyncio.run(asyncio.wait_for(client.get_sample(), 30))


@pytest.fixture(scope="module")
def queue(ray_session: Any) -> Iterator[Any]:
    """verl's queue actor, shared by this module's tests (each leaves it empty)."""
    from omegaconf import OmegaConf
    from verl.experimental.fully_async_policy.message_queue import MessageQueue

    actor = MessageQueue.options(num_cpus=0).remote(OmegaConf.create({}), 16)
    yield actor
    ray.kill(actor)


@pytest.fixture(scope="module")
def rollouter(ray_session: Any) -> Iterator[Any]:
    actor = Rollouter.remote()
    yield actor
    ray.kill(actor)


@pytest.fixture(scope="module")
def trainer(ray_session: Any) -> Iterator[Any]:
    actor = Trainer.remote()
    yield actor
    ray.kill(actor)


@pytest.fixture
def clock_name(ray_session: Any) -> Iterator[str]:
    name = f"clock-{uuid.uuid4().hex[:8]}"
    clock = create_clock(name)
    yield name
    ray.kill(clock)


def test_stale_samples_are_dropped_at_get_and_counted(
    queue: Any, rollouter: Any, clock_name: str
) -> None:
    client = StalenessMessageQueueClient(queue, {"staleness": 3}, clock_name=clock_name)
    consumed = asyncio.run(client.get_statistics())["total_consumed"]
    producer = rollouter
    ray.get(producer.set_message_queue_client.remote(client))  # pickled into another actor
    ticker = ClockTicker(clock_name)  # what the backend's master rank does at each sync
    assert ray.get(producer.put.remote(b"sample-0"))  # stamped from the clock: 0
    tick(ticker, 2)
    ray.get(producer.put.remote(b"sample-2"))  # stamped 2
    ray.get(producer.put_under.remote(b"sample-1", 1))  # started under 1: stamped 1
    ray.get(producer.put.remote(b"sample-5", 5))  # explicit
    ray.get(producer.put.remote(None))  # verl's end of stream
    tick(ticker, 5)  # the learner is at 5: admit v >= 2

    got = [get(client) for _ in range(3)]
    assert got == [(b"sample-2", 3), (b"sample-5", 1), (None, 0)]
    m = client.staleness_metrics()
    assert (m["staleness/generated"], m["staleness/admitted"], m["staleness/dropped"]) == (4, 2, 2)
    assert m["staleness/dropped_at_get"] == 2 and m["staleness/dropped_at_put"] == 0
    assert (m["staleness/age_hist/0"], m["staleness/age_hist/3"]) == (1, 1)
    assert m["staleness/learner_version"] == 5
    # verl's own statistics still come through, with ours beside them
    stats = asyncio.run(client.get_statistics())
    assert stats["total_consumed"] - consumed == 5 and stats["staleness/dropped"] == 2


def test_an_explicit_learner_version_and_a_version_map(
    queue: Any, clock_name: str, s3_url: str, s3_endpoint: str
) -> None:
    from wanrl_s3 import StepStatusWriter
    from wanrl_s3.store import open_store

    writer = StepStatusWriter(open_store(s3_url, endpoint_url=s3_endpoint), "verl-x")
    for g, v in {3: 3, 4: 3, 5: 3, 9: 9}.items():  # it never installed 4 or 5
        writer.synced(g, v)
    writer.flush()
    writer.close()
    settings = QueueSettings.from_mapping(
        {"staleness": 3, "store_url": s3_url, "endpoint_url": s3_endpoint}
    )
    client = StalenessMessageQueueClient(queue, settings, clock_name=clock_name)
    for version in (5, 4):
        asyncio.run(client.put_sample(f"tagged-{version}".encode(), version=version))
    client.advance(7)  # tags 5 and 4 both mean version 3 here: age 4, too old
    asyncio.run(client.put_sample(b"tagged-9", version=9))
    assert get(client) == (b"tagged-9", 0)
    assert client.staleness_metrics()["staleness/dropped"] == 2


def test_put_without_any_version_source_is_refused(queue: Any) -> None:
    client = StalenessMessageQueueClient(queue, {}, clock_name="no-such-clock")
    with pytest.raises(UsageError, match="put_sample needs the version"):
        asyncio.run(client.put_sample(b"x"))


def test_the_launcher_installs_the_filter_on_both_sides(
    queue: Any, rollouter: Any, trainer: Any
) -> None:
    clock = create_clock(CLOCK_NAME)
    try:
        components = {"message_queue": queue, "rollouter": rollouter, "trainer": trainer}
        client = install_queue_filter(components, QueueSettings.from_mapping({"staleness": 3}))
        assert components["message_queue_client"] is client
        tick(ClockTicker(), 1)
        ray.get(components["rollouter"].put.remote(b"old", 0))
        ray.get(components["rollouter"].put.remote(b"new"))  # stamped 1 from the clock
        tick(ClockTicker(), 4)
        assert ray.get(components["trainer"].get.remote(), timeout=30) == (b"new", 0)
        assert ray.get(components["trainer"].metrics.remote())["staleness/dropped"] == 1
    finally:
        ray.kill(clock)
