"""A trainer's weights and their digests, without verl (light enough for child processes).

Weights are fp32 master weights like a trainer's; ``gen`` is a per-tensor generator
like verl's (a fresh full tensor per name), ``step`` an optimizer step.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

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


def model(seed: int = 0, big: int = 6_000_000) -> dict[str, torch.Tensor]:
    """fp32 master weights like a trainer's, plus an integer buffer; ~14 MB in bf16."""
    g = torch.Generator().manual_seed(seed)
    return {
        "model.embed.weight": torch.randn(big, generator=g),
        "model.layers.0.mlp.weight": torch.randn(1000, 1000, generator=g),
        "model.layers.0.norm.weight": torch.ones(1000),
        "model.rotary.inv_freq": torch.rand(64, generator=g, dtype=torch.float64),
        "model.position_ids": torch.arange(512),
    }


def step(weights: dict[str, torch.Tensor], seed: int) -> None:
    """An optimizer step that moves about 1% of the parameters (a sparse bf16 change)."""
    g = torch.Generator().manual_seed(1000 + seed)
    for t in weights.values():
        if t.is_floating_point():
            flat = t.view(-1)
            idx = torch.randint(0, flat.numel(), (max(1, flat.numel() // 100),), generator=g)
            flat[idx] += 0.5


def gen(weights: dict[str, torch.Tensor]) -> Iterator[tuple[str, torch.Tensor]]:
    """A per-tensor generator like verl's: a fresh full tensor per name."""
    for name, t in weights.items():
        yield name, t.clone()
