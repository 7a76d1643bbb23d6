"""`wanrl-s3 estimate --fleet FILE` as the fleet grows: time and memory per fleet size.

    .venv/bin/python benchmarks/estimate_fleet.py [--rows 10000 30000 100000] [--seed 1]

Each size gets a seeded fleet file (downlinks 20-1000 Mbit/s, uplinks 5-100,
round trips 5-200 ms, three regions) and one run of the real command in a child
process. It reports wall time, the child's CPU time (user + system: the figure
that other load on the machine disturbs least) and its peak memory, and the CPU
time per row, which stays flat when the planner is linear in the fleet.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from wanrl_s3.cost import FleetLinks, WorkerLink, fleet_to_csv

PLAN = ["--params", "1e9", "--t-train-s", "60", "--batch", "64", "--staleness", "4"]


def fleet(rows: int, seed: int) -> FleetLinks:
    rng = random.Random(seed)
    return FleetLinks(
        tuple(
            WorkerLink(
                f"w{i}",
                round(rng.uniform(20, 1000), 1),
                round(rng.uniform(5, 100), 1),
                round(rng.uniform(5, 200), 1),
                f"r{i % 3}",
            )
            for i in range(rows)
        )
    )


def run_once(path: Path) -> dict[str, float]:
    """One `estimate --fleet` in a child: its wall s, CPU s and peak MB (wait4: that child's)."""
    start = time.monotonic()
    child = subprocess.Popen(
        [sys.executable, "-m", "wanrl_s3.cli", "estimate", *PLAN, "--fleet", str(path)],
        stdout=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall_s = time.monotonic() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"estimate --fleet {path} exited {child.returncode}")
    cpu_s = usage.ru_utime + usage.ru_stime
    return {"wall_s": wall_s, "cpu_s": cpu_s, "peak_mb": usage.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    print(f"{'rows':>8} {'wall s':>8} {'CPU s':>7} {'CPU us/row':>11} {'peak MB':>8}")
    with tempfile.TemporaryDirectory(prefix="wanrl-fleet-") as tmp:
        for rows in args.rows:
            path = Path(tmp) / f"fleet-{rows}.csv"
            path.write_text(fleet_to_csv(fleet(rows, args.seed)))
            got = run_once(path)
            per_row_us = got["cpu_s"] / rows * 1e6
            print(
                f"{rows:>8} {got['wall_s']:>8.2f} {got['cpu_s']:>7.2f} {per_row_us:>11.1f} "
                f"{got['peak_mb']:>8.0f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
