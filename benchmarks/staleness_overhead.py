"""Per-item cost of StalenessFilter against the bare queue.Queue it wraps, in ns/item.

    .venv/bin/python benchmarks/staleness_overhead.py [--items 200000] [--repeat 7] [--batch 64]

One thread puts --batch items, then gets them back, until --items have gone
through; the same loop runs on a bare ``queue.Queue`` and on a
``StalenessFilter`` around one (default tag lookup on ``Tagged`` items, and an
explicit ``version_of`` on verl-style dict tags). ``offer`` is the decision
alone (replay buffers that keep their own storage). Items are fresh, so nothing
is dropped: the cost measured is the check every admitted item pays. Figures
are the best and the median of --repeat runs; the best is the least disturbed
by other work on the machine.
"""

from __future__ import annotations

import argparse
import platform
import queue
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from wanrl_s3 import StalenessConfig, StalenessFilter, Tagged


def through(
    put: Callable[[object], object], get: Callable[[], object], items: list[object], batch: int
) -> int:
    """Put ``batch`` items then get them back, over all ``items``; elapsed ns."""
    start = time.perf_counter_ns()
    for lo in range(0, len(items), batch):
        chunk = items[lo : lo + batch]
        for item in chunk:
            put(item)
        for _ in chunk:
            get()
    return time.perf_counter_ns() - start


def decide_only(f: StalenessFilter[object], items: list[object]) -> int:
    """``offer`` alone over ``items``; elapsed ns."""
    start = time.perf_counter_ns()
    offer = f.offer
    for item in items:
        offer(item)
    return time.perf_counter_ns() - start


def measure(run: Callable[[], int], n: int, repeat: int) -> tuple[float, float]:
    """(best, median) ns per item over ``repeat`` runs."""
    per_item = [run() / n for _ in range(repeat)]
    return min(per_item), statistics.median(per_item)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    n, batch = args.items, args.batch
    config = StalenessConfig(3)
    tagged: list[object] = [Tagged(i, 100) for i in range(n)]
    tags: list[object] = [{"min_global_steps": 99, "max_global_steps": 100} for _ in range(n)]

    def bare() -> int:
        q: queue.Queue[object] = queue.Queue()
        return through(q.put, q.get, tagged, batch)

    def wrapped(items: list[object], **kw: object) -> Callable[[], int]:
        def run() -> int:
            f: StalenessFilter[object] = StalenessFilter(
                config,
                queue.Queue(),
                learner_version=100,
                **kw,  # type: ignore[arg-type]
            )
            return through(f.put, f.get, items, batch)

        return run

    def offer_only() -> int:
        return decide_only(StalenessFilter(config, learner_version=100), tagged)

    # (name, run, compare with the bare queue?)
    rows = [
        ("queue.Queue put+get (bare)", bare, False),
        ("StalenessFilter put+get, Tagged", wrapped(tagged), True),
        (
            "StalenessFilter put+get, dict + version_of",
            wrapped(tags, version_of=lambda t: t["min_global_steps"]),
            True,
        ),
        ("StalenessFilter.offer only (no queue)", offer_only, False),
    ]
    cmd = "python benchmarks/staleness_overhead.py " + " ".join(sys.argv[1:])
    print(f"$ {cmd.strip()}")
    print(
        f"python {platform.python_version()} on {platform.machine()}, {n} items, batch {batch}, "
        f"best and median of {args.repeat}"
    )
    print(f"{'case':<44} {'best ns/item':>13} {'median':>9} {'+ns vs bare':>12}")
    base = 0.0
    for name, run, compare in rows:
        best, median = measure(run, n, args.repeat)
        base = best if run is bare else base
        extra = f"{best - base:>+12.0f}" if compare else ""
        print(f"{name:<44} {best:>13.0f} {median:>9.0f} {extra}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
