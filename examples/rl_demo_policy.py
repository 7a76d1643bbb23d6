"""The demo's policy and task: a small decoder-only transformer learning to reverse digits.

The task has a reward anyone can check: the prompt is ``length`` random digits,
the completion should be those digits reversed, and the reward is the fraction
of positions that are right (0.1 for a random policy with ten digits, 1.0 when
solved). It is hard enough that a random transformer starts near chance and
easy enough that policy gradient on two CPU cores climbs within a minute or two.

Training is GRPO-style: every prompt is sampled ``group`` times under one
policy version, and each completion's advantage is its reward minus the
group's mean, over the group's standard deviation. No value network, no
reference model: the smallest honest policy-gradient learner.

Everything here is plain torch, built from scratch; nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class TaskConfig:
    """The reversal task and the model that learns it."""

    digits: int = 10
    length: int = 6
    d_model: int = 64
    layers: int = 2
    heads: int = 4

    def __post_init__(self) -> None:
        for name in ("digits", "length", "d_model", "layers", "heads"):
            if getattr(self, name) < 1:
                raise ValueError(f"TaskConfig.{name} must be >= 1, got {getattr(self, name)}")
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} must divide by heads {self.heads}")

    @property
    def bos(self) -> int:
        return self.digits

    @property
    def sep(self) -> int:
        return self.digits + 1

    @property
    def seq_len(self) -> int:
        """BOS, the prompt, SEP, the completion."""
        return 2 * self.length + 2


class Block(nn.Module):
    """Pre-norm attention + MLP, causal."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.norm2 = nn.LayerNorm(d_model)
        self.up = nn.Linear(d_model, 4 * d_model)
        self.down = nn.Linear(4 * d_model, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        qkv = self.qkv(self.norm1(x)).view(b, t, 3, self.heads, d // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Policy(nn.Module):
    """Token and position embeddings, ``layers`` blocks, a head over the digits only."""

    def __init__(self, cfg: TaskConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.digits + 2, cfg.d_model)
        self.pos = nn.Embedding(cfg.seq_len, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg.d_model, cfg.heads) for _ in range(cfg.layers))
        self.norm = nn.LayerNorm(cfg.d_model)
        self.head = nn.Linear(cfg.d_model, cfg.digits)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))  # type: ignore[no-any-return]


def param_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# ------------------------------------------------------------------ the task


def prompts(cfg: TaskConfig, count: int, group: int, gen: torch.Generator) -> torch.Tensor:
    """``count`` random prompts, each repeated ``group`` times (one GRPO group each)."""
    drawn = torch.randint(0, cfg.digits, (count, cfg.length), generator=gen)
    return drawn.repeat_interleave(group, 0)


def reward(prompt: torch.Tensor, completion: torch.Tensor) -> torch.Tensor:
    """Fraction of positions where the completion is the prompt reversed."""
    return (completion == prompt.flip(1)).float().mean(1)


@torch.no_grad()
def sample(model: Policy, prompt: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Complete each prompt by sampling ``length`` digits from the policy (temperature 1)."""
    cfg = model.cfg
    n = prompt.shape[0]
    ids = torch.cat([torch.full((n, 1), cfg.bos), prompt, torch.full((n, 1), cfg.sep)], 1)
    for _ in range(cfg.length):
        probs = F.softmax(model(ids)[:, -1].float(), -1)
        ids = torch.cat([ids, torch.multinomial(probs, 1, generator=gen)], 1)
    return ids[:, cfg.length + 2 :]


def advantages(rewards: torch.Tensor, group: int) -> torch.Tensor:
    """GRPO: each reward against its group's mean, in units of the group's spread."""
    r = rewards.view(-1, group)
    return ((r - r.mean(1, keepdim=True)) / (r.std(1, keepdim=True) + 1e-4)).view(-1)


def pg_loss(model: Policy, prompt: torch.Tensor, completion: torch.Tensor, adv: torch.Tensor):
    """REINFORCE with group advantages: -A * log pi(completion | prompt), averaged."""
    cfg = model.cfg
    n = prompt.shape[0]
    ids = torch.cat(
        [torch.full((n, 1), cfg.bos), prompt, torch.full((n, 1), cfg.sep), completion], 1
    )
    logits = model(ids[:, :-1])[:, cfg.length + 1 :]
    logp = torch.log_softmax(logits, -1).gather(2, completion.unsqueeze(2)).squeeze(2)
    return -(adv * logp.sum(1)).mean()


# ------------------------------------------------------------------ weights on the wire


def bf16_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """What gets published: every parameter as a fresh contiguous bf16 tensor."""
    return {
        name: p.detach().to(torch.bfloat16).contiguous() for name, p in model.named_parameters()
    }


def load_bf16(model: nn.Module, name: str, arr: np.ndarray) -> None:
    """Install one published tensor (a numpy bf16 array) into the fp32 model."""
    from wanrl_s3 import to_torch

    dict(model.named_parameters())[name].data.copy_(to_torch(arr).float())


def bits(state: Mapping[str, torch.Tensor]) -> dict[str, np.ndarray]:
    """The raw 16-bit patterns of a bf16 state, for densities and digests."""
    return {name: t.view(torch.int16).numpy().view(np.uint16) for name, t in state.items()}
