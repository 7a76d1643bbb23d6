"""verl's whole weight-sync sequence on Ray, on CPU, with the wanrl_s3 backend.

verl's own ``CheckpointEngineManager`` drives two trainer ranks and two of verl's
own ``CheckpointEngineWorker`` actors (each builds our engine through
``custom_backend_module``, in its own process); only the model, the GPU server
behind the rollout worker and the replica bookkeeping are fakes (fakes.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import ray
from omegaconf import OmegaConf

from tests.trainer.weights import expected
from wanrl_s3 import VersionMap
from wanrl_s3.store import open_store

from .fakes import FakeActorWorker, FakeReplica, FakeServerAdapter

SYNCS = 4


def worker_group(cls: type, **init: Any) -> Any:
    from verl.single_controller.ray import RayClassWithInitArgs, RayResourcePool, RayWorkerGroup

    return RayWorkerGroup(
        resource_pool=RayResourcePool(process_on_nodes=[2], use_gpu=False, max_colocate_count=1),
        ray_cls_with_init=RayClassWithInitArgs(cls=ray.remote(cls), **init),
        use_gpu=False,
        device_name="cpu",
    )


def wait_held(rollout_wg: Any, version: int, timeout_s: float = 60.0) -> None:
    """Until every rollout engine has ``version`` ready (its background prefetch)."""
    deadline = time.monotonic() + timeout_s
    n = rollout_wg.world_size
    while time.monotonic() < deadline:
        held = ray.get(rollout_wg.execute_checkpoint_engine(["held_version"] * n))
        if held == [version] * n:
            return
        time.sleep(0.1)
    raise AssertionError(f"rollout engines hold {held}, not v{version}")


def test_checkpoint_engine_manager_syncs_through_the_bucket(
    ray_session: Any, s3_url: str, s3_endpoint: str, tmp_path: Path
) -> None:
    from verl.checkpoint_engine.base import CheckpointEngineManager, CheckpointEngineWorker
    from verl.utils.config import omega_conf_to_dataclass

    ce = OmegaConf.create(
        {
            "_target_": "verl.workers.config.CheckpointEngineConfig",
            "backend": "wanrl_s3",
            "update_weights_bucket_megabytes": 64,
            "custom_backend_module": "wanrl_s3_verl.backend",
            "engine_kwargs": {
                "wanrl_s3": {
                    "store_url": s3_url,
                    "endpoint_url": s3_endpoint,
                    "poll_interval_s": 0.1,
                    "wait_for_first_s": 60.0,
                }
            },
        }
    )
    rollout_config = OmegaConf.create({"name": "vllm", "mode": "async", "checkpoint_engine": ce})
    rollout_wg = worker_group(
        CheckpointEngineWorker,
        rollout_config=rollout_config,
        model_config=None,
        server_adapter=FakeServerAdapter(str(tmp_path)),
    )
    actor_wg = worker_group(FakeActorWorker, checkpoint_engine=ce)
    replica = FakeReplica(rollout_wg.workers)
    manager = CheckpointEngineManager(
        config=omega_conf_to_dataclass(ce), actor_wg=actor_wg, replicas=[replica]
    )

    for g in range(SYNCS):
        metrics = manager.update_weights(global_steps=g)  # verl's steps 1-8, in order
        # published in the background: each sync queues its own version and reports the
        # previous one's figures (finished: the rollout engines hold it already)
        assert (metrics["wanrl_s3/queued"], metrics["wanrl_s3/queued_version"]) == (1.0, g)
        assert metrics["wanrl_s3/publish_copy_s"] > 0
        if g:
            assert (metrics["wanrl_s3/published"], metrics["wanrl_s3/version"]) == (1.0, g - 1)
            assert metrics["wanrl_s3/is_delta"] == (1.0 if g > 1 else 0.0)
        wait_held(rollout_wg, g)  # so the next sync has this version ready to install
    assert (
        replica.calls
        == ["abort", "release_kv_cache", "resume_kv_cache", "resume_generation"] * SYNCS
    )

    # what each rollout engine recorded, read back from the bucket as the sampler does
    versions = VersionMap(open_store(s3_url, endpoint_url=s3_endpoint))
    versions.refresh()
    assert len(versions.workers) == 2
    for worker in versions.workers:
        steps = worker.steps
        assert steps[0] == 0  # no version held: it waited for the first one
        for g in range(1, SYNCS):  # never waits: the version ready when the sync came
            assert steps[g] in (g - 1, g), steps
        pid = worker.worker_id.rsplit("-", 1)[1]
        for g in range(SYNCS):
            record = json.loads((tmp_path / f"{pid}-{g}.json").read_text())
            new = g == 0 or steps[g] != steps[g - 1]
            assert record["wire_format"] == "named_tensors"
            assert record["digests"] == (expected(steps[g]) if new else {}), (g, steps)
    for g in range(SYNCS):
        assert versions.true_version(g) == min(w.steps[g] for w in versions.workers)
