"""Run every benchmark in turn (`make bench`); each prints its own table.

The figures in docs/benchmarks.md come from these commands on the machine the
page names. Run them on a quiet machine: they measure throughput.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "docs" / "results" / "wan-fleet-2026-12-04"  # what fleet_sim calibrates on
RUNS = [
    ["hashing.py"],
    ["codec.py"],
    ["full_codec.py"],
    ["transfer.py", "--gib", "1", "--repeat", "3"],
    ["fleet.py", "--workers", "8", "--mib", "256"],
    ["staleness_overhead.py"],
    ["stores.py"],  # skips the emulators and libraries that are not installed
    ["memory.py"],
    ["worker_disk.py"],
    ["engine_memory.py"],
    ["trainer_sync.py"],
    ["poll_cost.py"],
    ["fleet_sim.py", "--calibrate", *sorted(str(p) for p in RESULTS.glob("x*.json"))],
    ["fleet_sim.py", "--workers", "1000", "--region-count", "3"],
]
#: These build network namespaces and shape links: root only. The WAN fleet and the
#: fault campaign have their own targets (make bench-wan, make bench-faults).
ROOT_ONLY = [["wan.py"], ["full_pull.py"], ["publish_ranks.py"]]


def runs() -> list[list[str]]:
    if os.geteuid() == 0:
        return RUNS + ROOT_ONLY
    names = ", ".join(f"benchmarks/{args[0]}" for args in ROOT_ONLY)
    print(f"skipping {names}: they need root to build network namespaces")
    return RUNS


def main() -> int:
    failed = 0
    for args in runs():
        print(f"\n$ python benchmarks/{' '.join(args)}", flush=True)
        failed |= subprocess.run(
            [sys.executable, str(HERE / args[0]), *args[1:]], check=False
        ).returncode
    return failed


if __name__ == "__main__":
    sys.exit(main())
