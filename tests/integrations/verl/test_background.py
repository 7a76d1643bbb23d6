"""Publishing off the critical path (issue 17): the trainer's sync returns after a host copy.

A slow store is real here: a :class:`~wanrl_s3.testing.FaultProxy` in front of the
SeaweedFS server dribbles every read of LATEST (which each publication makes), so a
publication takes seconds, deterministically, while the sync returns at once.
What is checked reads the store straight from SeaweedFS, past the proxy.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from wanrl_s3.errors import StoreError, UsageError, WanrlError
from wanrl_s3.testing import Fault, FaultProxy, Rule, make_bucket
from wanrl_s3_verl.background import PublicationFailedError

from .engines import (
    ChildProcess,
    delete_bucket,
    expected,
    gen,
    latest_version,
    model,
    new_engine,
    publish,
    reader,
    send,
    step,
)
from .weights import as_published, digests, policy
from .weights import expected as expected_at

CHILD = "tests.integrations.verl.trainer_child"


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
    assert engine.trainer.background.in_flight == 0  # returned while v0 is publishing
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
    assert wrong.trainer.background.wait(60.0)
    assert "the background publication of v0 failed; the next sync raises" in caplog.text
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
    assert "publication of step 1 failed" in caplog.text


def test_close_lets_the_publication_in_flight_finish_within_close_wait_s(
    engine_kwargs: dict[str, Any],
    slow_store: FaultProxy,
    s3_endpoint: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="wanrl_s3_verl")
    store = reader(engine_kwargs["store_url"], s3_endpoint)
    kwargs = {**engine_kwargs, "endpoint_url": slow_store.url}
    weights = model(big=1000)
    engine = new_engine(is_master=True, **kwargs)
    send(engine, weights, 0)
    assert engine.trainer.background.in_flight == 0
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


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_host_memory_holds_one_copy_whatever_the_number_of_publications(
    engine_kwargs: dict[str, Any],
) -> None:
    engine = new_engine(is_master=True, **engine_kwargs)
    weights = model(big=16_000_000)  # 34 MB in bf16
    snapshot_bytes = sum(t.numel() * t.element_size() for t in as_published(weights).values())
    publish(engine, weights, 0)
    buffers = engine.trainer.buffers
    ptrs = {n: t.data_ptr() for n, t in buffers.buffers.items()}
    assert buffers.nbytes == snapshot_bytes
    step(weights, 1)
    publish(engine, weights, 1)  # the first delta: the publisher's own working set settles
    before = rss_bytes()
    for g in range(2, 7):
        step(weights, g)
        assert publish(engine, weights, g)["wanrl_s3/is_delta"] == 1.0
        assert {n: t.data_ptr() for n, t in buffers.buffers.items()} == ptrs
    grown = rss_bytes() - before
    assert grown < snapshot_bytes, f"{grown} bytes more after 5 publications"


@pytest.mark.slow  # two processes that import torch: 15 s
def test_a_trainer_process_that_exits_or_is_killed_mid_publication(
    engine_kwargs: dict[str, Any], s3_endpoint: str, s3_url: str, tmp_path: Path
) -> None:
    """Exit: the interpreter waits for the publication. SIGKILL mid-upload: LATEST stays put.

    Two trainer processes at once (their imports are most of their time): one behind a
    proxy that slows every LATEST read, one behind a proxy that answers 503 to every
    upload of v1's manifest, so that it is killed with v1's payload in the bucket and
    the upload of its commit record under way: the worst moment to die.
    """
    stall = Rule(Fault.SLOW_DOWN, method="PUT", key=r"/v/0+1/manifest\.json$")
    slow = Rule(Fault.TRICKLE, method="GET", key=r"/LATEST$")
    urls = {"exits": s3_url, "killed": f"s3://{make_bucket(s3_endpoint)}/runs/test"}
    with (
        FaultProxy(
            s3_endpoint, rules=[slow], trickle_bytes=8, trickle_delay_s=0.05, trickle_max_s=1.0
        ) as p1,
        FaultProxy(s3_endpoint, rules=[stall]) as p2,
    ):
        procs = {
            name: ChildProcess(
                CHILD,
                {**engine_kwargs, "store_url": urls[name], "endpoint_url": proxy.url},
                stderr=(tmp_path / f"{name}.log").open("w"),
            )
            for name, proxy in (("exits", p1), ("killed", p2))
        }
        assert [p.read() for p in procs.values()] == [{"ready": True}] * 2
        for p in procs.values():
            p.ask(cmd="send", global_steps=0)
            assert p.ask(cmd="wait")["wanrl_s3/version"] == 0
        # killed while v1's manifest upload is under way (refused, retried)
        assert procs["killed"].ask(cmd="send", global_steps=1)["wanrl_s3/queued_version"] == 1
        deadline = time.monotonic() + 30
        while p2.counts[Fault.SLOW_DOWN] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert p2.counts[Fault.SLOW_DOWN] > 0, "v1's commit never started"
        procs["killed"].proc.send_signal(signal.SIGKILL)
        # exits with v1 in flight: its interpreter waits for it, then leaves
        assert procs["exits"].ask(cmd="send", global_steps=1)["wanrl_s3/queued_version"] == 1
        assert procs["exits"].ask(cmd="exit") == {"bye": True}
        assert procs["exits"].proc.wait(60) == 0
        assert procs["killed"].proc.wait(10) == -signal.SIGKILL
    exited = reader(urls["exits"], s3_endpoint)
    assert latest_version(exited) == 1
    assert digests(exited.fetch(1).to_torch()) == expected_at(1)
    log = (tmp_path / "exits.log").read_text()
    assert "waiting up to 600 s for the publication of v1" in log
    assert "the publication of v1 finished" in log
    killed = reader(urls["killed"], s3_endpoint)
    assert [i.key for i in killed.store.list("v/000000000001/")], "v1's payload was uploaded"
    assert latest_version(killed) == 0 and killed.versions() == [0]
    assert digests(killed.fetch().to_torch()) == expected_at(0)
    # and the store takes the restarted trainer's v1 as if nothing had happened
    restarted = new_engine(is_master=True, **{**engine_kwargs, "store_url": urls["killed"]})
    assert publish(restarted, policy(1), 1)["wanrl_s3/is_delta"] == 1.0
    assert digests(killed.fetch().to_torch()) == expected_at(1)
