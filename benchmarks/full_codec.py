"""Lossless full-tensor coding: candidates side by side on bf16 weights (issue 13).

    .venv/bin/python benchmarks/full_codec.py [--params 550e6] [--repeat 3] [--steps 300]
                                              [--threads 2] [--skip-synthetic] [--skip-trained]
                                              [--only NAME] [--profile]

Two snapshots: a LLaMA-like bf16 policy of --params parameters with per-tensor scales
(synthetic.random_bf16_state: norms near 1.0, embeddings 0.02, projections 1/sqrt(fan_in)),
and the weights of a small transformer trained here on CPU for --steps AdamW steps on this
repository's own text (built from torch.nn parts, nothing downloaded). Every candidate codes
the snapshot tensor by tensor and is checked bit for bit. Columns:

  ratio     stored bytes / raw bytes (headers and tables included)
  bits/w    stored bits per weight
  encode    GB of bf16 per second, best of --repeat; decode likewise, into existing buffers
  memcpy    np.copyto of the same arrays in the same run

Bound rows are order-0 entropies summed per tensor (no coder reaches them exactly). Block-wise
candidates run on --threads threads in 512 KiB blocks, as the chosen codec does; blosc2
(measured only if installed: pip install blosc2) runs its own threads. A last table compares,
for the XOR words inside deltas, today's values section (wanrl_s3.codec.delta) with the
full codec applied to the same words. --profile adds, for the LLaMA-like snapshot, where one
thread's encode and decode time goes: each pass of the chosen codec timed block by block.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import zstandard

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from codec import best_of  # benchmarks/codec.py: the benchmarks' one timing rule

from wanrl_s3.codec import (
    CODING_PLANES,
    FullPayload,
    decode_full,
    encode_delta,
    encode_full,
    read_full_header,
    read_header,
)
from wanrl_s3.testing import dims_for_params, llama_like_layout, nudge_state, random_bf16_state

ROOT = Path(__file__).resolve().parents[1]
Bits = dict[str, np.ndarray]
BLOCK = 1 << 18
# the chosen codec's zstd parameters: match finding all but off, Huffman does the work
TUNED = {"min_match": 7, "hash_log": 6, "chain_log": 6, "search_log": 1, "window_log": 17}


@dataclass(frozen=True)
class Candidate:
    name: str
    encode: Callable[[np.ndarray], Any]  # flat uint16 -> an opaque encoded tensor
    size: Callable[[Any], int]
    decode: Callable[[Any, np.ndarray], None]  # into a flat uint16 buffer


# ------------------------------------------------------------------ candidates


def blockwise(name: str, threads: int, split: Callable, join: Callable, params: list) -> Candidate:
    """Cut a tensor into BLOCK-element blocks, ``split`` each into byte strings, compress
    string i with zstd ``params[i]`` (None: keep it raw), and ``join`` them back on decode;
    blocks spread over ``threads``, as in the chosen codec."""
    pool = ThreadPoolExecutor(threads)

    def encode_block(block: np.ndarray) -> list[bytes]:
        # a zstd context is not thread-safe: one per call (cheap next to 512 KiB of work)
        return [
            bytes(part)
            if p is None
            else zstandard.ZstdCompressor(compression_params=p).compress(part)
            for part, p in zip(split(block), params, strict=True)
        ]

    def decode_block(parts: list[bytes], out: np.ndarray) -> None:
        d = zstandard.ZstdDecompressor()
        raw = [
            part if p is None else d.decompress(part) for part, p in zip(parts, params, strict=True)
        ]
        join([np.frombuffer(r, np.uint8) for r in raw], out)

    def encode(flat: np.ndarray) -> list[list[bytes]]:
        return list(
            pool.map(encode_block, [flat[i : i + BLOCK] for i in range(0, flat.size, BLOCK)])
        )

    def decode(blocks: list[list[bytes]], out: np.ndarray) -> None:
        list(
            pool.map(decode_block, blocks, [out[i : i + BLOCK] for i in range(0, out.size, BLOCK)])
        )

    return Candidate(name, encode, lambda b: sum(len(p) for parts in b for p in parts), decode)


def whole_join(parts: list[np.ndarray], out: np.ndarray) -> None:
    out.view(np.uint8)[...] = parts[0]


def planes_split(block: np.ndarray) -> list[np.ndarray]:
    return [block.astype(np.uint8), (block >> 8).astype(np.uint8)]


def planes_join(planes: list[np.ndarray], out: np.ndarray) -> None:
    np.left_shift(planes[1], 8, out=out, dtype=np.uint16)
    out |= planes[0]


def exponent_split(block: np.ndarray) -> list[np.ndarray]:
    """The 8 exponent bits apart; the sign and 7 mantissa bits together in one byte."""
    exponent = (block >> 7).astype(np.uint8)
    sign_mantissa = (block & 0x7F).astype(np.uint8) | ((block >> 8) & 0x80).astype(np.uint8)
    return [exponent, sign_mantissa]


def exponent_join(planes: list[np.ndarray], out: np.ndarray) -> None:
    exponent, sign_mantissa = planes
    np.left_shift(sign_mantissa, 8, out=out, dtype=np.uint16)
    out &= 0x8000
    out |= np.left_shift(exponent, 7, dtype=np.uint16)
    out |= sign_mantissa & 0x7F


def candidates(threads: int) -> list[Candidate]:
    level = zstandard.ZstdCompressionParameters.from_level
    tuned = level(1, **TUNED)
    found = [blockwise("zstd-1, whole elements", threads, lambda b: [b.view(np.uint8)],
                       whole_join, [level(1)])]  # fmt: skip
    for lvl in (1, 2, 3):
        found.append(blockwise(f"zstd-{lvl}, both byte planes", threads, planes_split,
                               planes_join, [level(lvl), level(lvl)]))  # fmt: skip
    found.append(blockwise("zstd-1 tuned: high byte; low raw", threads, planes_split,
                           planes_join, [None, tuned]))  # fmt: skip
    found.append(blockwise("zstd-1 tuned: exponent; s+m raw", threads, exponent_split,
                           exponent_join, [tuned, None]))  # fmt: skip
    for t in sorted({1, threads}):
        found.append(Candidate(
            f"full.py (chosen), {t} thread{'s' * (t > 1)}",
            lambda flat, t=t: encode_full(flat, "BF16", threads=t),
            lambda p: len(p.data),
            lambda p, out, t=t: decode_full(p, out, threads=t),
        ))  # fmt: skip
    return found + blosc2_candidates(threads)


def blosc2_candidates(threads: int) -> list[Candidate]:
    try:
        import blosc2
    except ImportError:
        return []
    found = []
    for label, flt, codec, clevel in (
        ("shuffle + zstd-1", blosc2.Filter.SHUFFLE, blosc2.Codec.ZSTD, 1),
        ("bitshuffle + zstd-1", blosc2.Filter.BITSHUFFLE, blosc2.Codec.ZSTD, 1),
        ("bitshuffle + lz4", blosc2.Filter.BITSHUFFLE, blosc2.Codec.LZ4, 5),
    ):
        kw = {"codec": codec, "clevel": clevel, "filters": [flt], "typesize": 2}
        found.append(Candidate(
            f"blosc2 {label}",
            lambda flat, kw=kw: blosc2.compress2(flat, nthreads=threads, **kw),
            len,
            lambda c, out: blosc2.decompress2(c, dst=out, nthreads=threads),
        ))  # fmt: skip
    return found


# -------------------------------------------------------------------- measuring


def measure(candidate: Candidate, state: Bits, repeat: int) -> tuple[float, float, float]:
    """(stored bytes, encode seconds, decode seconds) over the snapshot, checked bit for bit."""
    encoded: dict[str, Any] = {}
    outs = {k: np.empty_like(v) for k, v in state.items()}

    def encode() -> None:
        for k, v in state.items():
            encoded[k] = candidate.encode(v)

    encode_s = best_of(repeat, encode)
    decode_s = best_of(repeat, lambda: [candidate.decode(encoded[k], outs[k]) for k in state])
    if any(outs[k].tobytes() != v.tobytes() for k, v in state.items()):
        raise SystemExit(f"{candidate.name}: decode is not bit-exact")
    return sum(candidate.size(e) for e in encoded.values()), encode_s, decode_s


def entropy(values: np.ndarray, bins: int) -> float:
    counts = np.bincount(values, minlength=bins).astype(np.float64)
    p = counts[counts > 0] / values.size
    return float(-(p * np.log2(p)).sum())


def bounds(state: Bits) -> list[tuple[str, float]]:
    """Order-0 entropy bounds in bits per weight, per tensor, weighted by size."""
    total = sum(v.size for v in state.values())
    rows = [
        ("bound: 16-bit words, order 0", lambda v: entropy(v, 1 << 16)),
        ("bound: high byte coded + 8", lambda v: entropy(v >> 8, 256) + 8),
        ("bound: exponent coded + 8", lambda v: entropy((v >> 7) & 0xFF, 256) + 8),
    ]
    return [(label, sum(fn(v) * v.size for v in state.values()) / total) for label, fn in rows]


def table(title: str, state: Bits, threads: int, repeat: int, only: str) -> None:
    raw = sum(v.nbytes for v in state.values())
    outs = {k: np.empty_like(v) for k, v in state.items()}
    memcpy_s = best_of(repeat, lambda: [np.copyto(outs[k], v) for k, v in state.items()])
    print(f"\n## {title}: {raw / 2:,.0f} bf16 weights in {len(state)} tensors "
          f"({raw / 1e9:.3f} GB); memcpy {raw / memcpy_s / 1e9:.2f} GB/s; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")  # fmt: skip
    print(f"{'candidate':<36} {'ratio':>6} {'bits/w':>6} {'encode GB/s':>11} {'decode GB/s':>11}")
    for label, bits in bounds(state):
        print(f"{label:<36} {bits / 16:6.3f} {bits:6.2f}")
    for candidate in (c for c in candidates(threads) if only in c.name):
        stored, encode_s, decode_s = measure(candidate, state, repeat)
        print(f"{candidate.name:<36} {stored / raw:6.3f} {16 * stored / raw:6.2f} "
              f"{raw / encode_s / 1e9:11.2f} {raw / decode_s / 1e9:11.2f}", flush=True)  # fmt: skip


def delta_values(title: str, pairs: list[tuple[str, Bits, Bits]]) -> None:
    """Today's values section of each delta against the full codec on the same XOR words."""
    print(f"\n## {title}: XOR words inside deltas, values section bytes")
    print(f"{'versions':<28} {'changed':>12} {'today bits/chg':>14} {'full.py bits/chg':>16}")
    for label, base, new in pairs:
        today = full = changed = 0
        for k, old in base.items():
            payload = encode_delta(old, new[k])
            assert payload is not None
            xor = (old ^ new[k])[old != new[k]]
            today += read_header(payload.data).values_bytes
            full += len(encode_full(xor, "BF16").data) if xor.size else 0
            changed += xor.size
        print(f"{label:<28} {changed:12,d} {8 * today / changed:14.3f} {8 * full / changed:16.3f}")


def huffman_step_probe(lanes: int = 1 << 16, steps: int = 48) -> float:
    """Symbols per second of the inner loop alone of a table-driven Huffman decoder in numpy.

    A Huffman stream decodes one symbol after the other, so numpy can only go wide across
    many independent streams (lanes), one symbol per lane per step: read a 32-bit window at
    each lane's bit offset, look the next 12 bits up (symbol and code length), advance. Real
    code tables only add work, so this bounds a numpy Huffman/ANS decoder's speed from above.
    """
    rng = np.random.default_rng(0)
    stream = rng.integers(0, 256, lanes * steps * 2 + 8, dtype=np.uint8)
    windows = np.ndarray((stream.size - 3,), "<u4", stream, strides=(1,))  # unaligned reads
    symbols, lengths = rng.integers(0, 256, 4096, np.uint8), rng.integers(1, 13, 4096)
    out = np.empty((steps, lanes), np.uint8)

    def decode() -> None:
        offset = np.arange(lanes, dtype=np.int64) * (steps * 16)  # lane i's stream, in bits
        for step in range(steps):
            code = (windows[offset >> 3] >> (offset & 7).astype(np.uint32)) & 0xFFF
            out[step] = symbols[code]
            offset += lengths[code]

    return lanes * steps / best_of(3, decode)


# ------------------------------------------------------------ where the time goes


class Laps:
    """Seconds per named pass: each ``lap`` adds the time since the previous one."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self._last = time.perf_counter()

    def start(self) -> None:
        self._last = time.perf_counter()

    def lap(self, label: str) -> None:
        now = time.perf_counter()
        self.spent[label] += now - self._last
        self._last = now


def decode_passes(coded: list[tuple[FullPayload, np.ndarray]]) -> dict[str, float]:
    """One thread's decode of every planes-coded tensor, block by block, each pass of
    wanrl_s3.codec.full's decoder (same calls, same order) timed on its own."""
    laps, d = Laps(), zstandard.ZstdDecompressor()
    for payload, out in coded:
        head, view = read_full_header(payload.data), payload.data
        ends = np.cumsum(head.sections.reshape(-1)) + head.body_offset
        starts = (ends - head.sections.reshape(-1)).reshape(head.sections.shape).tolist()
        lengths, flat, block = head.sections.tolist(), out.reshape(-1), head.block_elements
        for b in range(head.blocks):
            target = flat[b * block : (b + 1) * block]
            (low_at, high_at), (low_n, high_n) = starts[b], lengths[b]
            high, low = view[high_at : high_at + high_n], view[low_at : low_at + low_n]
            laps.start()
            zstandard.frame_content_size(high)
            laps.lap("read frame headers (checks)")
            plane = d.decompress(high, max_output_size=target.size, allow_extra_data=False)
            laps.lap("zstd: high-byte frames")
            np.multiply(np.frombuffer(plane, np.uint8), np.uint16(256), out=target,
                        dtype=target.dtype)  # fmt: skip
            laps.lap("widen: high byte x 256 into out")
            np.bitwise_or(target, np.frombuffer(low, np.uint8), out=target)
            laps.lap("OR the raw low byte in")
    return laps.spent


def encode_passes(state: Bits, blocks: dict[str, int]) -> dict[str, float]:
    """One thread's encode, block by block (``blocks``: each tensor's block size, as the
    codec chose it), each pass of the chosen codec timed alone."""
    params = zstandard.ZstdCompressionParameters.from_level(1, write_content_size=1, **TUNED)
    laps, c = Laps(), zstandard.ZstdCompressor(compression_params=params)
    for name, flat in state.items():
        block = blocks.get(name) or BLOCK
        plane, sink = np.empty(block, np.uint8), np.empty(flat.size + 64 * 1024, np.uint8)
        for start in range(0, flat.size, block):
            part = flat[start : start + block]
            laps.start()
            np.right_shift(part, 8, out=plane[: part.size], casting="unsafe")
            laps.lap("split: high byte (>> 8)")
            frame = c.compress(plane[: part.size].data)
            laps.lap("zstd: compress the high byte")
            np.copyto(sink[start : start + part.size], part, casting="unsafe")
            laps.lap("write: low byte into the payload")
            sink[-len(frame) :] = np.frombuffer(frame, np.uint8)
            laps.lap("write: copy the frame")
    return laps.spent


def profile(state: Bits, repeat: int) -> None:
    """Where one thread's time goes, against the whole encode/decode on one and two threads,
    a memory copy, and the BLAKE3 checks a pull adds (stored bytes and decoded bytes)."""
    import blake3

    raw = sum(v.nbytes for v in state.values())
    payloads = {k: encode_full(v, "BF16", threads=1) for k, v in state.items()}
    coded = [(p, np.empty_like(state[k])) for k, p in payloads.items() if p.coding == CODING_PLANES]
    blocks = {k: read_full_header(p.data).block_elements for k, p in payloads.items()}
    print(f"\n## Where the time goes, LLaMA-like snapshot ({raw / 1e9:.3f} GB; "
          f"{len(coded)} of {len(state)} tensors coded); load average "
          f"{os.getloadavg()[0]:.2f}")  # fmt: skip
    print(f"{'pass (best of ' + str(repeat) + ')':<40} {'seconds':>8} {'GB/s':>7} {'share':>6}")
    for passes in (
        lambda: encode_passes(state, blocks),
        lambda: decode_passes(coded),
    ):
        best = passes()
        for _ in range(repeat - 1):
            best = {k: min(v, t) for (k, v), t in zip(best.items(), passes().values(), strict=True)}
        total = sum(best.values())
        for label, seconds in (*best.items(), ("sum of the passes", total)):
            print(f"{label:<40} {seconds:8.3f} {raw / seconds / 1e9:7.2f} {seconds / total:6.0%}")
    outs = {k: np.empty_like(v) for k, v in state.items()}
    hashed: list[memoryview] = [p.data for p in payloads.values()]
    hashed += [o.reshape(-1).view(np.uint8).data for o in outs.values()]

    def encode(threads: int) -> None:
        for v in state.values():
            encode_full(v, "BF16", threads=threads)

    def decode(threads: int) -> None:
        for k in state:
            decode_full(payloads[k], outs[k], threads=threads)

    def copy() -> None:
        for k, v in state.items():
            np.copyto(outs[k], v)

    for label, fn in (
        ("encode_full, 1 thread", lambda: encode(1)),
        ("encode_full, 2 threads", lambda: encode(2)),
        ("decode_full, 1 thread", lambda: decode(1)),
        ("decode_full, 2 threads", lambda: decode(2)),
        ("memcpy, 1 thread", copy),
        ("BLAKE3 of stored + decoded, 1 thread",
         lambda: [blake3.blake3(b).digest() for b in hashed]),
    ):  # fmt: skip
        seconds = best_of(repeat, fn)
        print(f"{label:<40} {seconds:8.3f} {raw / seconds / 1e9:7.2f}", flush=True)


# ------------------------------------------------------------ a trained model


def trained_transformer(steps: int, seed: int = 0) -> tuple[Bits, Bits]:
    """bf16 weights of a small causal transformer after ``steps`` and ``steps - 1`` AdamW steps,
    trained on bytes of this repository's text (next-byte prediction)."""
    import torch
    from torch import nn

    torch.manual_seed(seed)
    text = b"".join(p.read_bytes() for p in sorted(ROOT.glob("**/*.py")) if ".venv" not in p.parts)
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
    d, ctx, batch = 256, 64, 16

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(256, d)
            self.pos = nn.Parameter(torch.randn(ctx, d) * 0.02)
            layer = nn.TransformerEncoderLayer(d, 4, 4 * d, 0.0, batch_first=True, norm_first=True)
            self.blocks = nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)
            self.norm, self.head = nn.LayerNorm(d), nn.Linear(d, 256, bias=False)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            mask = nn.Transformer.generate_square_subsequent_mask(ids.shape[1])
            return self.head(
                self.norm(self.blocks(self.embed(ids) + self.pos, mask, is_causal=True))
            )

    model = Model()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    snapshots = []
    for step in range(steps):
        starts = torch.randint(0, data.numel() - ctx - 1, (batch,))
        window = torch.stack([data[s : s + ctx + 1] for s in starts.tolist()])
        logits = model(window[:, :-1])
        loss = nn.functional.cross_entropy(logits.reshape(-1, 256), window[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step >= steps - 2:
            snapshots.append({k: v.detach().to(torch.bfloat16).view(torch.int16).numpy()
                              .view(np.uint16).reshape(-1).copy()
                              for k, v in model.state_dict().items()})  # fmt: skip
    print(f"# trained {steps} steps: final loss {loss.item():.3f} (ln 256 = 5.545 at chance)")
    return snapshots[1], snapshots[0]


def trained_weights(steps: int, cache: Path | None) -> tuple[Bits, Bits]:
    """The trained snapshots, from ``cache`` (numpy's .npz, no pickle) when it exists:
    training takes minutes on two cores, longer on a busy machine."""
    if cache is not None and cache.exists():
        with np.load(cache, allow_pickle=False) as saved:
            pair = [{k.split(":", 1)[1]: saved[k] for k in saved.files if k.startswith(f"{tag}:")}
                    for tag in ("final", "previous")]  # fmt: skip
        print(f"# trained weights loaded from {cache}")
        return pair[0], pair[1]
    start = time.perf_counter()
    final, previous = trained_transformer(steps)
    print(f"# training took {time.perf_counter() - start:.0f} s")
    if cache is not None:
        np.savez(cache, **{f"{tag}:{k}": v for tag, state in (("final", final),
                           ("previous", previous)) for k, v in state.items()})  # fmt: skip
    return final, previous


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--params", type=float, default=550e6, help="bf16 parameters (default 550e6)")
    ap.add_argument("--repeat", type=int, default=3, help="best of this many runs (default 3)")
    ap.add_argument("--steps", type=int, default=300, help="training steps (default 300)")
    ap.add_argument("--threads", type=int, default=2, help="codec threads (default 2)")
    ap.add_argument("--trained-cache", type=Path, default=None,
                    help="trained weights (.npz): loaded if present, else written")  # fmt: skip
    ap.add_argument("--only", default="", help="run only candidates whose name contains this")
    ap.add_argument("--skip-synthetic", action="store_true")
    ap.add_argument("--skip-trained", action="store_true")
    ap.add_argument("--profile", action="store_true", help="time the chosen codec's passes")
    args = ap.parse_args()
    rate = huffman_step_probe()
    print(
        f"# numpy Huffman probe: the inner decode step alone runs at {rate / 1e6:.0f} M "
        f"symbols/s, {rate * 2 / 1e9:.2f} GB/s of bf16 at one symbol per weight"
    )
    if not args.skip_trained:
        final, previous = trained_weights(args.steps, args.trained_cache)
        table("Trained transformer", final, args.threads, 3 * args.repeat, args.only)
        delta_values("Trained transformer", [("last AdamW step", previous, final)])
        del final, previous
    if not args.skip_synthetic:
        layout = llama_like_layout(dims_for_params(int(args.params)))
        state = {k: v.view(np.uint16).reshape(-1) for k, v in random_bf16_state(layout).items()}
        table("LLaMA-like, per-tensor scales", state, args.threads, args.repeat, args.only)
        if args.profile:
            profile(state, args.repeat)
        pairs = []
        for density in (0.01, 0.05):
            typed = {k: v.view("bfloat16") for k, v in state.items()}
            nudged = nudge_state(typed, density, seed=1)
            new = {k: v.view(np.uint16).reshape(-1) for k, v in nudged.items()}
            pairs.append((f"{100 * density:g} % nudged by 1 ulp", state, new))
        delta_values("LLaMA-like", pairs)


if __name__ == "__main__":
    main()
