"""Sparse delta codec: payload size against the entropy bound, speed against memcpy.

    .venv/bin/python benchmarks/codec.py [--params 550e6] [--densities 0.5,1,2,5]
                                         [--repeat 3] [--threads N] [--adam-lr 3e-6]

A bf16 policy of --params parameters in a LLaMA-like layout (wanrl_s3.testing.dims_for_params).
For each density, every tensor gets exactly that fraction of its values moved by one
ulp (wanrl_s3.testing.nudge_state: the XOR words of real small updates), and the snapshot is
encoded and decoded tensor by tensor, as the publisher and subscriber do. Columns:

  bits/chg  payload bits per changed element; bound: the empirical entropy bound,
            summed over tensors (positions N*H(n/N), values the order-0 entropy of
            the XOR words seen), and how far above it the payload is
  %snap     payload bytes as a percent of the full bf16 snapshot
  encode    GB of bf16 per second (both versions read once), best of --repeat
  decode    into a separate buffer (a copy of the base plus the XOR); in-place: XOR only
  memcpy    np.copyto of the same arrays in the same run, right before; x: ratio to it

--adam-lr adds a row for one realistic Adam step (wanrl_s3.testing.SyntheticPolicy, 12 bytes per
parameter of extra memory). Every decode is checked bit for bit.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wanrl_s3.codec import (
    DeltaPayload,
    binary_entropy,
    decode_delta,
    encode_delta,
    order0_entropy,
)
from wanrl_s3.testing import (
    AdamConfig,
    SyntheticPolicy,
    dims_for_params,
    llama_like_layout,
    nudge_state,
    param_count,
    random_bf16_state,
)

Bits = dict[str, np.ndarray]
Layout = list[tuple[str, tuple[int, ...]]]  # (name, shape) per tensor: llama_like_layout's


@dataclass(frozen=True)
class Row:
    label: str
    density: float
    payload_bytes: int
    bound_bits: float
    changed: int
    encode_s: float
    decode_s: float
    inplace_s: float
    memcpy_s: float


def best_of(repeat: int, fn: Callable[[], object]) -> float:
    """Fastest of ``repeat`` runs: the machine is shared, the minimum is the least disturbed."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def bound_bits(base: Bits, new: Bits) -> tuple[float, int]:
    """The entropy bound summed over tensors, and the number of changed elements."""
    bits, changed = 0.0, 0
    for name, old in base.items():
        xor = (old ^ new[name]).reshape(-1)
        words = xor[xor != 0]
        bits += old.size * binary_entropy(words.size / old.size)
        bits += words.size * order0_entropy(words)
        changed += words.size
    return bits, changed


def measure(label: str, base: Bits, new: Bits, out: Bits, repeat: int, threads: int | None) -> Row:
    memcpy_s = best_of(repeat, lambda: [np.copyto(out[k], base[k]) for k in base])
    payloads: dict[str, DeltaPayload] = {}

    def encode() -> None:
        for k in base:
            payload = encode_delta(base[k], new[k], threads=threads)
            assert payload is not None
            payloads[k] = payload

    def decode(source: Bits) -> None:
        for k in base:
            decode_delta(payloads[k], source[k], out=out[k])

    encode_s = best_of(repeat, encode)
    decode_s = best_of(repeat, lambda: decode(base))
    if any(out[k].tobytes() != new[k].tobytes() for k in base):
        raise SystemExit(f"{label}: decode is not bit-exact")
    # applying twice in place restores the version, so every run starts from a known state
    inplace_s = best_of(2 * repeat, lambda: decode(out))
    bits, changed = bound_bits(base, new)
    total = sum(a.size for a in base.values())
    return Row(label, changed / total, sum(len(p.data) for p in payloads.values()), bits, changed,
               encode_s, decode_s, inplace_s, memcpy_s)  # fmt: skip


def print_row(row: Row, snapshot_bytes: int) -> None:
    times = (row.encode_s, row.decode_s, row.inplace_s, row.memcpy_s)
    enc, dec, inplace, memcpy = (snapshot_bytes / s / 1e9 for s in times)
    per_change = row.payload_bytes * 8 / row.changed
    bound = row.bound_bits / row.changed
    snap_pct = 100 * row.payload_bytes / snapshot_bytes
    print(
        f"{row.label:>11}  {100 * row.density:7.3f}  {per_change:8.2f}  {bound:6.2f}  "
        f"{100 * (per_change / bound - 1):+5.1f}%  {snap_pct:6.3f}  "
        f"{enc:6.2f} ({enc / memcpy:4.2f}x)  {dec:6.2f} ({dec / memcpy:4.2f}x)  "
        f"{inplace:6.2f}  {memcpy:6.2f}",
        flush=True,
    )


def as_bits(state: dict[str, np.ndarray]) -> Bits:
    return {k: v.view(np.uint16) for k, v in state.items()}


def adam_version(layout: Layout, lr: float) -> tuple[Bits, Bits]:
    """Two consecutive published versions of a SyntheticPolicy (a few warm-up steps first)."""
    policy = SyntheticPolicy(layout, seed=0, adam=AdamConfig(lr=lr))
    policy.step(3)
    before = as_bits(policy.bf16_state())
    policy.step()
    return before, as_bits(policy.bf16_state())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=float, default=550e6, help="bf16 parameters (default 550e6)")
    ap.add_argument("--densities", default="0.5,1,2,5", help="percent, comma-separated")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs (default 3)")
    ap.add_argument("--threads", type=int, default=None, help="codec threads (default: cores)")
    ap.add_argument("--adam-lr", type=float, default=None, help="add a row for one Adam step")
    args = ap.parse_args()
    densities = [float(d) / 100 for d in args.densities.split(",") if d.strip()]

    layout = llama_like_layout(dims_for_params(int(args.params)))
    start = time.perf_counter()
    base = as_bits(random_bf16_state(layout, seed=0))
    out = {k: np.empty_like(v) for k, v in base.items()}
    snapshot_bytes = sum(a.nbytes for a in base.values())
    print(f"# {param_count(layout):,} bf16 parameters in {len(layout)} tensors "
          f"({snapshot_bytes / 1e9:.2f} GB), threads={args.threads or 'cores'}, "
          f"best of {args.repeat}; set-up {time.perf_counter() - start:.0f} s; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")  # fmt: skip
    print("      label  changed%  bits/chg   bound   over   %snap   encode GB/s    "
          "decode GB/s    in-place  memcpy")  # fmt: skip
    for density in densities:
        new = as_bits(nudge_state({k: v.view("bfloat16") for k, v in base.items()},
                                  density, seed=1))  # fmt: skip
        row = measure(f"{100 * density:g}%", base, new, out, args.repeat, args.threads)
        print_row(row, snapshot_bytes)
        del new
    if args.adam_lr:
        del base, out
        before, after = adam_version(layout, args.adam_lr)
        out = {k: np.empty_like(v) for k, v in before.items()}
        row = measure(f"adam {args.adam_lr:g}", before, after, out, args.repeat, args.threads)
        print_row(row, snapshot_bytes)


if __name__ == "__main__":
    main()
