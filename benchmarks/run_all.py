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
RUNS = [
    ["hashing.py"],
    ["codec.py"],
    ["transfer.py", "--gib", "1", "--repeat", "3"],
    ["fleet.py", "--workers", "8", "--mib", "256"],
    ["staleness_overhead.py"],
]
ROOT_ONLY = [["wan.py"]]  # builds a network namespace: needs root


def runs() -> list[list[str]]:
    if os.geteuid() == 0:
        return RUNS + ROOT_ONLY
    print("skipping benchmarks/wan.py: it needs root to build its network namespace")
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
