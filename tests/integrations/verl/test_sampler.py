"""The staleness sampler inside verl's v1 replay path: TransferQueue on Ray, synthetic batches.

Trajectories are tagged the way verl's agent loop tags them (``min_global_steps``
...); the rollout workers' status objects, written by the engine's own
StepStatusWriter into a SeaweedFS bucket, say what those steps really meant.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from wanrl_s3 import StepStatusWriter
from wanrl_s3.store import open_store
from wanrl_s3_verl.sampler import StalenessReplayBuffer

# global_steps -> installed version, per rollout worker: B lagged behind on steps 2-4
WORKERS = {"verl-a": {1: 1, 2: 2, 3: 3, 4: 3, 5: 4}, "verl-b": {1: 0, 2: 1, 3: 2, 4: 2, 5: 5}}
# prompt uid -> (its dataloader step, the min_global_steps of its trajectories)
GROUPS = {
    "ga": (5, [5, 5]),  # true version 4: age 1 at step 6, admitted
    "gb": (4, [4, 5]),  # true version 2: age 3, admitted (the boundary)
    "gc": (2, [2, 3]),  # true version 1: age 4, dropped (at face value 2: admitted)
    "gd": (1, [1]),
}  # true version 0: age 5, dropped either way


def put_groups(tq: Any, partition: str) -> None:
    """Finished prompt groups and their trajectories, as verl's agent loop stores them."""
    keys, tags = [], []
    for uid, (prompt_step, steps) in GROUPS.items():
        for i, m in enumerate(steps):
            keys.append(f"{uid}_{i}_0")
            tags.append(
                {
                    "status": "finished",
                    "prompt_len": 4,
                    "response_len": 4,
                    "seq_len": 8,
                    "global_steps": prompt_step,
                    "min_global_steps": m,
                    "max_global_steps": m,
                }
            )
    tq.kv_batch_put(keys=keys, partition_id=partition, fields=_fields(len(keys)), tags=tags)
    tq.kv_batch_put(
        keys=list(GROUPS),
        partition_id=partition,
        tags=[
            {"is_prompt": True, "status": "finished", "global_steps": p} for p, _ in GROUPS.values()
        ],
    )


def _fields(n: int) -> Any:
    from tensordict import TensorDict

    return TensorDict({"input_ids": torch.arange(n * 8).reshape(n, 8)}, batch_size=n)


def record_workers(url: str, endpoint: str) -> None:
    store = open_store(url, endpoint_url=endpoint)
    for worker_id, steps in WORKERS.items():
        writer = StepStatusWriter(store, worker_id)
        for g, v in steps.items():
            writer.synced(g, v)
        writer.flush()
        writer.close()


def sampler(
    sampler_kwargs: dict[str, Any],
    refills: list[int],
    parameter_sync_step: int,
    mode: str = "separate_async",
) -> StalenessReplayBuffer:
    """Built with exactly the arguments verl's PPOTrainer._build_replay_buffer passes."""
    from omegaconf import OmegaConf

    return StalenessReplayBuffer(
        trainer_mode=mode,
        trainer_config=OmegaConf.create({"parameter_sync_step": parameter_sync_step}),
        max_off_policy_threshold=None,
        max_off_policy_strategy="drop",
        sampler_kwargs=OmegaConf.create(sampler_kwargs),
        refill_fn=refills.append,
    )


def test_stale_groups_are_dropped_by_their_true_version(
    transfer_queue: Any, s3_url: str, s3_endpoint: str
) -> None:
    from verl.trainer.ppo.v1.utils import MetricsAggregator

    record_workers(s3_url, s3_endpoint)
    put_groups(transfer_queue, "hazard")
    refills: list[int] = []
    buffer = sampler(
        {"staleness": 3, "store_url": s3_url, "endpoint_url": s3_endpoint},
        refills,
        parameter_sync_step=2,
    )
    # step 6 (the learner holds version 5) in two mini-batches, as verl calls it
    first, m1 = buffer.sample(global_steps=6, partition_id="hazard", batch_size=1)
    second, m2 = buffer.sample(global_steps=6, partition_id="hazard", batch_size=1)
    assert first.keys == ["gb_0_0", "gb_1_0"] and second.keys == ["ga_0_0", "ga_1_0"]
    assert refills == [2]  # the two stale groups, replaced by fresh prompts
    assert not any(k.startswith("staleness/") for k in m1)  # reported once per step...
    assert {k: m2[f"staleness/{k}"] for k in ("generated", "admitted", "dropped")} == {
        "generated": 4,
        "admitted": 2,
        "dropped": 2,
    }
    assert m2["staleness/age_hist/1"] == 1 and m2["staleness/age_hist/3"] == 1
    assert m2["staleness/age_hist/over"] == 2 and m2["staleness/learner_version"] == 5
    # ...so verl's aggregation over the step's iterations keeps the counts whole
    agg = MetricsAggregator()
    agg.add_step_metrics(m1, sample_count=2)
    agg.add_step_metrics(m2, sample_count=2)
    merged = agg.get_aggregated_metrics()
    assert (merged["staleness/admitted"], merged["staleness/dropped"]) == (2, 2)
    left = (transfer_queue.kv_list(partition_id="hazard") or {}).get("hazard", {})
    assert {k.split("_")[0] for k in left} == {"ga", "gb"}  # the dropped ones are gone


def test_without_a_store_the_tag_is_taken_at_face_value(transfer_queue: Any) -> None:
    put_groups(transfer_queue, "face")
    refills: list[int] = []
    buffer = sampler({"staleness": 3}, refills, parameter_sync_step=1)
    batch, metrics = buffer.sample(global_steps=6, partition_id="face", batch_size=3)
    assert sorted({k.split("_")[0] for k in batch.keys}) == ["ga", "gb", "gc"]
    assert (metrics["staleness/admitted"], metrics["staleness/dropped"]) == (3, 1)
    assert refills == [1]


def test_a_bad_budget_is_refused_when_verl_builds_the_sampler() -> None:
    from wanrl_s3.errors import UsageError

    with pytest.raises(UsageError, match=r"sampler_kwargs\.staleness"):
        sampler({"staleness": 2}, [], parameter_sync_step=1)
    with pytest.raises(UsageError, match="needs an async trainer"):
        sampler({"staleness": 3}, [], parameter_sync_step=1, mode="sync")
