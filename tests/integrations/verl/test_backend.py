"""The ``wanrl_s3`` checkpoint engine, built through verl's own hook and registry.

The cross-process test is the issue's acceptance test: a trainer-side engine
here, a rollout-side engine in another process (built like verl's
CheckpointEngineWorker builds it), the SeaweedFS S3 server between them over HTTP.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from verl.checkpoint_engine.base import CheckpointEngineRegistry
from verl.utils.import_utils import import_external_libs

from tests.trainer.support import ChildProcess, delete_bucket
from tests.trainer.weights import digests, gen, model, step
from wanrl_s3 import VersionMap
from wanrl_s3.errors import UsageError
from wanrl_s3.format.signing import generate_keypair
from wanrl_s3.store import open_store

from .engines import MODULE, expected, new_engine, publish, send

CHILD = "tests.integrations.verl.rollout_child"


def test_trainer_and_rollout_engines_in_two_processes_through_s3(
    engine_kwargs: dict[str, Any],
) -> None:
    trainer = new_engine(is_master=True, **engine_kwargs)
    weights = model()
    metrics = publish(trainer, weights, 0)
    assert metrics["wanrl_s3/published"] == 1.0 and metrics["wanrl_s3/is_delta"] == 0.0
    # verl's rollout config: the background poll is off, the test decides when to look
    ce_config = {
        "backend": "wanrl_s3",
        "custom_backend_module": MODULE,
        "update_weights_bucket_megabytes": 2048,
        "engine_kwargs": {"wanrl_s3": {**engine_kwargs, "poll_interval_s": 3600.0}},
    }
    child = ChildProcess(CHILD, ce_config)
    try:
        assert child.read() == {"ready": "WanrlS3CheckpointEngine"}
        for g in range(4):
            if g:
                step(weights, g)
                metrics = publish(trainer, weights, g)
                assert metrics["wanrl_s3/is_delta"] == 1.0, "full first, then deltas"
                assert metrics["wanrl_s3/stored_bytes"] < metrics["wanrl_s3/raw_bytes"] / 5
            assert child.ask(cmd="prefetch", version=g) == {"ready_version": g}
            got = child.ask(cmd="sync", global_steps=g)
            assert got["digests"] == expected(weights), f"step {g}: not bit-identical"
            assert got["installed"] == g
            if g == 0:  # the keyframe: a real download, done (and verified) before the sync
                assert got["download_s"] > 0 and got["ready_at_s"] < got["sync_at_s"], got
            else:
                assert got["downloaded_bytes"] < 14_000_000 / 5
        # v4 is published but this worker has not fetched it: the sync does not wait for it
        step(weights, 4)
        publish(trainer, weights, 4)
        got = child.ask(cmd="sync", global_steps=4)
        assert (got["digests"], got["installed"]) == ({}, 3)
        # ...and the status object says what step 4 really means
        steps = child.ask(cmd="steps")["steps"]
        assert steps == {"0": 0, "1": 1, "2": 2, "3": 3, "4": 3}
        store = open_store(engine_kwargs["store_url"], endpoint_url=engine_kwargs["endpoint_url"])
        versions = VersionMap(store)
        assert [versions.true_version(s) for s in range(6)] == [0, 1, 2, 3, 3, 3]
    finally:
        child.close()


def test_the_import_hook_registers_the_backend() -> None:
    """verl's import_external_libs is what puts wanrl_s3 in the registry (fresh import)."""
    saved_module = sys.modules.pop(MODULE, None)
    saved_cls = CheckpointEngineRegistry._registry.pop("wanrl_s3", None)
    try:
        with pytest.raises(ValueError, match="wanrl_s3 not registered"):
            CheckpointEngineRegistry.get("wanrl_s3")
        import_external_libs(MODULE)
        cls = CheckpointEngineRegistry.get("wanrl_s3")
        assert cls.__module__ == MODULE and cls.__name__ == "WanrlS3CheckpointEngine"
    finally:  # put the first import back: other tests hold its classes
        if saved_module is not None:
            sys.modules[MODULE] = saved_module
        if saved_cls is not None:
            CheckpointEngineRegistry._registry["wanrl_s3"] = saved_cls


def test_non_master_ranks_drain_in_lockstep_and_never_touch_the_store() -> None:
    seen = []

    def weights() -> Iterator[tuple[str, torch.Tensor]]:
        for i in range(3):
            seen.append(i)  # an all-gather in FSDP: every rank must take part
            yield f"w{i}", torch.zeros(4)

    engine = new_engine(is_master=False, store_url="s3://no-such-bucket-anywhere/x")
    assert asyncio.run(engine.send_weights(weights(), global_steps=1)) == {}
    assert seen == [0, 1, 2]
    assert engine.prepare() == {"backend": "wanrl_s3", "role": "trainer"}


def test_publish_every_kappa_steps_and_skip_versions_the_store_already_has(
    engine_kwargs: dict[str, Any],
) -> None:
    """``background: false``: each sync publishes before it returns, and says how it went."""
    weights = model(big=1000)
    engine_kwargs = {**engine_kwargs, "background": False}
    trainer = new_engine(is_master=True, **engine_kwargs, publish_every=2)
    published = [send(trainer, weights, g)["wanrl_s3/published"] for g in (3, 4, 5, 6)]
    assert published == [1.0, 1.0, 0.0, 1.0]  # the first sync, then every 2nd step
    # a resumed trainer at step 4: the store already holds 4 (and 6), so it skips, and
    # still consumes verl's generator
    resumed = new_engine(is_master=True, **engine_kwargs)
    consumed = []
    tensors = ((consumed.append(n) or n, t) for n, t in gen(weights))
    got = asyncio.run(resumed.send_weights(tensors, global_steps=4))
    assert got == {"wanrl_s3/published": 0.0}
    assert consumed == list(weights)
    assert send(resumed, weights, 7)["wanrl_s3/published"] == 1.0


def test_a_restarted_trainer_resumes_with_deltas(engine_kwargs: dict[str, Any]) -> None:
    """After a restart, the first publication is a delta against the store's newest version."""
    weights = model()
    first = new_engine(is_master=True, **engine_kwargs)
    assert publish(first, weights, 1)["wanrl_s3/is_delta"] == 0.0
    step(weights, 1)
    assert publish(first, weights, 2)["wanrl_s3/is_delta"] == 1.0
    # the trainer process dies; a new one restarts from its step-2 checkpoint
    restarted = new_engine(is_master=True, **engine_kwargs)
    step(weights, 2)
    metrics = publish(restarted, weights, 3)
    assert metrics["wanrl_s3/published"] == 1.0 and metrics["wanrl_s3/is_delta"] == 1.0
    assert metrics["wanrl_s3/stored_bytes"] < 0.1 * metrics["wanrl_s3/raw_bytes"]


def test_the_trainer_signs_or_says_so_and_resumes_from_what_verify_key_trusts(
    tmp_path: Path,
) -> None:
    """``verify_key`` is the workers' keyring on the trainer too: after a key rotation the
    old key's versions stay a delta base while the keyring holds the old key. A restart
    that forgot ``signing_key`` is refused the signed run, unless ``allow_unsigned``."""
    (old, old_pub), (new, new_pub) = generate_keypair(), generate_keypair()
    for path, pem in (("old.pem", old), ("new.pem", new), ("both.pub.pem", old_pub + new_pub)):
        (tmp_path / path).write_bytes(pem)
    kwargs = {"store_url": f"memory://{uuid.uuid4().hex}", "background": False}
    weights = model(big=1000)
    send(new_engine(is_master=True, **kwargs, signing_key=str(tmp_path / "old.pem")), weights, 0)
    forgot = new_engine(is_master=True, **kwargs)
    with pytest.raises(UsageError, match="holds a signed run"):
        send(forgot, weights, 1)
    rotated = new_engine(
        is_master=True,
        **kwargs,
        signing_key=str(tmp_path / "new.pem"),
        verify_key=str(tmp_path / "both.pub.pem"),
    )
    step(weights, 1)
    assert send(rotated, weights, 1)["wanrl_s3/is_delta"] == 1.0  # the new key alone: full
    allowed = new_engine(is_master=True, **kwargs, allow_unsigned=True)
    step(weights, 2)
    assert send(allowed, weights, 2)["wanrl_s3/published"] == 1.0


def test_rollout_engine_takes_verls_dictconfig_and_stops_cleanly(
    engine_kwargs: dict[str, Any],
) -> None:
    from omegaconf import OmegaConf

    kwargs = OmegaConf.create({"wanrl_s3": {**engine_kwargs, "wait_for_first_s": 0.0}})
    engine = new_engine(**kwargs["wanrl_s3"])
    try:
        assert engine.role == "rollout"
        # nothing published, nothing held, no wait: the sync leaves the weights alone
        assert asyncio.run(_collect(engine.receive_weights(global_steps=0))) == []
        assert engine.steps() == {0: None}
    finally:
        engine.close()
    with pytest.raises(UsageError, match="send_weights was called on a rollout engine"):
        asyncio.run(engine.send_weights(gen({}), global_steps=0))


def test_bad_settings_fail_at_construction_with_the_key_and_the_fix() -> None:
    with pytest.raises(UsageError, match=r"engine_kwargs\.wanrl_s3\.store_url is required"):
        new_engine(is_master=True)
    with pytest.raises(UsageError, match=r"engine_kwargs\.wanrl_s3\.publish_every must be"):
        new_engine(is_master=True, store_url="memory://x", publish_every=0)
    with pytest.raises(UsageError, match=r"engine_kwargs\.wanrl_s3\.dtype must be one of"):
        new_engine(is_master=True, store_url="memory://x", dtype="fp8")
    with pytest.raises(UsageError, match=r"engine_kwargs\.wanrl_s3\.background must be true or"):
        new_engine(is_master=True, store_url="memory://x", background="yes")
    with pytest.raises(UsageError, match=r"engine_kwargs\.wanrl_s3\.close_wait_s must be >= 0"):
        new_engine(is_master=True, store_url="memory://x", close_wait_s=-1)


async def _collect(agen: Any) -> list[Any]:
    return [item async for item in agen]


def test_a_regions_file_fans_out_and_each_worker_reads_its_own_region(
    s3_endpoint: str, tmp_path: Path
) -> None:
    from wanrl_s3.testing import make_bucket
    from wanrl_s3_verl.config import FilterSettings

    buckets = {name: make_bucket(s3_endpoint) for name in ("east", "west")}
    regions = tmp_path / "regions.toml"
    regions.write_text(
        'primary = "east"\nmode = "fanout"\n'
        + "".join(
            f'[regions.{name}]\nurl = "s3://{bucket}/run"\nendpoint_url = "{s3_endpoint}"\n'
            for name, bucket in buckets.items()
        )
    )
    common = {"regions": str(regions), "poll_interval_s": 0.1, "wait_for_first_s": 30.0}
    trainer = new_engine(is_master=True, **common)
    weights = model(big=1000)
    publish(trainer, weights, 0)
    rollout = new_engine(**common, region="west")
    try:
        got = asyncio.run(_collect(rollout.receive_weights(global_steps=0)))
        assert digests(got) == expected(weights)
        assert rollout.steps() == {0: 0}
    finally:
        rollout.close()
    # the worker reported to its own region; the sampler reads every region
    west = open_store(f"s3://{buckets['west']}/run", endpoint_url=s3_endpoint)
    assert [i.key for i in west.list("workers/")] == [f"workers/{rollout.rollout.worker_id}.json"]
    versions = FilterSettings.from_mapping({"regions": str(regions)}).version_map()
    assert versions is not None and versions.true_version(0) == 0
    assert len(versions.workers) == 1
    with pytest.raises(UsageError, match=r"store_url and .*regions exclude each other"):
        new_engine(is_master=True, **common, store_url="s3://b/p")


def test_a_store_failure_stops_the_first_publication_but_not_a_running_job(
    engine_kwargs: dict[str, Any],
) -> None:
    """``background: false``: the synchronous path's policy (the background one's is the same)."""
    from wanrl_s3.errors import StoreError

    weights = model(big=1000)
    engine_kwargs = {**engine_kwargs, "background": False}
    wrong = new_engine(is_master=True, **{**engine_kwargs, "store_url": "s3://no-such-bkt/r"})
    consumed: list[str] = []
    tensors = ((consumed.append(n) or n, t) for n, t in gen(weights))
    with pytest.raises(StoreError, match="the first publication to s3://no-such-bkt/r failed"):
        asyncio.run(wrong.send_weights(tensors, global_steps=0))
    assert consumed == list(weights)  # drained all the same: the other ranks are waiting
    trainer = new_engine(is_master=True, **engine_kwargs)
    assert send(trainer, weights, 0)["wanrl_s3/published"] == 1.0
    delete_bucket(engine_kwargs)  # the store goes away mid-run
    got = send(trainer, weights, 1)
    assert got == {"wanrl_s3/published": 0.0, "wanrl_s3/failed": 1.0}


def test_rollout_engines_on_one_host_download_once_through_the_host_cache(
    engine_kwargs: dict[str, Any], tmp_path: Any
) -> None:
    """``host_cache_dir``: two rollout processes, each version downloaded by one of them."""
    trainer = new_engine(is_master=True, **engine_kwargs)
    weights = model()
    cache = {"host_cache_dir": str(tmp_path / "cache"), "poll_interval_s": 3600.0}
    ce_config = {
        "backend": "wanrl_s3",
        "custom_backend_module": MODULE,
        "update_weights_bucket_megabytes": 2048,
        "engine_kwargs": {"wanrl_s3": {**engine_kwargs, **cache}},
    }
    children = [ChildProcess(CHILD, ce_config) for _ in range(2)]
    try:
        assert [c.read() for c in children] == [{"ready": "WanrlS3CheckpointEngine"}] * 2
        for g in range(2):
            if g:
                step(weights, g)
            publish(trainer, weights, g)
            got = []
            for c in children:
                assert c.ask(cmd="prefetch", version=g) == {"ready_version": g}
                got.append(c.ask(cmd="sync", global_steps=g))
            assert all(r["digests"] == expected(weights) for r in got), f"step {g}"
            assert sorted(bool(r["downloaded_bytes"]) for r in got) == [False, True], got
    finally:
        for c in children:
            c.close()
