"""Publish and pull throughput against a moto S3 server, next to s5cmd moving the same bytes.

    .venv/bin/python benchmarks/transfer.py [--gib 1] [--repeat 3]

Both tools talk to the same moto server (its own process, 127.0.0.1) in the same
run. wanrl-s3 publishes a safetensors snapshot of random bf16 tensors (so nothing
compresses) and pulls it back into a file with every tensor hash-verified; s5cmd
uploads and downloads the same file. Best of ``--repeat`` runs each.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import ml_dtypes
import numpy as np

from wanrl_s3.files import pull_to_file
from wanrl_s3.publisher import PublishConfig, Publisher
from wanrl_s3.safetensors_io import SafetensorsFile, write_file
from wanrl_s3.store import open_store
from wanrl_s3.subscriber import Subscriber
from wanrl_s3.testing import local_s3, make_bucket

MiB = 2**20


def make_snapshot(path: Path, gib: float) -> int:
    """Random bf16 tensors of transformer-like sizes, ``gib`` GiB in all."""
    rng = np.random.default_rng(0)
    total = int(gib * 2**30)
    tensors, size, i = {}, 0, 0
    while size < total:
        n = min(32 * MiB, (total - size) // 2)  # 64 MiB tensors, like an 8B model's MLP weights
        tensors[f"model.layers.{i}.mlp.up_proj.weight"] = rng.integers(
            0, 2**16, n, dtype=np.uint16
        ).view(ml_dtypes.bfloat16)
        size += 2 * n
        i += 1
    write_file(path, tensors)
    return size


def best(fn, repeat: int) -> float:
    times = []
    for i in range(repeat):
        times.append(fn(i))
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=16)
    args = ap.parse_args()
    s5cmd = shutil.which("s5cmd") or str(Path(sys.executable).parent / "s5cmd")
    work = Path(tempfile.mkdtemp(prefix="wanrl-bench-"))
    try:
        src = work / "snapshot.safetensors"
        nbytes = make_snapshot(src, args.gib)
        tensors = dict(SafetensorsFile(src).items())
        with local_s3() as endpoint:
            bucket = make_bucket(endpoint, "bench")
            store = open_store(f"s3://{bucket}/wanrl", endpoint_url=endpoint)
            cfg = PublishConfig(delta="never", concurrency=args.concurrency)

            def ours_up(i: int) -> float:
                t = time.perf_counter()
                Publisher(store, cfg).publish(tensors, i + 1)
                return time.perf_counter() - t

            def ours_down(i: int) -> float:
                t = time.perf_counter()
                with Subscriber(store, concurrency=args.concurrency) as sub:
                    pull_to_file(sub, work / "ours.safetensors", i + 1)
                return time.perf_counter() - t

            def s5_up(i: int) -> float:
                t = time.perf_counter()
                subprocess.run(
                    [
                        s5cmd,
                        "--endpoint-url",
                        endpoint,
                        "cp",
                        str(src),
                        f"s3://{bucket}/s5/{i}/snapshot.safetensors",
                    ],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                return time.perf_counter() - t

            def s5_down(i: int) -> float:
                dst = work / f"s5-{i}.safetensors"
                t = time.perf_counter()
                subprocess.run(
                    [
                        s5cmd,
                        "--endpoint-url",
                        endpoint,
                        "cp",
                        f"s3://{bucket}/s5/{i}/snapshot.safetensors",
                        str(dst),
                    ],
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                took = time.perf_counter() - t
                dst.unlink()
                return took

            up_ours, up_s5 = best(ours_up, args.repeat), best(s5_up, args.repeat)
            down_ours, down_s5 = best(ours_down, args.repeat), best(s5_down, args.repeat)
        mb = nbytes / 1e6
        print(
            f"snapshot: {nbytes / 2**30:.2f} GiB of bf16, moto_server on 127.0.0.1, "
            f"best of {args.repeat}"
        )
        print(f"{'direction':<10} {'wanrl-s3 MB/s':>14} {'s5cmd MB/s':>11} {'ratio':>6}")
        for name, ours, s5 in (("publish", up_ours, up_s5), ("pull", down_ours, down_s5)):
            print(f"{name:<10} {mb / ours:>14.0f} {mb / s5:>11.0f} {s5 / ours:>6.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
