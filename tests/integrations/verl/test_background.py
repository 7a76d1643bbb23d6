"""Publishing off the critical path: the trainer's sync returns after a host copy.

The engine's syncs go through the trainer core (:class:`wanrl_s3.TrainerPublisher`;
its own tests, tests/trainer/, cover host memory and the interpreter's exit). A
slow store is real here: a :class:`~wanrl_s3.testing.FaultProxy` in front of the
SeaweedFS server dribbles every read of LATEST (which each publication makes), so a
publication takes seconds, deterministically, while the sync returns at once.
What is checked reads the store straight from SeaweedFS, past the proxy.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from tests.trainer.support import delete_bucket, latest_version, reader
from tests.trainer.weights import as_published, digests, gen, model, step
from wanrl_s3.errors import PublicationFailedError, StoreError, UsageError, WanrlError
from wanrl_s3.testing import Fault, FaultProxy, Rule

from .engines import expected, new_engine, publish, send


@pytest.fixture
def slow_store(s3_endpoint: str) -> Iterator[FaultProxy]:
    """Each read of LATEST takes about a second: a publication takes at least that long."""
    rule = Rule(Fault.TRICKLE, method="GET", key=r"/LATEST$")
    with FaultProxy(
        s3_endpoint, rules=[rule], trickle_bytes=8, trickle_delay_s=0.05, trickle_max_s=1.0
    ) as proxy:
        yield proxy


def test_the_sync_returns_after_the_copy_and_the_version_commits_in_the_background(
    engine_kwargs: dict[str, Any], slow_store: FaultProxy, s3_endpoint: str
) -> None:
    engine = new_engine(is_master=True, **{**engine_kwargs, "endpoint_url": slow_store.url})
    store = reader(engine_kwargs["store_url"], s3_endpoint)
    weights = model(big=1_000_000)
    at_sync = as_published(weights)

    def live() -> Iterator[tuple[str, torch.Tensor]]:
        yield from weights.items()  # the trainer's own tensors, not copies

    m0 = asyncio.run(engine.send_weights(live(), global_steps=0))
    assert (m0["wanrl_s3/queued"], m0["wanrl_s3/queued_version"]) == (1.0, 0.0)
    assert m0["wanrl_s3/publish_copy_s"] > 0 and m0["wanrl_s3/publish_wait_s"] < 0.1
    assert "wanrl_s3/published" not in m0  # nothing has finished yet
    assert engine.trainer.core.in_flight == 0  # returned while v0 is publishing
    assert latest_version(store) is None  # and nothing of it is visible yet
    step(weights, 1)  # training goes on, in place, while v0 uploads
    m1 = send(engine, weights, 1)
    assert m1["wanrl_s3/publish_wait_s"] > 0.2, "v0 was still publishing: this sync waited"
    assert (m1["wanrl_s3/published"], m1["wanrl_s3/version"], m1["wanrl_s3/is_delta"]) == (
        1.0,
        0.0,
        0.0,
    )
    assert digests(store.fetch(0).to_torch()) == digests(at_sync), "v0 is the sync's weights"
    done = engine.wait_published(60.0)
    assert done is not None and (done["wanrl_s3/version"], done["wanrl_s3/is_delta"]) == (1, 1)
    assert latest_version(store) == 1
    assert digests(store.fetch().to_torch()) == expected(weights)
    assert send(engine, weights, 2)["wanrl_s3/version"] == 1  # reported once more, at the sync
    engine.close()


def test_a_failed_background_publication_is_raised_at_the_next_sync(
    engine_kwargs: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    weights = model(big=1000)
    wrong = new_engine(is_master=True, **{**engine_kwargs, "store_url": "s3://no-such-bkt/r"})
    assert send(wrong, weights, 0)["wanrl_s3/queued"] == 1.0  # the failure is yet to come
    assert wrong.trainer.core.wait(60.0)
    assert "the background publication of v0 failed; the next submit raises it" in caplog.text
    consumed: list[str] = []
    tensors = ((consumed.append(n) or n, t) for n, t in gen(weights))
    with pytest.raises(PublicationFailedError, match=r"v0 failed: StoreError: .*first") as info:
        asyncio.run(wrong.send_weights(tensors, global_steps=1))
    assert isinstance(info.value, WanrlError) and isinstance(info.value.__cause__, StoreError)
    assert "s3://no-such-bkt/r" in str(info.value)
    assert consumed == list(weights)  # drained all the same: the other ranks are waiting
    # any error that is not an outage: here, a tensor no manifest may describe
    trainer = new_engine(is_master=True, **engine_kwargs)
    send(trainer, {**weights, "x" * 2000: torch.zeros(2)}, 0)
    with pytest.raises(PublicationFailedError, match=r"v0 failed: UsageError: tensor name") as info:
        send(trainer, weights, 1)
    assert isinstance(info.value.__cause__, UsageError)
    assert publish(trainer, weights, 2)["wanrl_s3/version"] == 2  # raised once; the run goes on


def test_an_outage_mid_run_is_reported_at_the_next_sync(
    engine_kwargs: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """The same policy as a synchronous sync: a store error once the store was reached."""
    weights = model(big=1000)
    trainer = new_engine(is_master=True, **engine_kwargs)
    publish(trainer, weights, 0)
    delete_bucket(engine_kwargs)
    send(trainer, weights, 1)
    got = send(trainer, weights, 2)
    assert (got["wanrl_s3/version"], got["wanrl_s3/published"], got["wanrl_s3/failed"]) == (1, 0, 1)
    assert got["wanrl_s3/queued_version"] == 2
    assert "publication of v1 failed" in caplog.text


def test_close_lets_the_publication_in_flight_finish_within_close_wait_s(
    engine_kwargs: dict[str, Any],
    slow_store: FaultProxy,
    s3_endpoint: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wanrl_s3")
    store = reader(engine_kwargs["store_url"], s3_endpoint)
    kwargs = {**engine_kwargs, "endpoint_url": slow_store.url}
    weights = model(big=1000)
    engine = new_engine(is_master=True, **kwargs)
    send(engine, weights, 0)
    assert engine.trainer.core.in_flight == 0
    engine.close()
    assert latest_version(store) == 0
    assert "waiting up to 600 s for the publication of v0" in caplog.text
    assert "the publication of v0 finished" in caplog.text
    # a bounded wait: given up on, the publication is not visible until it commits, whole
    impatient = new_engine(is_master=True, **kwargs, close_wait_s=0.1)
    step(weights, 1)
    send(impatient, weights, 1)
    assert impatient.trainer.close() is False
    assert "did not finish within close_wait_s=0.1; giving up on it" in caplog.text
    assert latest_version(store) == 0
    assert impatient.wait_published(60.0) is not None  # not cancelled: it commits, whole
    assert latest_version(store) == 1
    assert digests(store.fetch(1).to_torch()) == expected(weights)
