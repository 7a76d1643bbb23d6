"""Stand-ins for the parts of verl that need a GPU and a model, for Ray-on-CPU tests.

Everything else in those tests is verl's own: ``CheckpointEngineWorker`` (the
rollout side's Ray actor, which builds our engine through verl's import hook),
``RayWorkerGroup`` and ``CheckpointEngineManager`` (the whole sync sequence).
The fakes follow verl 0.9.1's code: the actor worker builds and drives the
engine as ``ActorRolloutRefWorker`` does (engine_workers.py:677-766), the server
adapter consumes weights as vLLM's adapter does, but records digests to a folder.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from verl.checkpoint_engine.base import CheckpointEngineRegistry
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.import_utils import import_external_libs
from verl.workers.rollout import BaseRollout
from verl.workers.rollout.utils import ensure_async_iterator

from wanrl_s3.format import hashing
from wanrl_s3.io.tensors import byte_view, to_numpy


def policy(global_steps: int) -> dict[str, torch.Tensor]:
    """The trainer's fp32 weights after ``global_steps`` updates, the same on every rank."""
    g = torch.Generator().manual_seed(7)
    weights = {
        "model.embed_tokens.weight": torch.randn(512, 256, generator=g),
        "model.layers.0.self_attn.q_proj.weight": torch.randn(256, 256, generator=g),
        "model.layers.0.input_layernorm.weight": torch.ones(256),
        "lm_head.weight": torch.randn(512, 256, generator=g),
    }
    for step in range(1, global_steps + 1):
        u = torch.Generator().manual_seed(step)
        for t in weights.values():
            flat = t.view(-1)
            flat[torch.randint(0, flat.numel(), (flat.numel() // 50,), generator=u)] += 0.25
    return weights


def digests(named: Iterable[tuple[str, torch.Tensor]] | dict[str, torch.Tensor]) -> dict[str, str]:
    """Each tensor's dtype and the BLAKE3 of its bytes: equal digests, equal bits."""
    items = named.items() if isinstance(named, dict) else named
    return {name: f"{t.dtype}:{hashing.digest(byte_view(to_numpy(t)))}" for name, t in items}


def as_published(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """What the backend publishes by default: floating tensors in bf16, the rest as they are."""
    return {n: t.to(torch.bfloat16) if t.is_floating_point() else t for n, t in weights.items()}


def expected(global_steps: int) -> dict[str, str]:
    """What a rollout must receive for version ``global_steps``, bit for bit."""
    return digests(as_published(policy(global_steps)))


class FakeActorWorker(Worker):
    """A trainer rank: builds the engine and sends weights exactly as verl's actor worker."""

    def __init__(self, checkpoint_engine: Any) -> None:
        super().__init__()
        config = omega_conf_to_dataclass(checkpoint_engine)
        engine_kwargs = config.engine_kwargs.get(config.backend, {})
        import_external_libs(config.custom_backend_module or None)
        self.checkpoint_engine = CheckpointEngineRegistry.new(
            config.backend,
            is_master=(self.rank == 0),
            bucket_size=config.update_weights_bucket_megabytes << 20,
            **engine_kwargs,
        )

    @register(dispatch_mode=Dispatch.ONE_TO_ALL, blocking=False)
    async def update_weights(self, global_steps: int | None = None, mode: str = "auto") -> dict:
        per_tensor_param = ((n, t) for n, t in policy(global_steps or 0).items())
        metrics = await self.checkpoint_engine.send_weights(
            per_tensor_param, global_steps=global_steps
        )
        return metrics or {}

    @register(dispatch_mode=Dispatch.DP_COMPUTE, blocking=False)
    def execute_checkpoint_engine(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return getattr(self.checkpoint_engine, method)(*args, **kwargs)


class FakeServerAdapter(BaseRollout):
    """The rollout server's side of a sync: consumes the weights, records what it got."""

    def __init__(self, out_dir: str) -> None:  # no server to start: skip BaseRollout's init
        self.out_dir = out_dir
        self.replica_rank = 0
        self.is_leader_rank = True

    async def update_weights(
        self,
        weights: Any,
        wire_format: str = "named_tensors",
        global_steps: int | None = None,
        **kwargs: Any,
    ) -> None:
        got = [(name, t) async for name, t in ensure_async_iterator(weights)]
        record = {"wire_format": wire_format, "digests": digests(iter(got))}
        path = Path(self.out_dir) / f"{os.getpid()}-{global_steps}.json"
        path.write_text(json.dumps(record))

    async def resume(self, tags: list[str]) -> None:
        return None

    async def release(self) -> None:
        return None


class FakeReplica:
    """What CheckpointEngineManager asks of a rollout replica besides its workers."""

    def __init__(self, workers: list[Any]) -> None:
        self.workers = workers
        self.calls: list[str] = []

    async def abort_all_requests(self, reject_request: bool = False) -> None:
        self.calls.append("abort")

    async def release_kv_cache(self) -> None:
        self.calls.append("release_kv_cache")

    async def resume_kv_cache(self) -> None:
        self.calls.append("resume_kv_cache")

    async def resume_generation(self) -> None:
        self.calls.append("resume_generation")
