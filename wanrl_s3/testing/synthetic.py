"""Synthetic policies for tests, benchmarks and the demo: realistic shapes, values and updates.

What a sparse delta sees between two published bf16 versions depends on three
things this module reproduces: the layout (tensor names and shapes of a
LLaMA-style decoder), the value scales per tensor (a bf16 ulp is relative to
the value, so small weights change more often) and the optimiser (Adam makes
every step about ``lr`` in size whatever the gradient's scale). A real model
trained a few steps on CPU checks the result (tests/testing/test_synthetic.py).

``nudge_bf16`` makes a version at an exact density instead, for sweeps: it
moves chosen values by one ulp, which is what most real bf16 changes are.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ..errors import UsageError
from ..units import require_int

Layout = list[tuple[str, tuple[int, ...]]]

# Elementwise work runs on slices of this many elements: temporaries stay small
# (a 500M-parameter policy must fit on a 24 GiB machine with its Adam moments).
SLICE = 1 << 22


# ---------------------------------------------------------------------- layouts


@dataclass(frozen=True)
class LlamaDims:
    """The dimensions of a LLaMA-style decoder (grouped-query attention, SwiGLU MLP)."""

    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    tie_embeddings: bool = False

    def __post_init__(self) -> None:
        for name in ("vocab", "hidden", "intermediate", "layers", "heads", "kv_heads"):
            require_int(f"LlamaDims.{name}", getattr(self, name))
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise UsageError(
                f"LlamaDims: hidden {self.hidden} must divide by heads {self.heads}, "
                f"and heads by kv_heads {self.kv_heads}"
            )

    @property
    def kv_dim(self) -> int:
        """Width of the key and value projections: ``kv_heads`` heads of ``hidden // heads``."""
        return self.hidden // self.heads * self.kv_heads


PRESETS: dict[str, LlamaDims] = {
    # unit tests: every tensor kind, a few thousand parameters
    "tiny": LlamaDims(vocab=128, hidden=32, intermediate=64, layers=2, heads=4, kv_heads=2),
    # 291M: the demo (Qwen2.5-0.5B-like proportions, smaller vocab)
    "demo-300m": LlamaDims(
        vocab=32000, hidden=1024, intermediate=2816, layers=20, heads=16, kv_heads=4
    ),
    # 547M: benchmarks (>= 500M bf16 parameters, 1.09 GB per snapshot)
    "bench-550m": LlamaDims(
        vocab=32000, hidden=1280, intermediate=3456, layers=27, heads=20, kv_heads=4
    ),
}


def llama_like_layout(dims: LlamaDims | str = "tiny") -> Layout:
    """[(name, shape)] in Hugging Face LLaMA naming; ``dims`` may name a preset."""
    d = PRESETS[dims] if isinstance(dims, str) else dims
    h, kv, ff = d.hidden, d.kv_dim, d.intermediate
    layout: Layout = [("model.embed_tokens.weight", (d.vocab, h))]
    for i in range(d.layers):
        p = f"model.layers.{i}"
        layout += [
            (f"{p}.self_attn.q_proj.weight", (h, h)),
            (f"{p}.self_attn.k_proj.weight", (kv, h)),
            (f"{p}.self_attn.v_proj.weight", (kv, h)),
            (f"{p}.self_attn.o_proj.weight", (h, h)),
            (f"{p}.mlp.gate_proj.weight", (ff, h)),
            (f"{p}.mlp.up_proj.weight", (ff, h)),
            (f"{p}.mlp.down_proj.weight", (h, ff)),
            (f"{p}.input_layernorm.weight", (h,)),
            (f"{p}.post_attention_layernorm.weight", (h,)),
        ]
    layout.append(("model.norm.weight", (h,)))
    if not d.tie_embeddings:
        layout.append(("lm_head.weight", (d.vocab, h)))
    return layout


def param_count(layout: Layout) -> int:
    """How many values the tensors of ``layout`` hold."""
    return sum(math.prod(shape) for _, shape in layout)


def dims_for_params(target: int, *, vocab: int = 32000, head_dim: int = 64) -> LlamaDims:
    """LLaMA-like dims with about ``target`` parameters and common proportions.

    The width is the narrowest multiple of 128 whose model at the usual aspect
    (layers ~ hidden / 48, as in 0.5-1B models) reaches the target; the depth
    is then set to land closest to it. The MLP is SwiGLU's 8/3 wide (rounded
    to 64) and 4 query heads share each KV head. Below ~2 * vocab * 128
    parameters the embeddings alone overshoot.
    """
    require_int("target parameter count", target)

    def dims(hidden: int, layers: int) -> LlamaDims:
        heads = hidden // head_dim
        return LlamaDims(
            vocab=vocab,
            hidden=hidden,
            intermediate=-(-hidden * 8 // 3 // 64) * 64,
            layers=layers,
            heads=heads,
            kv_heads=heads // 4 if heads % 4 == 0 else heads // 2,
        )

    def count(hidden: int, layers: int) -> int:
        return param_count(llama_like_layout(dims(hidden, layers)))

    widths = range(2 * head_dim, 256 * head_dim + 1, 2 * head_dim)
    hidden = next((h for h in widths if count(h, max(1, round(h / 48))) >= target), widths[-1])
    per_layer = count(hidden, 2) - count(hidden, 1)
    layers = max(1, round((target - count(hidden, 1)) / per_layer) + 1)
    return dims(hidden, layers)


# ---------------------------------------------------------------- initial values


def init_std(name: str, shape: tuple[int, ...]) -> tuple[float, float]:
    """(mean, std) of a tensor's values, as a trained transformer has them.

    Norm weights sit near 1.0, embeddings and the output head near 0.02
    (GPT-2/LLaMA init), projections at 1/sqrt(fan_in).
    """
    if len(shape) == 1:
        return 1.0, 0.05
    if "embed_tokens" in name or "lm_head" in name:
        return 0.0, 0.02
    return 0.0, 1.0 / math.sqrt(shape[-1])


def _rng(seed: int, *key: int) -> np.random.Generator:
    """An independent stream per (seed, key...): results do not depend on order or threads."""
    return np.random.default_rng([seed, *key])


def _normal_fill(out: np.ndarray, rng: np.random.Generator, mean: float, std: float) -> None:
    """Fill a float32 array with N(mean, std^2) in slices (no full-size float64 temporary)."""
    flat = out.reshape(-1)
    for start in range(0, flat.size, SLICE):
        part = flat[start : start + SLICE]
        rng.standard_normal(out=part, dtype=np.float32)
        part *= np.float32(std)
        part += np.float32(mean)


def random_bf16_state(layout: Layout, *, seed: int = 0, threads: int = 2) -> dict[str, np.ndarray]:
    """Initial bf16 values for ``layout`` without keeping fp32 masters (for benchmarks)."""

    def one(item: tuple[int, tuple[str, tuple[int, ...]]]) -> np.ndarray:
        index, (name, shape) = item
        out = np.empty(shape, ml_dtypes.bfloat16)
        flat, rng = out.reshape(-1), _rng(seed, index)
        part = np.empty(min(flat.size, SLICE), np.float32)
        for start, stop in _slices(flat.size):
            _normal_fill(part[: stop - start], rng, *init_std(name, shape))
            flat[start:stop] = part[: stop - start]  # rounds to nearest even
        return out

    with ThreadPoolExecutor(max_workers=threads) as pool:
        arrays = list(pool.map(one, enumerate(layout)))
    return {name: a for (name, _), a in zip(layout, arrays, strict=True)}


def _slices(total: int) -> Iterator[tuple[int, int]]:
    for start in range(0, total, SLICE):
        yield start, min(start + SLICE, total)


# ---------------------------------------------------------------- Adam updates


@dataclass(frozen=True)
class AdamConfig:
    """AdamW as RL post-training runs it: small lr, default betas, decoupled weight decay."""

    lr: float = 3e-6
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 < self.lr < 1.0:
            raise UsageError(f"AdamConfig.lr must be in (0, 1), got {self.lr}")
        for name in ("beta1", "beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise UsageError(f"AdamConfig.{name} must be in [0, 1), got {getattr(self, name)}")
        if self.eps <= 0.0 or self.weight_decay < 0.0:
            raise UsageError("AdamConfig: eps must be > 0 and weight_decay >= 0")


class SyntheticPolicy:
    """fp32 master weights with Adam moments, stepped by synthetic gradients.

    Gradients are Gaussian with a per-tensor scale drawn once (log-uniform over
    two decades: real gradient norms differ that much between layers). Adam
    divides the scale out, so it matters only next to ``eps``; the steps are
    about ``lr`` in size, which is what decides how many bf16 values move.
    Deterministic for a seed. Memory: 12 bytes per parameter (master, m, v).
    """

    def __init__(self, layout: Layout, *, seed: int = 0, adam: AdamConfig | None = None) -> None:
        self.layout = list(layout)
        self.seed = seed
        self.adam = adam or AdamConfig()
        self.steps = 0
        self.master: dict[str, np.ndarray] = {}
        self._m: dict[str, np.ndarray] = {}
        self._v: dict[str, np.ndarray] = {}
        exponents = _rng(seed, 1 << 30).uniform(-4.0, -2.0, len(self.layout))
        self._grad_scale = {
            name: float(10.0**e) for (name, _), e in zip(self.layout, exponents, strict=True)
        }
        for index, (name, shape) in enumerate(self.layout):
            self.master[name] = np.empty(shape, np.float32)
            _normal_fill(self.master[name], _rng(seed, index), *init_std(name, shape))
            self._m[name] = np.zeros(shape, np.float32)
            self._v[name] = np.zeros(shape, np.float32)

    def step(self, kappa: int = 1) -> None:
        """Take ``kappa`` optimiser steps (one publication period)."""
        require_int("kappa", kappa)
        for _ in range(kappa):
            self.steps += 1
            for index, (name, _) in enumerate(self.layout):
                self._adam_tensor(index, name)

    def _adam_tensor(self, index: int, name: str) -> None:
        """One AdamW step of one tensor, slice by slice (bias-corrected moments)."""
        cfg, t = self.adam, self.steps
        rng = _rng(self.seed, index, t)
        step_size = np.float32(cfg.lr / (1.0 - cfg.beta1**t))
        v_corr = np.float32(1.0 / math.sqrt(1.0 - cfg.beta2**t))
        w, m, v = (a[name].reshape(-1) for a in (self.master, self._m, self._v))
        for start, stop in _slices(w.size):
            g = rng.standard_normal(stop - start, dtype=np.float32)
            g *= np.float32(self._grad_scale[name])
            _adam_slice(w[start:stop], m[start:stop], v[start:stop], g, cfg, step_size, v_corr)

    def bf16_state(self) -> dict[str, np.ndarray]:
        """The published version: every master rounded to bf16 (round to nearest even)."""
        return {name: w.astype(ml_dtypes.bfloat16) for name, w in self.master.items()}


def _adam_slice(
    w: np.ndarray,
    m: np.ndarray,
    v: np.ndarray,
    g: np.ndarray,
    cfg: AdamConfig,
    step_size: np.float32,
    v_corr: np.float32,
) -> None:
    """In place: m, v <- moments; w <- w - lr_t * m / (sqrt(v) * v_corr + eps) - lr * wd * w."""
    if cfg.weight_decay:
        w *= np.float32(1.0 - cfg.lr * cfg.weight_decay)
    m *= np.float32(cfg.beta1)
    m += np.float32(1.0 - cfg.beta1) * g
    v *= np.float32(cfg.beta2)
    g *= g
    g *= np.float32(1.0 - cfg.beta2)
    v += g
    np.sqrt(v, out=g)
    g *= v_corr
    g += np.float32(cfg.eps)
    np.divide(m, g, out=g)
    g *= step_size
    w -= g


# ------------------------------------------------------------ exact densities


def nudge_bf16(values: np.ndarray, density: float, *, seed: int = 0) -> np.ndarray:
    """A copy of bf16 ``values`` with exactly round(density * size) elements moved one ulp.

    Each chosen value steps one ulp up or down in magnitude (zero steps up,
    the largest finite value down, so nothing becomes inf or NaN). One-ulp
    steps are what most real bf16 changes under small learning rates are, and
    their XOR words (1, 3, 7, ... from carries) are what the codec must code;
    flipping only the last bit would make the values free and flatter the codec.
    """
    if values.dtype != ml_dtypes.bfloat16:
        raise UsageError(f"nudge_bf16 needs bfloat16 values, got {values.dtype}")
    if not 0.0 <= density <= 1.0:
        raise UsageError(f"density must be in [0, 1], got {density}")
    rng = _rng(seed, values.size)
    bits = np.array(values, order="C", copy=True).view(np.uint16).reshape(-1)
    chosen = exact_sample(bits.size, round(density * bits.size), rng)
    old = bits[chosen]
    magnitude = old & np.uint16(0x7FFF)
    up = rng.integers(0, 2, chosen.size, dtype=np.uint8).astype(bool)
    up |= magnitude == 0
    up &= magnitude < 0x7F7F  # 0x7F7F: largest finite bf16
    magnitude = np.where(up, magnitude + np.uint16(1), magnitude - np.uint16(1))
    bits[chosen] = (old & np.uint16(0x8000)) | magnitude.astype(np.uint16)
    return bits.view(ml_dtypes.bfloat16).reshape(values.shape)


def nudge_state(
    state: dict[str, np.ndarray], density: float, *, seed: int = 0
) -> dict[str, np.ndarray]:
    """``nudge_bf16`` on every tensor (independent streams): a whole version at ``density``."""
    return {
        name: nudge_bf16(a, density, seed=seed * 1_000_003 + i)
        for i, (name, a) in enumerate(state.items())
    }


def exact_sample(total: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """``count`` distinct sorted int64 indices in [0, total), uniformly at random.

    Bernoulli thinning at the target rate (one pass of random words), then a
    fix-up of the ~sqrt(count) difference: linear time, where
    ``Generator.choice`` permutes the whole range once count passes total / 50.
    """
    if not 0 <= count <= total:
        raise UsageError(f"cannot sample {count} of {total}")
    if count == total:
        return np.arange(total, dtype=np.int64)
    threshold = np.uint32(round(count / total * (1 << 32)))
    chosen = np.flatnonzero(rng.integers(0, 1 << 32, total, dtype=np.uint32) < threshold)
    if chosen.size > count:
        chosen = np.delete(chosen, rng.choice(chosen.size, chosen.size - count, replace=False))
    while chosen.size < count:
        extra = np.unique(rng.integers(0, total, count - chosen.size))
        present = np.zeros(extra.size, bool)
        if chosen.size:
            present = chosen[np.minimum(np.searchsorted(chosen, extra), chosen.size - 1)] == extra
        # both runs are sorted, so the stable sort (timsort) only merges them
        chosen = np.sort(np.concatenate((chosen, extra[~present])), kind="stable")
    return chosen.astype(np.int64)


def changed_fraction(old: dict[str, np.ndarray], new: dict[str, np.ndarray]) -> float:
    """Fraction of elements whose bit pattern differs between two versions."""
    changed = total = 0
    for name, a in old.items():
        b = new[name]
        bits = np.dtype(f"u{a.dtype.itemsize}")
        changed += int(np.count_nonzero(a.view(bits) != b.view(bits)))
        total += a.size
    return changed / total if total else 0.0
