"""Helpers the engine tests share: verl's way of building an engine, a trainer's weights.

Weights (``model``, ``step``, ``gen``: verl's per-tensor generator) come from the
trainer core's tests; ``publish`` is one sync followed by the wait for its
publication (in the background by default), so a test can assert on what was
committed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import torch
from verl.checkpoint_engine.base import CheckpointEngineRegistry
from verl.utils.import_utils import import_external_libs

from tests.trainer.weights import as_published, digests, gen

MODULE = "wanrl_s3_verl.backend"


def new_engine(**kwargs: Any) -> Any:
    """What verl does on every process that builds an engine: the import hook, then new()."""
    import_external_libs(MODULE)
    return CheckpointEngineRegistry.new("wanrl_s3", bucket_size=2048 << 20, **kwargs)


def expected(weights: dict[str, torch.Tensor]) -> dict[str, str]:
    """What the rollout must receive: floating tensors cast to bf16, bits included."""
    return digests(as_published(weights))


def send(engine: Any, weights: dict[str, torch.Tensor], global_steps: int) -> dict[str, float]:
    return asyncio.run(engine.send_weights(gen(weights), global_steps=global_steps))


def publish(engine: Any, weights: dict[str, torch.Tensor], global_steps: int) -> dict[str, float]:
    """One sync, then the publication's figures once it is done (in the background or not)."""
    metrics = send(engine, weights, global_steps)
    return engine.wait_published(60.0) or metrics
