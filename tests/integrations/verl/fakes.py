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
from pathlib import Path
from typing import Any

from verl.checkpoint_engine.base import CheckpointEngineRegistry
from verl.single_controller.base import Worker
from verl.single_controller.base.decorator import Dispatch, register
from verl.utils.config import omega_conf_to_dataclass
from verl.utils.import_utils import import_external_libs
from verl.workers.rollout import BaseRollout
from verl.workers.rollout.utils import ensure_async_iterator

from tests.trainer.weights import digests, policy


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
