"""A trainer's weights and their digests, without verl (light enough for child processes)."""

from __future__ import annotations

from collections.abc import Iterable

import torch

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
