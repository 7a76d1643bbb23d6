"""Which content hash to verify every byte with: BLAKE3 against SHA-256, here.

    .venv/bin/python benchmarks/hashing.py [--mib 256]

Best of 5 over a random buffer, next to a plain memory copy of it.
"""

from __future__ import annotations

import argparse
import hashlib
import time

import blake3
import numpy as np


def best_gbps(fn, nbytes: int, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return nbytes / min(times) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=256)
    args = ap.parse_args()
    buf = np.random.default_rng(0).integers(0, 256, args.mib * 2**20, dtype=np.uint8)
    view = memoryview(buf)
    dst = np.empty_like(buf)
    rows = {
        "sha256 (hashlib)": lambda: hashlib.sha256(view).digest(),
        "blake3, 1 thread": lambda: blake3.blake3(view).digest(),
        "blake3, all cores": lambda: blake3.blake3(view, max_threads=blake3.blake3.AUTO).digest(),
        "memory copy": lambda: np.copyto(dst, buf),
    }
    print(f"{args.mib} MiB buffer, best of 5")
    for name, fn in rows.items():
        print(f"{name:<20} {best_gbps(fn, buf.nbytes):6.2f} GB/s")


if __name__ == "__main__":
    main()
