"""A trainer process that exits, or is killed, while a publication is in flight.

Exit: the interpreter waits (``close_wait_s``, from threading's exit hooks) for the
publication, which commits whole. SIGKILL mid-upload: LATEST stays put and the
store takes the restarted trainer's version as if nothing had happened.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.trainer.support import ChildProcess, latest_version, reader
from tests.trainer.weights import digests, expected, policy
from wanrl_s3 import Publisher, TrainerPublisher
from wanrl_s3.store import open_store
from wanrl_s3.testing import Fault, FaultProxy, Rule, make_bucket

CHILD = "tests.trainer.trainer_child"


@pytest.mark.slow  # two processes that import torch: 15 s
def test_a_trainer_process_that_exits_or_is_killed_mid_publication(
    s3_endpoint: str, s3_url: str, tmp_path: Path
) -> None:
    """Two trainer processes at once (their imports are most of their time): one behind a
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
                {"store_url": urls[name], "endpoint_url": proxy.url},
                stderr=(tmp_path / f"{name}.log").open("w"),
            )
            for name, proxy in (("exits", p1), ("killed", p2))
        }
        assert [p.read() for p in procs.values()] == [{"ready": True}] * 2
        for p in procs.values():
            p.ask(cmd="send", version=0)
            assert p.ask(cmd="wait") == {"version": 0, "is_delta": False}
        # killed while v1's manifest upload is under way (refused, retried)
        assert procs["killed"].ask(cmd="send", version=1) == {"queued_version": 1}
        deadline = time.monotonic() + 30
        while p2.counts[Fault.SLOW_DOWN] == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert p2.counts[Fault.SLOW_DOWN] > 0, "v1's commit never started"
        procs["killed"].proc.send_signal(signal.SIGKILL)
        # exits with v1 in flight: its interpreter waits for it, then leaves
        assert procs["exits"].ask(cmd="send", version=1) == {"queued_version": 1}
        assert procs["exits"].ask(cmd="exit") == {"bye": True}
        assert procs["exits"].proc.wait(60) == 0
        assert procs["killed"].proc.wait(10) == -signal.SIGKILL
    exited = reader(urls["exits"], s3_endpoint)
    assert latest_version(exited) == 1
    assert digests(exited.fetch(1).to_torch()) == expected(1)
    log = (tmp_path / "exits.log").read_text()
    assert "waiting up to 600 s for the publication of v1" in log
    assert "the publication of v1 finished" in log
    killed = reader(urls["killed"], s3_endpoint)
    assert [i.key for i in killed.store.list("v/000000000001/")], "v1's payload was uploaded"
    assert latest_version(killed) == 0 and killed.versions() == [0]
    assert digests(killed.fetch().to_torch()) == expected(0)
    # and the store takes the restarted trainer's v1 as if nothing had happened
    store = open_store(urls["killed"], endpoint_url=s3_endpoint)
    with TrainerPublisher(Publisher(store), dtype="bf16") as restarted:
        done = restarted.submit(policy(1), 1).result(60).result
    assert done is not None and done.kind == "delta"
    assert digests(killed.fetch().to_torch()) == expected(1)
