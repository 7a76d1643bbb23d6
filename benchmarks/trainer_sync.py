"""How long the trainer's weight sync blocks, publishing in the background or not (issue 17).

    .venv/bin/python benchmarks/trainer_sync.py [--gib 1] [--tensors 16] [--syncs 4]
                                                [--train-s 30] [--json]

The verl backend's trainer engine (``wanrl_s3_verl.backend``, built as verl builds
it, master rank) syncs a snapshot of bf16 weights ``--syncs`` times to a moto
server (its own process, 127.0.0.1), once with ``background: true`` and once with
``background: false``, each into a fresh bucket. Between syncs a training step
moves 1% of the weights in place and then sleeps ``--train-s`` (a stand-in for a
GPU step, which leaves the host's cores free for the publication).

Per sync: ``blocked_s``, the time ``send_weights`` took (what the training loop
waits for); with background, its parts ``copy_s`` (the copy into host buffers)
and ``wait_s`` (waiting for the previous publication); ``publish_s``, how long
that version's publication took (encode, upload, commit). The reference,
``host_copy_s``, is one plain copy of the same weights timed right before each
sync, so that both see the same machine (a shared one drifts): into fresh memory
before the first sync (which allocates its buffers), into buffers allocated
once before the others. Goal: a sync blocks at most as long as one host copy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

from wanrl_s3.testing import local_moto, make_bucket
from wanrl_s3_verl.backend import WanrlS3CheckpointEngine

GiB = 2**30


def make_weights(gib: float, tensors: int) -> dict[str, torch.Tensor]:
    """``tensors`` bf16 tensors of random bits, ``gib`` GiB in all (nothing compresses)."""
    g = torch.Generator().manual_seed(0)
    n = int(gib * GiB) // 2 // tensors
    return {
        f"model.layers.{i}.mlp.up_proj.weight": torch.randint(
            -(2**15), 2**15, (n,), dtype=torch.int16, generator=g
        ).view(torch.bfloat16)
        for i in range(tensors)
    }


def train_step(weights: dict[str, torch.Tensor], seed: int, sleep_s: float) -> None:
    """Move 1% of the values (a sparse change, as an optimizer step makes), then 'compute'."""
    g = torch.Generator().manual_seed(seed)
    for t in weights.values():
        idx = torch.randint(0, t.numel(), (t.numel() // 100,), generator=g)
        t[idx] = t[idx] * 1.01 + 1e-3
    time.sleep(sleep_s)


class HostCopy:
    """The reference: one plain host copy of the weights, timed right before each sync.

    Best of ``repeat``: the first memory-bound pass after a long sleep is slow on a
    shared virtual machine, and the sync that follows is not that first pass.
    """

    def __init__(self, weights: dict[str, torch.Tensor], repeat: int = 2) -> None:
        self.weights = weights
        self.repeat = repeat
        self.reused = {n: t.clone() for n, t in weights.items()}  # paged in once, here

    def into_reused_s(self) -> float:
        """What every sync after the first must at least do: overwrite buffers it holds."""
        return min(self._time(lambda n, t: self.reused[n].copy_(t)) for _ in range(self.repeat))

    def into_fresh_s(self) -> float:
        """What the first sync must at least do: copy into memory it has just allocated."""
        fresh = lambda _, t: torch.empty_like(t).copy_(t)  # noqa: E731
        return min(self._time(fresh) for _ in range(self.repeat))

    def _time(self, copy: Callable[[str, torch.Tensor], torch.Tensor]) -> float:
        """Seconds to copy every tensor; the copies are all held until the end, as a sync's."""
        start = time.perf_counter()
        held = [copy(name, t) for name, t in self.weights.items()]
        elapsed = time.perf_counter() - start
        del held
        return elapsed


def verl_generator(weights: dict[str, torch.Tensor]) -> Iterator[tuple[str, torch.Tensor]]:
    """verl's per-tensor generator, at no cost of its own: the trainer's tensors themselves."""
    yield from weights.items()


def run_mode(
    endpoint: str, weights: dict[str, torch.Tensor], background: bool, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """``args.syncs`` syncs of one trainer engine; a row per sync."""
    engine = WanrlS3CheckpointEngine(
        bucket_size=2 * GiB,
        is_master=True,
        store_url=f"s3://{make_bucket(endpoint)}/run",
        endpoint_url=endpoint,
        background=background,
    )
    reference = HostCopy(weights)
    rows: list[dict[str, Any]] = []
    published: dict[int, dict[str, float]] = {}  # version -> its figures, whenever reported
    for step in range(args.syncs):
        if step:
            train_step(weights, step, args.train_s)
        host_copy_s = reference.into_reused_s() if step else reference.into_fresh_s()
        start = time.perf_counter()
        metrics = asyncio.run(engine.send_weights(verl_generator(weights), global_steps=step))
        blocked_s = time.perf_counter() - start
        rows.append(
            {
                "mode": "background" if background else "synchronous",
                "sync": step,
                "blocked_s": blocked_s,
                "host_copy_s": host_copy_s,
                "copy_s": metrics.get("wanrl_s3/publish_copy_s"),
                "wait_s": metrics.get("wanrl_s3/publish_wait_s"),
            }
        )
        for figures in (metrics, engine.wait_published(600.0) if step == args.syncs - 1 else None):
            if figures and figures.get("wanrl_s3/published"):  # background: a later sync's
                published[int(figures["wanrl_s3/version"])] = figures
    engine.close()
    for row in rows:
        figures = published.get(row["sync"], {})
        row["publish_s"] = figures.get("wanrl_s3/publish_s")
        row["kind"] = {0.0: "full", 1.0: "delta"}.get(figures.get("wanrl_s3/is_delta", -1.0))
    return rows


def fmt(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per mode: each sync's blocking time over the host copy timed just before it."""
    out: dict[str, Any] = {}
    for mode in ("background", "synchronous"):
        ratios = [r["blocked_s"] / r["host_copy_s"] for r in rows if r["mode"] == mode]
        out[mode] = {
            "first_vs_host_copy": ratios[0],
            "later_vs_host_copy_median": statistics.median(ratios[1:]) if ratios[1:] else None,
            "later_vs_host_copy_max": max(ratios[1:], default=None),
        }
    return out


def report(result: dict[str, Any]) -> None:
    print(
        f"snapshot: {result['gib']:.2f} GiB of bf16 in {result['tensors']} tensors; moto on "
        f"127.0.0.1; train step {result['train_s']:g} s (sleep); load average "
        f"{result['load_average'][0]:.2f} before, {result['load_average'][1]:.2f} after, on "
        f"{result['cores']} cores"
    )
    print("host_copy_s: one plain copy of the weights, just before the sync (the first into")
    print("fresh memory, the others into reused buffers); blocked_s: send_weights' wall time")
    print(
        f"{'mode':<12} {'sync':>4} {'host_copy_s':>11} {'blocked_s':>9} {'x copy':>6} "
        f"{'copy_s':>7} {'wait_s':>7} {'publish_s':>9}  kind"
    )
    for r in result["rows"]:
        print(
            f"{r['mode']:<12} {r['sync']:>4} {fmt(r['host_copy_s']):>11} "
            f"{fmt(r['blocked_s']):>9} {r['blocked_s'] / r['host_copy_s']:>6.2f} "
            f"{fmt(r['copy_s']):>7} {fmt(r['wait_s']):>7} {fmt(r['publish_s']):>9}  "
            f"{r['kind'] or '-'}"
        )
    for mode, s in result["summary"].items():
        later = s["later_vs_host_copy_median"]
        print(
            f"{mode}: the first sync blocks {s['first_vs_host_copy']:.2f}x a host copy"
            + ("" if later is None else f", later ones {later:.2f}x (median), "
               f"{s['later_vs_host_copy_max']:.2f}x (max)")
        )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--tensors", type=int, default=16)
    ap.add_argument("--syncs", type=int, default=4)
    ap.add_argument("--train-s", type=float, default=30.0)
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    weights = make_weights(args.gib, args.tensors)
    load_before = os.getloadavg()[0]
    rows: list[dict[str, Any]] = []
    with local_moto() as endpoint:
        for background in (True, False):
            rows += run_mode(endpoint, weights, background, args)
    result = {
        "gib": args.gib,
        "tensors": args.tensors,
        "syncs": args.syncs,
        "train_s": args.train_s,
        "cores": os.cpu_count(),
        "load_average": [load_before, os.getloadavg()[0]],
        "rows": rows,
        "summary": summarize(rows),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        report(result)


if __name__ == "__main__":
    main()
