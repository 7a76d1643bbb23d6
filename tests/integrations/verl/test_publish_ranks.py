"""Publishing across ranks: ``publish_ranks: all``, every trainer rank a share.

Two trainer ranks are two engines built through verl's registry in this process,
each told its rank, the rank count and the launch's run id through the trainer
side's ``group`` (the seam that stands in for the process group); their
publications run on their own background threads (or, synchronously, on two
threads) and meet in a real SeaweedFS bucket over HTTP. The trainer core's own tests
(tests/trainer/) run two processes with a real gloo process group, so that the
run id really is broadcast from rank 0.
"""

from __future__ import annotations

import asyncio
import secrets
import threading
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.trainer.support import latest_version, reader
from tests.trainer.weights import as_published, digests, gen, model, step
from wanrl_s3 import RankGroup, Subscriber, Verifier, generate_keypair
from wanrl_s3.errors import PublicationFailedError, StoreError, UsageError
from wanrl_s3.store import open_store
from wanrl_s3.testing import Fault, FaultProxy, Rule

from .engines import expected, new_engine, send

RANK1 = "wanrl_s3/rank1/"


def ranks(engine_kwargs: dict[str, Any], n: int = 2, **per_rank: Any) -> list[Any]:
    """``n`` trainer engines of one launch (rank 0 is verl's master), told who they are."""
    run_id = f"test-{secrets.token_hex(6)}"  # new for every launch
    engines = []
    for rank in range(n):
        kwargs = {**engine_kwargs, "publish_ranks": "all", **per_rank.get(str(rank), {})}
        engine = new_engine(is_master=rank == 0, **kwargs)
        engine.trainer.group = RankGroup(rank, n, run_id)
        engines.append(engine)
    return engines


def sync_all(engines: list[Any], weights: dict[str, torch.Tensor], g: int) -> list[dict]:
    """One sync on every rank (each returns once its share is copied to host memory)."""
    return [send(e, weights, g) for e in engines]


def wait_all(engines: list[Any]) -> list[dict | None]:
    return [e.wait_published(60.0) for e in engines]


def payload_ids(sub: Subscriber, version: int) -> set[str]:
    """The publish ids of a committed version's payload objects: one per uploading rank."""
    return {o.key.split("/")[0] for o in sub.manifest(version).objects}


def test_two_ranks_publish_their_shares_a_keyframe_then_a_delta(
    engine_kwargs: dict[str, Any], tmp_path: Path
) -> None:
    private, public = generate_keypair()
    (tmp_path / "key.pem").write_bytes(private)
    (tmp_path / "pub.pem").write_bytes(public)
    # only the committing rank signs: the key file need not exist where the others run
    signing = {"0": {"signing_key": str(tmp_path / "key.pem")}, "1": {"signing_key": "/no/key"}}
    engines = ranks(engine_kwargs, **signing)
    store = open_store(engine_kwargs["store_url"], endpoint_url=engine_kwargs["endpoint_url"])
    sub = Subscriber(store, verifier=Verifier.from_file(tmp_path / "pub.pem"))
    weights = model(big=1_000_000)
    snapshot_bytes = sum(t.numel() * t.element_size() for t in as_published(weights).values())

    m0, m1 = sync_all(engines, weights, 0)
    assert (m0["wanrl_s3/queued_version"], m1[RANK1 + "queued_version"]) == (0, 0)
    assert "wanrl_s3/queued_version" not in m1, "rank 1's figures do not overwrite the master's"
    shares = [e.trainer.core._buffers.buffers for e in engines]
    assert set(shares[0]).isdisjoint(shares[1]) and set(shares[0]) | set(shares[1]) == set(weights)
    held = [m0["wanrl_s3/share_bytes"], m1[RANK1 + "share_bytes"]]
    assert sum(held) == snapshot_bytes and max(held) < 0.6 * snapshot_bytes  # memory: a share
    done0, done1 = wait_all(engines)
    assert done0 is not None and (done0["wanrl_s3/version"], done0["wanrl_s3/is_delta"]) == (0, 0)
    assert done0["wanrl_s3/raw_bytes"] == snapshot_bytes  # the version's figures, on the master
    assert done1 is not None and (done1[RANK1 + "version"], done1[RANK1 + "published"]) == (0, 1)
    assert set(done1) == {RANK1 + k for k in ("version", "published", "publish_s")}
    assert latest_version(sub) == 0 and len(payload_ids(sub, 0)) == 2  # both ranks uploaded
    assert digests(sub.fetch(0).to_torch()) == expected(weights)  # whole, signed, bit-exact

    step(weights, 1)
    m0, m1 = sync_all(engines, weights, 1)
    assert m0["wanrl_s3/version"] == 0 and m1[RANK1 + "published"] == 1.0  # v0, reported once
    done0, _ = wait_all(engines)
    assert done0 is not None and done0["wanrl_s3/is_delta"] == 1.0
    assert done0["wanrl_s3/stored_bytes"] < done0["wanrl_s3/raw_bytes"] / 5
    assert sub.manifest(1).base_version == 0 and len(payload_ids(sub, 1)) == 2
    assert digests(sub.fetch(1).to_torch()) == expected(weights)
    for e in engines:
        e.close()


def test_synchronous_ranks_that_see_only_their_own_shards(engine_kwargs: dict[str, Any]) -> None:
    """``background: false`` and ``assign: own``: each rank's generator yields its own tensors."""
    kwargs = {**engine_kwargs, "background": False, "assign": "own"}
    engines = ranks(kwargs)
    weights = model(big=1000)
    names = list(weights)
    got: dict[int, dict] = {}

    def rank(r: int) -> None:  # a synchronous sync returns once the version is committed
        own = {n: weights[n] for n in names[r::2]}
        got[r] = send(engines[r], own, 0)

    threads = [threading.Thread(target=rank, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got[0]["wanrl_s3/published"] == 1.0 and got[0]["wanrl_s3/version"] == 0
    assert got[1][RANK1 + "published"] == 1.0
    sub = reader(engine_kwargs["store_url"], engine_kwargs["endpoint_url"])
    assert digests(sub.fetch(0).to_torch()) == expected(weights)
    assert len(payload_ids(sub, 0)) == 2


def test_a_rank_whose_share_fails_leaves_nothing_visible_and_every_rank_reports_it(
    engine_kwargs: dict[str, Any], s3_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Rank 1 reaches the store through a proxy that fails every upload of v1's payload."""
    fail = Rule(Fault.INTERNAL_ERROR, method="PUT", key=r"/v/0+1/[0-9a-f]+/[^/]+$")
    with FaultProxy(s3_endpoint, rules=[fail]) as proxy:
        engines = ranks(engine_kwargs, **{"1": {"endpoint_url": proxy.url}})
        sub = reader(engine_kwargs["store_url"], s3_endpoint)
        weights = model(big=1000)
        sync_all(engines, weights, 0)
        wait_all(engines)
        step(weights, 1)
        sync_all(engines, weights, 1)
        assert [e.trainer.core.wait(60.0) for e in engines] == [True, True]
        assert proxy.counts[Fault.INTERNAL_ERROR] > 0
        assert latest_version(sub) == 0 and sub.versions() == [0]  # nothing of v1 visible
        step(weights, 2)
        m0, m1 = sync_all(engines, weights, 2)  # an outage mid-run: ridden out, reported
        assert (m0["wanrl_s3/version"], m0["wanrl_s3/failed"]) == (1, 1)
        assert (m1[RANK1 + "version"], m1[RANK1 + "failed"]) == (1, 1)
        assert "publication of v1 failed" in caplog.text
        done0, _ = wait_all(engines)  # v2: every share whole (the failed version took the bases)
        assert done0 is not None and (done0["wanrl_s3/version"], done0["wanrl_s3/is_delta"]) == (
            2,
            0,
        )
        assert digests(sub.fetch(2).to_torch()) == expected(weights)


def test_a_first_publication_that_fails_on_one_rank_is_fatal_on_every_rank(
    engine_kwargs: dict[str, Any], s3_endpoint: str
) -> None:
    fail = Rule(Fault.INTERNAL_ERROR, method="PUT", key=r"/v/0+/[0-9a-f]+/[^/]+$")
    with FaultProxy(s3_endpoint, rules=[fail]) as proxy:
        engines = ranks(engine_kwargs, **{"1": {"endpoint_url": proxy.url}})
        weights = model(big=1000)
        sync_all(engines, weights, 0)
        for rank, engine in enumerate(engines):
            with pytest.raises(PublicationFailedError, match="v0 failed: StoreError") as info:
                send(engine, weights, 1)
            assert isinstance(info.value.__cause__, StoreError), rank
    assert latest_version(reader(engine_kwargs["store_url"], s3_endpoint)) is None


def test_settings_and_a_rank_without_a_process_group(engine_kwargs: dict[str, Any]) -> None:
    with pytest.raises(UsageError, match=r"wanrl_s3\.publish_ranks must be one of master, all"):
        new_engine(is_master=True, **engine_kwargs, publish_ranks="every")
    with pytest.raises(UsageError, match=r"wanrl_s3\.assign applies only with publish_ranks: all"):
        new_engine(is_master=True, **engine_kwargs, assign="own")
    with pytest.raises(UsageError, match=r"wanrl_s3\.share_timeout_s must be > 0"):
        new_engine(is_master=True, **engine_kwargs, publish_ranks="all", share_timeout_s=0)
    # no process group: a non-master rank cannot know its rank; it says so, and still drains
    lonely = new_engine(is_master=False, **engine_kwargs, publish_ranks="all")
    consumed: list[str] = []
    tensors = ((consumed.append(n) or n, t) for n, t in gen(model(big=10)))
    with pytest.raises(UsageError, match=r"needs torch\.distributed initialised"):
        asyncio.run(lonely.send_weights(tensors, global_steps=0))
    assert len(consumed) == 5
    # the master alone is one rank of one: it publishes everything, and commits it
    alone = new_engine(is_master=True, **engine_kwargs, publish_ranks="all")
    weights = model(big=10)
    send(alone, weights, 0)
    assert alone.wait_published(60.0)["wanrl_s3/published"] == 1.0
    assert alone.trainer.group.ranks == 1
    odd = new_engine(is_master=False, **engine_kwargs, publish_ranks="all")
    odd.trainer.group = RankGroup(0, 2, "r")
    with pytest.raises(UsageError, match="the master commits and signs, so it must be rank 0"):
        send(odd, weights, 0)
